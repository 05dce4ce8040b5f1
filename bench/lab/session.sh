#!/bin/bash
# One H200 session's runs (lab use, not part of the product): the cold
# start, the sharing kinds, machine code against PTX only, and the GPU
# suite in both worlds. Build here with `make gpu-bin`, then on the GPU
# machine: `bash bench/lab/session.sh PART`, carrying .gpu-bin/a2a.test,
# .gpu-bin/ulysses and .gpu-bin/driver.test. Each step's output goes to
# $OUT/logs/NAME.txt; the folder comes back as one archive ($OUT keeps
# at most 8 files). With DEADLINE (epoch seconds) set, every step is cut
# to end by then, so that the logs come back. Parts, one or more:
#   timed   the cold-start rows, the later groups, the NCCL phases: alone
#           on the GPU, one process at a time
#   checks  info, the driver's tests, the sharing scenarios, ulysses check
#           with each sharing kind, machine code and PTX only, the wire
#   suite1  the first half of the a2a suite (-short) in two worlds side by
#           side: A = legacy IPC and machine code, B = file descriptors
#           and PTX only (the default, auto, is fd on an H200)
#   suite2  the second half, the same way
#   sharing the sharing scenarios alone; held1: one group with the device
#           held, in a fresh process; quick: the suite's quick tests in A,
#           then B; collectives-B, wire-B: those tests in B; rest (or
#           rest-A, rest-B): the long tests not yet run on this code;
#           nccl-launch: the NCCL phases at world one with each launch;
#           wireprobe: bench/lab/wireprobe.cu built there and run;
#           nccl-tests: the NCCL tests with every byte through NCCL (self),
#           the default launch and the async one
#   threads: bench at world one with .gpu-bin/ulysses and ulysses-t512
#   parcels: the staged wire, two ranks in one process: ulysses-old, and
#           ulysses with the decode after the exchange and as rows land
#   landing-variants: lab builds that split where landing's time goes
#   sms32: the wire on 32 SMs, two ranks on the GPU, ulysses-old and ulysses
#   world1: a rank alone, the four operations, exact and e4m3, twice
#   world1-cmp: the same with ulysses-old and ulysses, then both staged
#   ncu1: Nsight Compute on a rank alone, exact and e4m3
#   ncu-src: Nsight Compute's per-instruction view (SASS, executed
#           instructions and stalls, as CSV) of the wire's direct path, a rank
#           alone on 32 SMs, 128 MiB SendRecvHeads: where its instructions go
#   reasons: the NCCL transport at world one without --nccl-self beside
#           PyTorch (both a local copy), the NCCL tests under NCCL's network
#           settings, a rank alone on 32 SMs timed and under Nsight Compute
#   nccl-wire: the fp8 wire over NCCL at world one: the NCCL tests with it
#           (every byte through NCCL, then the own box copied), check in
#           both formats, and the bench's phases beside the exact wire
#   data: the inputs' data: finite values like activations (the bench's
#           default) against every bit pattern (--data bits, the fp8 wire's
#           slowest case): a rank alone, two ranks staged on all SMs and on
#           32, the staged exchange without its decode (ulysses-nodecode, a
#           lab build of bench/lab/no-decode.patch), the NCCL wire's phases,
#           and Nsight Compute's count of the direct path's instructions
#   ncu32: Nsight Compute on a rank alone on 32 SMs, exact and e4m3
#   wire-final: ulysses check of two ranks over each fp8 wire
#   hoist: ulysses-base (built here from the commit before) against
#           ulysses, a rank alone and two ranks staged on all SMs and on 32,
#           twice, alternating
#   world1-d128: a rank alone, this binary against ulysses-d128 (a lab
#           build whose wide wire path knows head sizes 64 and 128 at
#           compile time), twice, alternating, then both staged
#   A:REGEX, B:REGEX: the tests REGEX names (-test.run) in world A or B;
#           REGEX may be long, quick, rest or other (the sets below, which
#           together are the whole a2a GPU suite)
#   dumpA:REGEX, dumpB:REGEX: the same, and where the log stops growing
#           for $DUMP_AFTER seconds (default 60), every rank process is
#           sent SIGQUIT, so that its goroutines are printed (the regex
#           has a part per level of subtest: ^TestX$/^a$/^b$/c)
set -u
parts=${*:?part}
export ULYSSES_REQUIRE_GPU=1 NCCL_NVLS_ENABLE=0 CUDA_DEVICE_MAX_CONNECTIONS=32
export ULYSSES_LIBNCCL=${ULYSSES_LIBNCCL:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2}
root=$(pwd)
bin=$root/.gpu-bin
out=${OUT:-/tmp/out}
logs=$out/logs
mkdir -p "$logs"
cache=${CUDA_CACHE_PATH:-$HOME/.nv/ComputeCache}
summary=""
step() { # name, timeout seconds, command (a bash line)
	local name=$1 limit=$2 start end r left
	if [ -n "${DEADLINE:-}" ]; then # epoch seconds by which every step must end
		left=$((DEADLINE - $(date +%s)))
		[ "$left" -lt "$limit" ] && limit=$left
		if [ "$limit" -le 5 ]; then
			echo "SKIP $name (no time left)" | tee -a "$logs/summary.txt"
			return
		fi
	fi
	start=$(date +%s%N)
	if timeout -k 5 "$limit" bash -c "$3" >"$logs/$name.txt" 2>&1; then r=PASS; else r="FAIL rc=$?"; fi
	end=$(date +%s%N)
	printf '%s %s (%.1f s)\n' "$r" "$name" "$(((end - start) / 1000000))e-3" | tee -a "$logs/summary.txt"
}
lifecycle() { # bench pattern, count
	(cd a2a && "$bin/a2a.test" -test.run '^$' -test.bench "BenchmarkGroupLifecycle/$1" -test.benchtime "$2" -test.v)
}
suite() { # world (A or B), -test.run or -test.skip, pattern
	if [ "$1" = B ]; then
		export ULYSSES_TEST_SHARING=fd ULYSSES_PTX_ONLY=1
	else
		export ULYSSES_TEST_SHARING=legacy-ipc
	fi
	cd a2a && "$bin/a2a.test" -test.v -test.short -test.count=1 -test.timeout 560s "$2" "$3"
}
# world1 times a rank alone at the four operations, exact and e4m3, with
# a binary of .gpu-bin and any more bench flags, as the step NAME (and
# NAME.json).
world1() { # name, binary, [flags]
	step "$1" 120 "\"\$bin/$2\" bench --world 1 ${3:-} --dtypes bf16 --wires exact,e4m3 --bytes 8M,128M \
		--ops send_recv_heads,gather_heads,all_gather,head_all_gather --iters 200 --json $logs/$1.json"
}
# staged times the fp8 wire staged (--wire-direct-below 1) with two ranks
# on the GPU in one process, 8 and 128 MiB, with a binary of .gpu-bin, the
# wires, the operations and any more bench flags, as the step NAME (and
# NAME.json).
staged() { # name, binary, limit, wires, ops, [flags]
	step "$1" "$3" "\"\$bin/$2\" bench ${6:-} --single-process --ranks-per-gpu 2 --dtypes bf16 --wires $4 \
		--wire-direct-below 1 --bytes 8M,128M --ops $5 --iters 100 --json $logs/$1.json"
}
# ops3 is the three operations PyTorch + NCCL has too.
ops3=send_recv_heads,gather_heads,all_gather
# ncusrh is Nsight Compute on a rank alone's 128 MiB SendRecvHeads over
# a wire, with any more bench flags, as the step NAME.
ncusrh() { # name, wire, [flags]
	step "$1" 150 "ncu --clock-control none --target-processes all --kernel-name regex:'ulysses_send_recv_heads' --launch-skip 4 --launch-count 1 \
		--section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats \
		--metrics smsp__inst_executed.sum,dram__bytes.sum \"\$bin/ulysses\" bench --single-process --world 1 ${3:-} --dtypes bf16 --wires $2 \
		--bytes 128M --ops send_recv_heads --iters 4"
}
# ncu32 is ncusrh on 32 SMs, exact and e4m3.
ncu32() {
	for w in exact e4m3; do
		ncusrh "ncu32-$w" $w "--sms 32"
	done
}
# stepname is a step's log name: prefix, then the text (a test regex, a
# binary and its flags) with every character but letters and digits made
# _, cut to 60.
stepname() { # prefix, text
	echo "$1-$(echo "$2" | tr -c 'A-Za-z0-9\n' _ | cut -c1-60)"
}
# stalled sends SIGQUIT to every rank process (ULYSSES_RANK in its
# environment) once log has not grown for quiet seconds, so that each
# prints its goroutines (and the driver calls they are in) into the log.
stalled() { # log, quiet seconds
	local size last=-1 since
	since=$(date +%s)
	while sleep 5; do
		size=$(stat -c %s "$1" 2>/dev/null || echo 0)
		if [ "$size" != "$last" ]; then
			last=$size since=$(date +%s)
		elif [ $(($(date +%s) - since)) -ge "$2" ]; then
			for p in $(pgrep -f a2a.test); do
				tr '\0' '\n' </proc/"$p"/environ 2>/dev/null | grep -q '^ULYSSES_RANK=' && kill -QUIT "$p"
			done
			since=$(date +%s)
		fi
	done
}
export bin
export -f lifecycle suite
long='^(TestCollectivesMultiProcess|TestPeerClosesDuringOperation|TestUploadThenOperate|TestBarrierTimeout|TestKilledPeer|TestMismatchedOperations)$'
# The quick tests of the suite: the enqueue's allocations, groups in one
# process, caller streams, graphs, the examples, mismatches, timeouts.
quick='^(TestEnqueueAllocations|TestGroupSingleProcess|TestCallerStream|TestCallerStreamKernels|TestExamples|TestOddGraphReplayedTwice|TestGraphPeerStopsReplaying|TestGroupRankClosesAfterTimeout|TestCloseEndsBlockedSync|TestSyncContextEndsWait|TestGraphReplay|TestZeroCommRefuses|TestNCCLTransport)$'
# The long tests not in long, and the ones no set names; long, quick, rest
# and other hold each GPU test of a2a once.
rest='^(TestCommsAtOnce|TestStress|TestGraphViewsOutliveLateReads|TestWire)$'
other='^(TestAutoTransport|TestNCCLGroup|TestNCCLKilledPeer|TestNCCLTimeout|TestSharingProcesses|TestSharingKilledPeer)$'
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader | tee "$logs/gpu.txt"
for part in $parts; do
case $part in
timed)
	step info 30 '"$bin/ulysses" info'
	step info-ptx-only 30 'ULYSSES_PTX_ONLY=1 "$bin/ulysses" info'
	for w in exact e4m3; do
		rm -rf "$cache"
		step "cold-$w-cubin" 60 "lifecycle $w/dropped 1x"
		rm -rf "$cache"
		step "cold-$w-ptx" 90 "ULYSSES_PTX_ONLY=1 lifecycle $w/dropped 1x"
		step "cold-$w-ptx-nocache" 90 "CUDA_CACHE_DISABLE=1 ULYSSES_PTX_ONLY=1 lifecycle $w/dropped 1x"
	done
	step later-cubin 120 "lifecycle 'exact/(dropped|held)' 20x"
	step later-ptx 120 "ULYSSES_PTX_ONLY=1 lifecycle 'exact/(dropped|held)' 20x"
	step nccl-self 150 '"$bin/ulysses" bench --world 1 --transport nccl --nccl-self --dtypes bf16 \
		--bytes 128K,8M,128M --ops send_recv_heads,gather_heads,all_gather --iters 200 \
		--compare nccl --json '"$logs/nccl-self.json"
	;;
