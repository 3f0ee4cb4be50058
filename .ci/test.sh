#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs dependencies (apt, pip, LAMMPS build, cached),
# configures and builds nnpops with the LAMMPS plugin, converts the models, runs `ctest -LE slow`.
# Usage: bash .ci/test.sh [extra ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash .ci/install-deps.sh
lammps_env=$(bash .ci/build-lammps.sh | grep -E '^LAMMPS_(SRC|LMP)=')
eval "export $(echo "$lammps_env" | tr '\n' ' ')"
trixie=$(bash .ci/build-lammps.sh --trixie-source | grep -E '^LAMMPS_TRIXIE_SRC=' || true)
[ -n "$trixie" ] && eval "export $trixie"

build=${NNPOPS_BUILD:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DNNPOPS_ENABLE_CUDA=OFF \
    -DNNPOPS_BUILD_TESTS=ON -DNNPOPS_BUILD_LAMMPS=ON -DLAMMPS_SOURCE_DIR="$LAMMPS_SRC" \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest -LE slow --output-on-failure -j"$(nproc)" "$@"
