#!/usr/bin/env bash
# Builds and runs the kernel lab for a few THREADS/UNROLL choices on the
# GPU machine (needs nvcc there). Usage: bench/lab/run.sh [iters]
set -euo pipefail
cd "$(dirname "$0")"
iters=${1:-200}
out=${OUT:-/tmp}
variants="512:8 512:16 1024:8 256:8"
for v in $variants; do
  t=${v%:*}; u=${v#*:}
  nvcc -O3 -arch=sm_90 -DELEM_BYTES=2 -DTHREADS=$t -DUNROLL=$u -o "$out/lab_${t}_$u" lab.cu &
done
wait
for v in $variants; do
  t=${v%:*}; u=${v#*:}
  blocks=132,32
  [ "$t" = 256 ] && blocks=264,132,64
  LAB_BLOCKS=$blocks "$out/lab_${t}_$u" "$iters"
done
