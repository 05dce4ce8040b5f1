#!/bin/sh
# The GPU checks written but not yet run on a device, in five calls (lab use,
# not part of the product). Build here with `make gpu-bin`, then run on the
# GPU machine, carrying only these (the whole .gpu-bin is over the 64 MiB a
# call carries): .gpu-bin/attention.test .gpu-bin/attention .gpu-bin/a2a.test
# .gpu-bin/ulysses. Prints one PASS/FAIL line per check at the end.
# All of it takes longer than one call's 10 minutes: pass a pattern to run
# the checks whose name matches it (`sh bench/lab/pending.sh 'attention|nccl|bench'`,
# then 'comms|stress', 'collectives', 'suite', 'graphs').
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
check attention-test sh -c "cd examples/attention && $bin/attention.test -test.v -test.count=1"
check attention-run "$bin/attention"
check attention-4ranks "$bin/attention" --ranks 4
check nccl-group "$bin/a2a.test" -test.v -test.count=1 -test.run 'TestNCCLGroup$'
check bench-plot "$bin/ulysses" bench --single-process --dtypes bf16 --bytes 128K,8M,128M \
	--iters 200 --json "$out/bench.json" --plot "$out/bench.svg"
# The whole short suite, on the transports as the review left them.
check suite "$bin/a2a.test" -test.short -test.count=1 -test.timeout 540s \
	-test.skip 'TestCollectivesMultiProcess|TestStress|TestCommsAtOnce|TestGraphViewsOutliveLateReads|TestGraphReplay'
check graphs "$bin/a2a.test" -test.v -test.count=1 -test.timeout 540s -test.run 'TestGraphViewsOutliveLateReads|TestGraphReplay$|TestOddGraphReplayedTwice'
# The back-to-back race with reads up to 3 ms late (was 0.3 ms).
check collectives "$bin/a2a.test" -test.v -test.count=1 -test.timeout 540s -test.run 'TestCollectivesMultiProcess/(world1|world2|world2-same-gpu)$'
# The refactored layers under several Comms at once, and the race stress.
check comms-at-once "$bin/a2a.test" -test.v -test.count=1 -test.timeout 540s -test.run 'TestCommsAtOnce$'
check stress "$bin/a2a.test" -test.v -test.count=1 -test.timeout 540s -test.run 'TestStress/world2$'
echo "$summary"