checks)
	step driver 120 'cd internal/driver && "$bin/driver.test" -test.v -test.count=1'
	;&
sharing)
	step sharing 240 "cd a2a && \"\$bin/a2a.test\" -test.v -test.count=1 -test.timeout 230s -test.run 'TestSharing(Processes|KilledPeer)'"
	[ "$part" = sharing ] && continue
	nvidia-smi --query-gpu=memory.used --format=csv,noheader >"$logs/mem-before-checks.txt"
	for s in legacy-ipc fd auto; do
		step "check-world4-$s" 90 "\"\$bin/ulysses\" check --world 4 --sharing $s"
	done
	nvidia-smi --query-gpu=memory.used --format=csv,noheader >"$logs/mem-after-checks.txt"
	step check-world2-cubin 90 '"$bin/ulysses" check --world 2'
	step check-world2-ptx 120 'ULYSSES_PTX_ONLY=1 "$bin/ulysses" check --world 2'
	step check-wire-e4m3-cubin 90 '"$bin/ulysses" check --world 2 --wire e4m3 --dtypes bf16,fp16'
	step check-wire-e5m2-ptx 120 'ULYSSES_PTX_ONLY=1 "$bin/ulysses" check --world 2 --wire e5m2 --dtypes bf16,fp16'
	;;
