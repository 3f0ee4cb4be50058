"""nnpops: fast ANI (and Lennard-Jones) potentials behind a C ABI.

    import nnpops
    model = nnpops.Model("ani2x")                 # ani2x.yaml on NNPOPS_MODEL_PATH or the cache
    ctx = nnpops.Context(model)
    res = ctx.compute(numbers, positions)         # {"energies": ..., "forces": ...} in eV, Å

    from nnpops.ase import NNPOpsCalculator       # an ASE calculator
    atoms.calc = NNPOpsCalculator("ani2x")

Importing this package does not open the C library (nor import NumPy or cffi): the binding is
loaded on first use of any of its names, so tools that import entry points eagerly (openmm-ml)
stay cheap and cannot fail here.  Convert the published ANI parameters once with
``python3 -m nnpops convert``.
"""

from ._version import __version__
from ._public import LIB_NAMES as _LIB_NAMES

import os as _os

#: Prefix for CMake's ``find_package(nnpops)`` when the library came with ``pip install``
#: (``cmake -DCMAKE_PREFIX_PATH=$(python3 -c "import nnpops; print(nnpops.cmake_prefix_path)")``):
#: the package folder, which holds ``lib/libnnpops.so.<major>``, ``include/nnpops/nnpops.h`` and
#: ``lib/cmake/nnpops/``.
cmake_prefix_path = _os.path.dirname(_os.path.abspath(__file__))

# Names provided lazily by nnpops._lib (PEP 562).
_LAZY = frozenset(_LIB_NAMES)

__all__ = sorted(_LAZY) + ["__version__", "cmake_prefix_path"]


def __getattr__(name):
    if name in _LAZY:
        from . import _lib
        value = getattr(_lib, name)
        globals()[name] = value
        return value
    raise AttributeError("module 'nnpops' has no attribute %r" % (name,))


def __dir__():
    return sorted(set(globals()) | _LAZY)
