#!/usr/bin/env python3
"""Compile check of the plugin against a current LAMMPS (Debian trixie's source, fetched by
`.ci/build-lammps.sh --trixie-source`): pair_nnpops.cpp and nnpops_plugin.cpp with -fsyntax-only
and that tree's headers, NNPOPS_LAMMPS_VERSION derived from its version.h as the build does.

The tree: LAMMPS_TRIXIE_SRC, else LAMMPS_TRIXIE_SRC in
${NNPOPS_CACHE_DIR:-~/.cache/nnpops-ci}/lammps-trixie/env.sh.  Absent: exit 77 (skipped), or 1
under CI=true.  Arguments: SOURCE_DIR CXX [MPI include dirs...]
"""
import os
import re
import shutil
import subprocess
import sys

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def trixie_src():
    path = os.environ.get("LAMMPS_TRIXIE_SRC")
    if path:
        return path
    cache = os.environ.get("NNPOPS_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                               "nnpops-ci")
    try:
        with open(os.path.join(cache, "lammps-trixie", "env.sh")) as f:
            for line in f:
                m = re.match(r"\s*(?:export\s+)?LAMMPS_TRIXIE_SRC=(.*)$", line.strip())
                if m:
                    return m.group(1).strip().strip("'\"")
    except OSError:
        pass
    return None


def lammps_version(src):
    with open(os.path.join(src, "version.h")) as f:
        text = f.read()
    m = re.search(r'LAMMPS_VERSION\s+"(\d+) ([A-Za-z]+) (\d{4})"', text)
    if not m:
        raise SystemExit(f"cannot read LAMMPS_VERSION from {src}/version.h")
    day, mon, year = int(m.group(1)), MONTHS.index(m.group(2)[:3]) + 1, int(m.group(3))
    return year * 10000 + mon * 100 + day


def main():
    source_dir, cxx = sys.argv[1], sys.argv[2]
    mpi_includes = [d for d in sys.argv[3:] if d]
    ci = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")
    src = trixie_src()
    if not src or not os.path.isfile(os.path.join(src, "pair.h")):
        print(f"no current LAMMPS source (LAMMPS_TRIXIE_SRC={src!r}); "
              "run .ci/build-lammps.sh --trixie-source")
        return 1 if ci else 77
    if not shutil.which(cxx) and not os.path.isfile(cxx):
        print(f"C++ compiler {cxx!r} not found")
        return 1 if ci else 77
    version = lammps_version(src)
    flags = ["-std=c++17", "-fsyntax-only", "-Wall", "-Werror=return-type",
             f"-DNNPOPS_LAMMPS_VERSION={version}", "-DLAMMPS_SMALLBIG",
             "-DOMPI_SKIP_MPICXX=1", "-DMPICH_SKIP_MPICXX=1",
             "-I" + os.path.join(source_dir, "plugin"),
             "-I" + os.path.join(source_dir, "core", "include"), "-I" + src]
    # nnpops/version.h is generated into the build tree
    build_dir = os.environ.get("NNPOPS_BUILD_DIR")
    if build_dir:
        flags.append("-I" + os.path.join(build_dir, "include"))
    if mpi_includes:
        flags += ["-I" + d for d in mpi_includes]
    else:
        flags += ["-I" + os.path.join(src, "STUBS")]
    status = 0
    for name in ("pair_nnpops.cpp", "nnpops_plugin.cpp"):
        cmd = [cxx] + flags + [os.path.join(source_dir, "plugin", name)]
        print(" ".join(cmd))
        p = subprocess.run(cmd)
        status = status or p.returncode
    print(f"LAMMPS {version} at {src}: {'ok' if status == 0 else 'FAILED'}")
    return 1 if status else 0


if __name__ == "__main__":
    sys.exit(main())