held1)
	step later-held-1x 60 "lifecycle 'exact/held' 1x"
	;;
quick)
	step quick-A 200 "suite A -test.run '$quick'"
	step quick-B 200 "suite B -test.run '$quick'"
	;;
collectives-B)
	step collectives-B 200 "suite B -test.run 'TestCollectivesMultiProcess/^world2$'"
	;;
wire-B)
	step wire-B 200 "suite B -test.run '^TestWire$'"
	;;
nccl-tests)
	for tn in self async,self; do # self: the default launch (auto)
		step "nccl-tests-${tn/,/-}" 200 "ULYSSES_TEST_NCCL=$tn suite A -test.run '^TestNCCL'"
	done
	;;
wireprobe)
	step wireprobe 120 "nvcc -O3 -arch=sm_90 -o /tmp/wireprobe bench/lab/wireprobe.cu && /tmp/wireprobe"
	;;
nccl-launch)
	for l in ${NCCL_LAUNCHES:-auto async blocking}; do
		step "nccl-self-$l" 150 "\"\$bin/ulysses\" bench --world 1 --transport nccl --nccl-self --nccl-launch $l --dtypes bf16 \
			--bytes 128K,8M,128M --ops send_recv_heads,gather_heads,all_gather --iters 200 --compare nccl --json $logs/nccl-self-$l.json"
	done
	;;
