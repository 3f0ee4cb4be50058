#!/usr/bin/env bash
# The pip path: builds the wheel from the source tree (`pip wheel .`, scikit-build-core), installs
# it with its test extra (ase, pytest) into a fresh virtual environment (python3 -m venv, no
# system site packages), converts ANI-1x and ANI-2x with the installed `nnpops convert`, and
# runs a smoke subset of the Python tests against the installed package, outside the source
# tree and with no NNPOPS_LIBRARY / NNPOPS_HEADER / PYTHONPATH: tests/install/ (library, header and CMake package inside the package, one version,
# find_package from a pip install, ANI-1x against torchani) and tests/ase/test_binding.py; then
# `nnpops analyze` of the installed package (its analyze extra) on both model families.
# Usage: bash .ci/wheel-smoke.sh [WORKDIR]   (default build/wheel-smoke; needs PyPI for the build
# backend and the runtime dependencies)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=${1:-$root/build/wheel-smoke}
shared=${NNPOPS_SHARED_DIR:-$root/../shared}
rm -rf "$work"
mkdir -p "$work"
launcher=()
command -v ccache >/dev/null && launcher=(-C cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache)
python3 -m pip wheel "$root" --no-deps --wheel-dir "$work/dist" -C build-dir="$work/cmake-build" \
    "${launcher[@]}" >"$work/wheel.log" 2>&1 || { cat "$work/wheel.log"; exit 1; }
python3 -m venv "$work/venv"
wheel=$(ls "$work"/dist/nnpops-*.whl)
"$work/venv/bin/python" -m pip install --quiet "$wheel[test,analyze]"
cd "$work"
clean_env=(env -u NNPOPS_LIBRARY -u NNPOPS_HEADER -u PYTHONPATH -u NNPOPS_MODEL_PATH
           XDG_CACHE_HOME="$work/cache" NNPOPS_SHARED_DIR="$shared")
"${clean_env[@]}" NNPOPS_NEUROCHEM_PATH="$shared/models/neurochem" \
    "$work/venv/bin/nnpops" convert --output "$work/models" ani1x ani2x
"${clean_env[@]}" NNPOPS_MODEL_PATH="$work/models" "$work/venv/bin/python" -m pytest -q \
    -p no:cacheprovider --rootdir "$work" "$root/tests/install/test_installed.py" \
    "$root/tests/ase/test_binding.py"
"${clean_env[@]}" "$work/venv/bin/nnpops" convert --from-torchmdnet \
    "$shared/reference/tensornet/tn_a.ckpt" --output "$work/models"
"${clean_env[@]}" "$work/venv/bin/python" -c "import ase.io; from nnpops import structures; \
ase.io.write('ethanol.xyz', structures.get('ethanol'))"
for model in ani1x tn_a; do
  "${clean_env[@]}" NNPOPS_MODEL_PATH="$work/models" "$work/venv/bin/nnpops" analyze "$model" \
      ethanol.xyz --json "analyze_$model.json" --plot "analyze_$model.png" >"analyze_$model.txt"
  grep -q '"checked": true' "analyze_$model.json"
  test -s "analyze_$model.png"
done
