#!/usr/bin/env bash
# The GPU code's build options for diagnostics and comparisons (tests/bench/RESULTS.md: phase
# clocks, the former forms kept for A/B runs) must keep compiling: each kernel file is compiled
# (nvcc -c, sm_90, no output kept) with each of its options.
# Usage: check_cuda_variants.sh NVCC SOURCE_DIR GENERATED_INCLUDE_DIR (nnpops/version.h)
set -euo pipefail
nvcc=$1
src=$2
gen=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
variants=(
  "potentials/ani/cuda/aev.cu -DNNPOPS_AEV_STAMPS"
  "potentials/ani/cuda/aev.cu -DNNPOPS_AEV_LANES_LATE"
  "potentials/ani/cuda/tail.cu -DNNPOPS_TAIL_STAMPS"
  "potentials/ani/cuda/tail.cu -DNNPOPS_TAIL_PULL"
  "kernels/cuda/neighbors.cu -DNBR_SWEEP_PAIRS=0"
  "kernels/cuda/neighbors.cu -DNBR_EMIT_EARLY=0 -DNBR_BIN_SCAN_MAX=0"
  "kernels/cuda/neighbors.cu -DNBR_EMIT_EARLY=1 -DNBR_FAST_EMIT_TB=256"
  "kernels/cuda/mlp.cu -DNNPOPS_PDL_EARLY=0"
)
status=0
for v in "${variants[@]}"; do
  read -r file flags <<< "$v"
  # shellcheck disable=SC2086
  if "$nvcc" -arch=sm_90 -O1 -std=c++17 -DNNPOPS_HAVE_CUDA=1 -I"$src" -I"$src/core/include" -I"$gen" \
      -I"$src/core/src" -I"$src/kernels/cuda" -I"$src/kernels/cpu" $flags \
      -c "$src/$file" -o "$out/v.o"; then
    echo "ok: $file $flags"
  else
    echo "FAILED: $file $flags"
    status=1
  fi
done
exit $status