threads)
	# The exact kernels' block size for a rank alone: the default binary
	# against one built with 512 threads where a rank has its GPU alone
	# (.gpu-bin/ulysses-t512, built here for the run), twice, alternating.
	for i in 1 2; do
		for b in ulysses ulysses-t512; do
			step "threads-$b-$i" 120 "\"\$bin/$b\" bench --world 1 --dtypes bf16 --wires exact,e4m3 --bytes 8M,128M \
				--ops send_recv_heads,gather_heads,all_gather --iters 200 --json $logs/threads-$b-$i.json"
		done
	done
	;;
parcels)
	# The staged fp8 wire with two ranks on the GPU in one process: the
	# decode as rows land (--wire-landing on) against after the exchange
	# (off), and the binary from before parcels (.gpu-bin/ulysses-old, built
	# here for the run), on all SMs and on 32.
	for i in 1 2; do
		for v in ulysses-old: "ulysses:--wire-landing off" "ulysses:--wire-landing on"; do
			b=${v%%:*} f=${v#*:} name=$(stepname parcels "$v")
			staged "$name-$i" "$b" 150 exact,e4m3 $ops3 "$f --sms 0,32"
		done
	done
	;;
landing-variants)
	# Where the decode as rows land loses on one GPU: this binary with it
	# off and on, one whose landing words are released at GPU scope
	# (ulysses-gpu: not enough across GPUs; a lab build), one that looks
	# for landed parcels but decodes none in the exchange (ulysses-nodecode)
	for v in "ulysses:--wire-landing off" "ulysses:--wire-landing on" "ulysses-gpu:--wire-landing on" "ulysses-nodecode:--wire-landing on"; do
		b=${v%%:*} f=${v#*:} name=$(stepname variant "$v")
		staged "$name" "$b" 100 e4m3 send_recv_heads,all_gather "$f"
	done
	;;
world1)
	# A rank alone, all four operations (the fp8 wire's target 2), twice.
	for i in 1 2; do
		world1 "world1-$i" ulysses
	done
	;;
