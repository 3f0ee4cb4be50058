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

# Names provided lazily by nnpops._lib (PEP 562).
_LAZY = frozenset([
    "NNPOPSError", "LibraryNotFoundError", "LibraryVersionError", "InvalidArgumentError",
    "OutOfMemoryError", "NNPOPSIOError", "ModelNotFoundError", "ModelFormatError", "ChecksumError",
    "UnknownElementError", "BadPositionError", "AtomsTooCloseError", "BadCellError",
    "TooManyImagesError", "NeighborOverflowError", "DeviceNotBuiltError", "NoDeviceError",
    "CudaError", "UnsupportedError", "CaptureError", "InternalError",
    "Model", "Context", "neighbor_pairs", "library_info", "version_number", "version_string",
    "cuda_built", "cuda_device_count",
])

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name):
    if name in _LAZY:
        from . import _lib
        value = getattr(_lib, name)
        globals()[name] = value
        return value
    raise AttributeError("module 'nnpops' has no attribute %r" % (name,))


def __dir__():
    return sorted(set(globals()) | _LAZY)
