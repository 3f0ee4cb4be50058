#!/usr/bin/env bash
# The main job on a fresh machine: installs the system dependencies, installs nnpops with pip into
# a fresh virtual environment (build/venv; pip builds libnnpops into the package), converts ANI-2x
# from the published NeuroChem files (../shared/models/neurochem or NNPOPS_NEUROCHEM_PATH; on a
# machine with internet access `nnpops convert --download ani2x` fetches the same files) into the
# model cache, then computes ANI-2x energy and forces of a bundled alanine molecule and runs a
# short MD with timing (log, trajectory and energy plot in build/run/).
# Usage: bash examples/run.sh [arguments of examples/ase_md.py, e.g. --steps 400 --precision float32]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bash .ci/install-deps.sh
venv=${NNPOPS_VENV:-$root/build/venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet "$root[ase]"
export NNPOPS_NEUROCHEM_PATH=${NNPOPS_NEUROCHEM_PATH:-$root/../shared/models/neurochem}
"$venv/bin/nnpops" convert ani2x
mkdir -p "$root/build/run"
cd "$root/build/run"
exec "$venv/bin/python" "$root/examples/ase_md.py" "$@"
