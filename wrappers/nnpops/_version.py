"""The package's version: the project's one version, written in the top-level CMakeLists.txt
(``project(nnpops VERSION x.y.z ...)``).  In the source tree it is read from there; an installed
package has it in its metadata (setuptools took it from here when the package was built)."""

import os
import re

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PROJECT = re.compile(r"^\s*project\(\s*nnpops\s+VERSION\s+(\d+)\.(\d+)\.(\d+)", re.M)


def _from_cmake(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            m = _PROJECT.search(f.read())
    except OSError:
        return None
    return "%s.%s.%s" % m.groups() if m else None


def _find():
    found = _from_cmake(os.path.join(_ROOT, "CMakeLists.txt"))
    if found:
        return found
    try:
        from importlib.metadata import version, PackageNotFoundError
    except ImportError:  # Python < 3.8
        return "0+unknown"
    try:
        return version("nnpops")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _find()
