#!/bin/sh
# The GPU checks written but not yet run on a device (lab use, not part of
# the product). Build here with `make gpu-bin`, then run on the GPU
# machine, carrying only .gpu-bin/a2a.test, .gpu-bin/ulysses,
# .gpu-bin/attention.test and .gpu-bin/attention (the whole .gpu-bin is
# over the 64 MiB a call carries). Prints one PASS/FAIL line per check at
# the end. Pass a pattern to run only the checks whose name matches it
# (`sh bench/lab/pending.sh 'wire'`). The two-GPU checks skip, or run
# with every rank on GPU 0, where there is one GPU: run them on two.
set -u
export ULYSSES_REQUIRE_GPU=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
	NVSHMEM_DISABLE_NVLS=1 CUDA_DEVICE_MAX_CONNECTIONS=32
export ULYSSES_LIBNCCL=${ULYSSES_LIBNCCL:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2}
bin=$(cd "${BIN:-.gpu-bin}" && pwd)
out=${OUT:-/tmp}
summary=""
only=${1:-.}
check() { # name, command...
	name=$1
	shift
	echo "$name" | grep -Eq "$only" || return 0
	echo "== $name"
	if "$@" >"$out/$name.txt" 2>&1; then r=PASS; else r="FAIL rc=$?"; fi
	tail -15 "$out/$name.txt"
	summary="$summary
$r $name"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# The fp8 wire: its tests on both paths, the check, the closing and
# several-Comms tests with wire Comms (all passed with both ranks on one
# GPU), and on two GPUs the bench on both paths: the targets of
# docs/BENCHMARKS.md beside the exact exchange and NCCL, and the crossover
# of the direct and staged paths.
check wire-test "$bin/a2a.test" -test.v -test.count=1 -test.short -test.timeout 400s -test.run 'TestWire$'
check wire-check "$bin/ulysses" check --wire e4m3 --dtypes bf16,fp16
check wire-closing "$bin/a2a.test" -test.v -test.count=1 -test.short -test.timeout 300s \
	-test.run 'TestPeerClosesDuringOperation|TestCommsAtOnce/comms4/sms(0|32)/same-gpu'
two=$([ "$(nvidia-smi -L | wc -l)" -ge 2 ] && echo 1 || echo 0)
if [ "$two" = 1 ]; then
	check wire-bench "$bin/ulysses" bench --dtypes bf16 --wires exact,e4m3 --bytes 128K,1M,8M,32M,128M --sms 0,32 \
		--iters 400 --graph-ops 32 --compare nccl --json "$out/wire-bench.json"
	check wire-bench-staged "$bin/ulysses" bench --dtypes bf16 --wires e4m3 --bytes 128K,1M,8M,32M --wire-direct-below 1 \
		--iters 400 --graph-ops 32 --json "$out/wire-bench-staged.json"
	check wire-bench-direct "$bin/ulysses" bench --dtypes bf16 --wires e4m3 --bytes 1M,8M,32M,128M --wire-direct-below 1G \
		--iters 400 --graph-ops 32 --json "$out/wire-bench-direct.json"
fi
# The exact kernels after the wire's changes (their PTX changed in its hash only).
check exact-regression "$bin/a2a.test" -test.short -test.count=1 -test.timeout 300s \
	-test.run 'TestGroupSingleProcess|TestGraphReplay$|TestEnqueueAllocations|TestCollectivesMultiProcess/world2$'
# The copy-engine mode with a process per rank on the current code: uploads
# followed at once by operations, timeouts, a killed peer (the closing and
# several-Comms tests above hold copy-engine Comms too).
check ce-failures "$bin/a2a.test" -test.v -test.count=1 -test.short -test.timeout 300s \
	-test.run 'TestUploadThenOperate|TestBarrierTimeout|TestKilledPeer'
# The copy engines with a process per GPU against one process (two GPUs
# only): the gap, the crossover against the kernels for MoverAuto, the
# overlap beside the bench's compute kernel; then the probe with a sync
# step between rounds, one process and IPC (built here with nvcc).
if [ "$two" = 1 ]; then
	for mode in "" --single-process; do
		name=ce-bench${mode:+-one-process}
		check "$name" "$bin/ulysses" bench $mode --mover copy-engines --dtypes bf16 --bytes 8M,32M,64M,128M \
			--iters 400 --overlap --json "$out/$name.json"
	done
	check ce-kernels "$bin/ulysses" bench --mover kernels --dtypes bf16 --bytes 8M,32M,64M,128M --sms 0,16,32 \
		--iters 400 --overlap --json "$out/ce-kernels.json"
	check cecopy sh -c "nvcc -O3 -arch=sm_90 -o '$out/cecopy' bench/lab/cecopy.cu -lcuda && '$out/cecopy' one && '$out/cecopy' ipc"
fi
# The attention example with a rank per GPU, then four ranks on them.
check attention-test sh -c "cd examples/attention && $bin/attention.test -test.v -test.count=1"
check attention-run "$bin/attention"
check attention-4ranks "$bin/attention" --ranks 4
echo "$summary"
