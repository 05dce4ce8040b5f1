#!/bin/sh
# The GPU checks written but not yet run on a device (lab use, not part of
# the product): the fp8 wire, and the exact kernels again now that their
# argument grew. Build here with `make gpu-bin`, then run on the GPU
# machine, carrying only .gpu-bin/a2a.test and .gpu-bin/ulysses (the whole
# .gpu-bin is over the 64 MiB a call carries). Prints one PASS/FAIL line
# per check at the end. Pass a pattern to run only the checks whose name
# matches it (`sh bench/lab/pending.sh 'wire'`).
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
# Every operation over the fp8 wire against the reference's round trip.
check wire-test "$bin/a2a.test" -test.v -test.count=1 -test.timeout 400s -test.run 'TestWire$'
check wire-check "$bin/ulysses" check --world 2 --wire e4m3 --dtypes bf16,fp16
# The exact kernels with the grown argument: one process, graphs, allocations.
check exact-regression "$bin/a2a.test" -test.short -test.count=1 -test.timeout 300s \
	-test.run 'TestGroupSingleProcess|TestGraphReplay$|TestEnqueueAllocations'
# The wire beside the exact exchange, all SMs and 32.
check wire-bench "$bin/ulysses" bench --single-process --ranks-per-gpu 2 --dtypes bf16 --wires exact,e4m3 \
	--bytes 128K,8M,128M --sms 0,32 --iters 200 --json "$out/wire-bench.json"
echo "$summary"
