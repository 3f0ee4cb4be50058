"""The names that nnpops._lib provides (its ``__all__``), apart from it so that the package can
offer them lazily (nnpops/__init__.py, PEP 562) without loading the library first."""

LIB_NAMES = (
    "NNPOPSError", "LibraryNotFoundError", "LibraryVersionError", "InvalidArgumentError",
    "OutOfMemoryError", "NNPOPSIOError", "ModelNotFoundError", "ModelFormatError", "ChecksumError",
    "UnknownElementError", "BadPositionError", "AtomsTooCloseError", "BadCellError",
    "TooManyImagesError", "NeighborOverflowError", "DeviceNotBuiltError", "NoDeviceError",
    "CudaError", "UnsupportedError", "CaptureError", "InternalError",
    "Model", "Context", "neighbor_pairs", "library_info", "version_number", "version_string",
    "cuda_built", "cuda_device_count",
)
