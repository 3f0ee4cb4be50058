#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, builds libnnpops, converts ANI-2x from the
# NeuroChem files (../shared/models/neurochem or NNPOPS_NEUROCHEM_PATH) into the model cache, then
# computes ANI-2x energy and forces of a bundled alanine molecule and runs a short MD with timing.
# Usage: bash examples/run.sh [arguments of examples/ase_md.py, e.g. --steps 400 --precision float32]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bash .ci/install-deps.sh
build=${NNPOPS_BUILD:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DNNPOPS_ENABLE_CUDA=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target nnpops >/dev/null
export NNPOPS_LIBRARY="$build/libnnpops.so"
export PYTHONPATH="$root/wrappers${PYTHONPATH:+:$PYTHONPATH}"
python3 -m nnpops convert ani2x
exec python3 "$root/examples/ase_md.py" "$@"