world1-cmp)
	# A rank alone, the four operations: .gpu-bin/ulysses-old (built here
	# from main for the run) against this binary, twice, alternating.
	for i in 1 2; do
		for b in ulysses-old ulysses; do
			world1 "world1-$b-$i" "$b"
		done
	done
	for b in ulysses-old ulysses; do
		staged "staged-$b" "$b" 120 e4m3 $ops3
	done
	;;
ncu-src)
	step ncu-src-e4m3 200 "ncu --clock-control none --target-processes all --kernel-name regex:'ulysses_send_recv_heads_wire' --launch-skip 4 --launch-count 1 \
		--section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
		\"\$bin/ulysses\" bench --single-process --world 1 --sms 32 --dtypes bf16 --wires e4m3 --bytes 128M --ops send_recv_heads --iters 4"
	;;
reasons)
	step nccl-world1-local 150 '"$bin/ulysses" bench --world 1 --transport nccl --wires exact,e4m3 --dtypes bf16 \
		--bytes 128K,8M,128M --ops send_recv_heads,gather_heads,all_gather --iters 200 --compare nccl --json '"$logs/nccl-world1-local.json"
	step nccl-tests-net-self 120 "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 ULYSSES_TEST_NCCL=self suite A -test.run '^TestNCCLTransport$'"
	step world1-sms32 120 '"$bin/ulysses" bench --world 1 --sms 32 --dtypes bf16 --wires exact,e4m3 --bytes 8M,128M \
		--ops send_recv_heads,gather_heads,all_gather --iters 200 --json '"$logs/world1-sms32.json"
	ncu32
	;;
ncu32)
	ncu32
	;;
wire-final)
	for w in e4m3 e5m2; do
		step "check-wire-$w" 120 "\"\$bin/ulysses\" check --world 2 --wire $w --dtypes bf16,fp16"
	done
	;;
nccl-wire)
	step nccl-wire-tests-self 240 "ULYSSES_TEST_NCCL=self suite A -test.run '^TestNCCLTransport$'"
	step nccl-wire-tests-own 240 "suite A -test.run '^TestNCCLTransport$'"
	for w in e4m3 e5m2; do
		step "check-nccl-wire-$w" 90 "\"\$bin/ulysses\" check --world 1 --transport nccl --wire $w --dtypes bf16,fp16"
	done
	step nccl-wire-bench 200 '"$bin/ulysses" bench --world 1 --transport nccl --nccl-self --wires exact,e4m3 --dtypes bf16 \
		--bytes 128K,8M,128M --ops send_recv_heads,gather_heads,all_gather --iters 200 --compare nccl --json '"$logs/nccl-wire.json"
	;;
data)
	for d in values bits; do
		world1 "world1-$d" ulysses "--data $d"
		staged "staged-$d" ulysses 150 exact,e4m3 $ops3 "--data $d"
	done
	staged staged-nodecode ulysses-nodecode 150 e4m3 $ops3 "--sms 0,32"
	staged staged32-values ulysses 150 exact,e4m3 $ops3 "--sms 32"
	step world1-sms32-values 120 '"$bin/ulysses" bench --world 1 --sms 32 --dtypes bf16 --wires exact,e4m3 --bytes 8M,128M \
		--ops send_recv_heads,gather_heads,all_gather --iters 200 --json '"$logs/world1-sms32-values.json"
	step nccl-wire-values 150 '"$bin/ulysses" bench --world 1 --transport nccl --nccl-self --wires exact,e4m3 --dtypes bf16 \
		--bytes 128K,8M,128M --ops send_recv_heads,gather_heads,all_gather --iters 200 --json '"$logs/nccl-wire-values.json"
	ncusrh ncu-values-e4m3 e4m3
	;;
hoist)
	for i in 1 2; do
		for b in ulysses-base ulysses; do
			world1 "world1-$b-$i" "$b"
			staged "staged-$b-$i" "$b" 150 e4m3 $ops3 "--sms 0,32"
		done
	done
	;;
world1-d128)
	for i in 1 2; do
		for b in ulysses ulysses-d128; do
			world1 "world1-$b-$i" "$b"
		done
	done
	for b in ulysses ulysses-d128; do
		staged "staged-$b" "$b" 120 e4m3 $ops3
	done
	;;
ncu1)
	# Nsight Compute on a rank alone, 128 MiB SendRecvHeads and GatherHeads,
	# exact and e4m3 (clocks as they are).
	for w in exact e4m3; do
		step "ncu-$w" 150 "ncu --clock-control none --target-processes all --kernel-name regex:'ulysses_(send_recv|gather)_heads' --launch-skip 4 --launch-count 2 \
			--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats \
			--metrics smsp__inst_executed.sum,dram__bytes.sum \"\$bin/ulysses\" bench --single-process --world 1 --dtypes bf16 --wires $w --bytes 128M \
			--ops send_recv_heads,gather_heads --iters 4"
	done
	;;
sms32)
	# The wire's block size where two ranks share the GPU on 32 SMs each:
	# 256 threads (.gpu-bin/ulysses-old, built here for the run) against 512
	# (this binary), twice, alternating; then the check at that size.
	for i in 1 2; do
		for b in ulysses-old ulysses; do
			staged "sms32-$b-$i" "$b" 100 exact,e4m3 $ops3 "--sms 32"
		done
	done
	step check-wire-sms32 90 '"$bin/ulysses" check --world 2 --wire e4m3 --dtypes bf16,fp16 --sms 32'
	;;
rest | rest-A | rest-B)
	[ "$part" != rest-B ] && step rest-A 580 "suite A -test.run '$rest'"
	[ "$part" != rest-A ] && step rest-B 580 "suite B -test.run '$rest'"
	;;
suite1 | suite2)
	if [ "$part" = suite1 ]; then sel="-test.run '$long'"; else sel="-test.skip '$long|^TestSharing'"; fi
	step "$part-A" 580 "suite A $sel" &
	sleep 2
	step "$part-B" 580 "suite B $sel" &
	wait
	;;
dumpA:* | dumpB:*)
	w=${part%%:*}
	w=${w#dump}
	name=$(stepname "dump$w" "${part#*:}")
	stalled "$logs/$name.txt" "${DUMP_AFTER:-60}" >/dev/null 2>&1 &
	watcher=$!
	step "$name" 580 "suite $w -test.run '${part#*:}'"
	kill "$watcher" 2>/dev/null
	;;
A:* | B:*)
	w=${part%%:*} sel=${part#*:}
	case $sel in # the named sets
	long | quick | rest | other) name="$w-$sel" sel=${!sel} ;;
	*) name=$(stepname "$w" "$sel") ;;
	esac
	step "$name" 580 "suite $w -test.run '$sel'"
	;;
*)
	echo "unknown part $part" >&2
	exit 2
	;;
esac
done
for f in "$logs"/*.txt; do
	case $f in */summary.txt | */gpu.txt) ;; *) echo "== $f"; grep -E '^(--- |ok|PASS|FAIL|panic)|^    --- (FAIL|SKIP)|newgroup-ms|Benchmark|kernels|error' "$f" | head -25 ;; esac
done
cat "$logs/summary.txt"
tar -C "$out" -czf "$out/logs.tgz" logs && rm -rf "$logs"
