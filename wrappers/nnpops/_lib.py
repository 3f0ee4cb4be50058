"""cffi (ABI mode) binding of the nnpops C library.

Nothing here touches the shared library at import time: the header is parsed and the library is
opened on first use (``_load()``), so that importing :mod:`nnpops` stays cheap and cannot fail
because of a missing or broken library (openmm-ml imports entry points eagerly).

Where things are looked for
---------------------------
Header (the cdef is the text between ``/* cdef-begin */`` and ``/* cdef-end */``, lines starting
with ``#`` dropped):

1. the environment variable ``NNPOPS_HEADER``;
2. ``include/nnpops/nnpops.h`` inside the package (``pip install``; also ``include/nnpops.h``);
3. ``core/include/nnpops/nnpops.h`` of the source tree holding this file;
4. ``<prefix>/include/nnpops/nnpops.h`` where ``cmake --install`` puts it: the prefix of each
   library candidate below that exists (``<prefix>/lib/libnnpops.so``), then ``sys.prefix``,
   ``/usr/local`` and ``/usr``.

Library:

1. the environment variable ``NNPOPS_LIBRARY`` (a path);
2. ``lib/libnnpops.so*`` inside the package (``pip install``; also ``libnnpops.so*`` beside this
   file);
3. ``build/libnnpops.so`` of the source tree holding this file;
4. ``<sys.prefix>/lib/libnnpops.so*`` (``cmake --install`` into a virtual environment's prefix);
5. ``ctypes.util.find_library("nnpops")`` (the system's search path).

Arrays
------
Host arrays cross the boundary without copies when they already are C-contiguous with the dtype
the C side wants (float64 for coordinates and outputs, int32 for atomic numbers and the batch
index, uint8 for periodic flags); anything else is converted once with ``np.ascontiguousarray``.
Outputs are allocated with NumPy (or given by the caller through ``out=``) and filled in place.
"""

import ctypes.util
import glob
import os
import re
import sys
import threading

import numpy as np

from ._public import LIB_NAMES
from ._version import __version__ as _VERSION

__all__ = list(LIB_NAMES)

# The library version this package speaks to (major, minor of the project's one version, see
# _version.py); the patch level may differ.
_VERSION_MATCH = re.match(r"(\d+)\.(\d+)", _VERSION)
EXPECTED_VERSION = ((int(_VERSION_MATCH.group(1)), int(_VERSION_MATCH.group(2)))
                    if _VERSION_MATCH else (0, 0))

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_REPO_DIR = os.path.dirname(os.path.dirname(_PKG_DIR))


# ---------------------------------------------------------------------------------------------
# Exceptions
# ---------------------------------------------------------------------------------------------

class NNPOPSError(Exception):
    """Base class of every error raised by nnpops.

    ``status`` is the C status name (``"NNPOPS_ERROR_..."`` as given by nnpops_status_name, or
    None for errors raised by the Python layer itself), ``code`` its numeric value, and the
    message is the library's ``nnpops_last_error()`` detail.
    """

    def __init__(self, message="", status=None, code=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code

    def __str__(self):
        return self.message

    def __reduce__(self):
        return (_rebuild_error, (type(self), self.message, self.status, self.code))


def _rebuild_error(cls, message, status, code):
    return cls(message, status=status, code=code)


class LibraryNotFoundError(NNPOPSError, ImportError):
    """The shared library could not be found or opened."""


class LibraryVersionError(NNPOPSError, ImportError):
    """The shared library's version does not match this Python package."""


class InvalidArgumentError(NNPOPSError, ValueError):
    pass


class OutOfMemoryError(NNPOPSError, MemoryError):
    pass


class NNPOPSIOError(NNPOPSError, OSError):
    pass


class ModelNotFoundError(NNPOPSError, FileNotFoundError):
    pass


class ModelFormatError(NNPOPSError, ValueError):
    pass


class ChecksumError(ModelFormatError):
    pass


class UnknownElementError(NNPOPSError, ValueError):
    pass


class BadPositionError(NNPOPSError, ValueError):
    pass


class AtomsTooCloseError(NNPOPSError, ValueError):
    pass


class BadCellError(NNPOPSError, ValueError):
    pass


class TooManyImagesError(NNPOPSError, ValueError):
    pass


class NeighborOverflowError(NNPOPSError, RuntimeError):
    pass


class DeviceNotBuiltError(NNPOPSError, RuntimeError):
    pass


class NoDeviceError(NNPOPSError, RuntimeError):
    pass


class CudaError(NNPOPSError, RuntimeError):
    pass


class UnsupportedError(NNPOPSError, NotImplementedError):
    pass


class CaptureError(NNPOPSError, RuntimeError):
    pass


class InternalError(NNPOPSError, RuntimeError):
    pass


# Status value (pinned in the header) -> exception class.
_ERROR_CLASSES = {
    1: InvalidArgumentError,
    2: OutOfMemoryError,
    3: NNPOPSIOError,
    4: ModelNotFoundError,
    5: ModelFormatError,
    6: ChecksumError,
    7: UnknownElementError,
    8: BadPositionError,
    9: AtomsTooCloseError,
    10: BadCellError,
    11: TooManyImagesError,
    12: NeighborOverflowError,
    13: DeviceNotBuiltError,
    14: NoDeviceError,
    15: CudaError,
    16: UnsupportedError,
    17: CaptureError,
    18: InternalError,
}


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------

_lock = threading.Lock()
_state = None  # (ffi, lib, library_path) once loaded


def _header_candidates():
    env = os.environ.get("NNPOPS_HEADER")
    if env:
        return [env]
    out = [os.path.join(_PKG_DIR, "include", "nnpops", "nnpops.h"),
           os.path.join(_PKG_DIR, "include", "nnpops.h"),
           os.path.join(_REPO_DIR, "core", "include", "nnpops", "nnpops.h")]
    prefixes = []
    for path, _ in _library_candidates():
        if path and os.sep in path and os.path.exists(path):
            prefixes.append(os.path.dirname(os.path.dirname(os.path.realpath(path))))
    prefixes += [sys.prefix, "/usr/local", "/usr"]
    for prefix in prefixes:
        candidate = os.path.join(prefix, "include", "nnpops", "nnpops.h")
        if candidate not in out:
            out.append(candidate)
    return out


def _in_folder(folder):
    """libnnpops.so* files in folder, the shortest name (the unversioned link) first."""
    return sorted(glob.glob(os.path.join(folder, "libnnpops.so*")), key=lambda p: (len(p), p))


def _library_candidates():
    """Paths (or bare names for the system search) tried in order, and a description of each."""
    env = os.environ.get("NNPOPS_LIBRARY")
    if env:
        return [(env, "NNPOPS_LIBRARY=%s" % env)]
    out = []
    for folder in (os.path.join(_PKG_DIR, "lib"), _PKG_DIR):
        for path in _in_folder(folder):
            out.append((path, path))
    if not out:
        out.append((None, os.path.join(_PKG_DIR, "lib", "libnnpops.so*")))
    out.append((os.path.join(_REPO_DIR, "build", "libnnpops.so"),
                os.path.join(_REPO_DIR, "build", "libnnpops.so")))
    for path in _in_folder(os.path.join(sys.prefix, "lib")):
        out.append((path, path))
    found = ctypes.util.find_library("nnpops")
    out.append((found, "system search path (ctypes.util.find_library('nnpops') -> %s)" % found))
    return out


def cdef_from_header(text):
    """The cffi cdef: the header text between the cdef markers, preprocessor lines dropped."""
    begin = text.find("/* cdef-begin */")
    end = text.find("/* cdef-end */")
    if begin < 0 or end < 0 or end < begin:
        raise NNPOPSError("nnpops.h has no /* cdef-begin */ ... /* cdef-end */ region")
    body = text[begin + len("/* cdef-begin */"):end]
    return "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))


def _make_ffi():
    import cffi

    tried = []
    for path in _header_candidates():
        if os.path.isfile(path):
            with open(path, "r", encoding="utf-8") as f:
                text = f.read()
            ffi = cffi.FFI()
            ffi.cdef(cdef_from_header(text))
            return ffi
        tried.append(path)
    raise LibraryNotFoundError("nnpops.h not found; looked in: " + ", ".join(tried)
                               + " (set NNPOPS_HEADER to its path)")


def _open_library(ffi):
    tried = []
    errors = []
    for path, where in _library_candidates():
        if path is None:
            tried.append(where)
            continue
        if os.sep in path and not os.path.exists(path):
            tried.append(where)
            continue
        try:
            return ffi.dlopen(path), path
        except OSError as exc:  # exists but cannot be opened: report why
            tried.append(where)
            errors.append("%s: %s" % (path, exc))
    msg = "the nnpops shared library was not found; looked in: " + "; ".join(tried)
    if errors:
        msg += ". Errors: " + "; ".join(errors)
    msg += " (set NNPOPS_LIBRARY to the path of libnnpops.so)"
    raise LibraryNotFoundError(msg)


def _load():
    """(ffi, lib): parse the header and open the library on first use; checks the version."""
    global _state
    state = _state
    if state is not None:
        return state[0], state[1]
    with _lock:
        if _state is None:
            ffi = _make_ffi()
            lib, path = _open_library(ffi)
            number = int(lib.nnpops_version_number())
            major, minor = number // 10000, (number // 100) % 100
            if (major, minor) != EXPECTED_VERSION:
                raise LibraryVersionError(
                    "library %s has version %d.%d.%d; this Python package needs %d.%d.x"
                    % (path, major, minor, number % 100, EXPECTED_VERSION[0], EXPECTED_VERSION[1]))
            _state = (ffi, lib, path)
        return _state[0], _state[1]


def is_loaded():
    """True once the C library has been opened (importing nnpops does not open it)."""
    return _state is not None


def library_path():
    _load()
    return _state[2]


def _string(ffi, ptr):
    return "" if ptr == ffi.NULL else ffi.string(ptr).decode("utf-8", "replace")


def _error(status, context=None):
    """The exception for a failed status, with the library's detail message."""
    ffi, lib = _load()
    code = int(status)
    name = _string(ffi, lib.nnpops_status_name(code))
    detail = _string(ffi, lib.nnpops_last_error())
    message = detail or name
    if context:
        message = "%s: %s" % (context, message)
    cls = _ERROR_CLASSES.get(code, NNPOPSError)
    return cls(message, status=name, code=code)


def _check(status, context=None):
    if status != 0:
        raise _error(status, context)


def version_number():
    return int(_load()[1].nnpops_version_number())


def version_string():
    ffi, lib = _load()
    return _string(ffi, lib.nnpops_version_string())


def cuda_built():
    return bool(_load()[1].nnpops_cuda_built())


def cuda_device_count():
    return int(_load()[1].nnpops_cuda_device_count())


def resolve_device(device):
    """``"auto"``: ``"cuda"`` when the library was built with CUDA and sees a GPU, else ``"cpu"``;
    any other value is returned as it is."""
    if device is None or str(device).strip().lower() != "auto":
        return device
    return "cuda" if cuda_built() and cuda_device_count() > 0 else "cpu"


def library_info():
    """A dict describing the loaded library (path, version, CUDA)."""
    return {"path": library_path(), "version": version_string(),
            "version_number": version_number(), "cuda_built": cuda_built(),
            "cuda_devices": cuda_device_count()}


# ---------------------------------------------------------------------------------------------
# Array helpers (no copy when the array already has the right layout)
# ---------------------------------------------------------------------------------------------

def _as_array(a, dtype):
    """``a`` itself when it is a C-contiguous ndarray of ``dtype``, else a converted copy."""
    if isinstance(a, np.ndarray) and a.dtype == dtype and a.flags.c_contiguous:
        return a
    return np.ascontiguousarray(a, dtype=dtype)


_CTYPES = {np.dtype(np.float64): "double[]", np.dtype(np.int32): "int32_t[]",
           np.dtype(np.uint8): "uint8_t[]", np.dtype(np.int64): "int64_t[]"}


def _ptr(ffi, a):
    """A cffi pointer to the data of a C-contiguous array (no copy), or NULL for None."""
    if a is None:
        return ffi.NULL
    return ffi.from_buffer(_CTYPES[a.dtype], a, require_writable=False)


def _out_array(out, key, shape):
    """The caller's output array for ``key`` when it fits (filled in place), else a new one."""
    if out is not None and out.get(key) is not None:
        a = out[key]
        if not (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.flags.c_contiguous
                and a.flags.writeable and a.shape == tuple(shape)):
            raise ValueError("out[%r] must be a writable C-contiguous float64 array of shape %s"
                             % (key, tuple(shape)))
        return a
    return np.empty(shape, dtype=np.float64)


def _to_bytes(s):
    return os.fsencode(s) if not isinstance(s, bytes) else s


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------

_PRECISIONS = {"float64": 1, "double": 1, "fp64": 1, "float32": 0, "single": 0, "float": 0,
               "fp32": 0}


class Model:
    """A loaded model (immutable, may be shared by several contexts and threads).

    ``name_or_path``: a model name (``"ani2x"``: ``ani2x.yaml`` on NNPOPS_MODEL_PATH, then in the
    cache directory) or the path of a model YAML file.  ``device``: ``"auto"`` (CUDA when the
    library has it and a GPU is present, else the CPU), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    ``precision``: ``"float64"`` or ``"float32"`` (compute precision; host arrays
    are float64 whatever it is).
    """

    def __init__(self, name_or_path="ani2x", device="auto", precision="float64"):
        ffi, lib = _load()
        device = resolve_device(device)
        key = str(precision).lower()
        if key not in _PRECISIONS:
            raise ValueError("precision must be 'float64' or 'float32', not %r" % (precision,))
        self._spec = (os.fspath(name_or_path), device, "float64" if _PRECISIONS[key] else "float32")
        out = ffi.new("nnpops_model **")
        status = lib.nnpops_model_load(_to_bytes(os.fspath(name_or_path)),
                                       ffi.NULL if device is None else _to_bytes(device),
                                       _PRECISIONS[key], out)
        if status != 0:
            exc = _error(status, "loading model %r" % (os.fspath(name_or_path),))
            if isinstance(exc, ModelNotFoundError):
                from .convert import MODELS, download_command
                name = os.fspath(name_or_path)
                if name in MODELS:  # a published model not converted yet: say how to get it
                    exc = ModelNotFoundError("%s. Run '%s' to fetch and convert it"
                                             % (exc, download_command(name)),
                                             status=exc.status, code=exc.code)
            raise exc
        self._handle = ffi.gc(out[0], lib.nnpops_model_destroy)

    # The C object is freed once the model is closed (or collected) AND every context made from
    # it is gone: contexts hold a reference to the handle (see Context).
    def close(self):
        """Drop this object's hold on the C model (contexts that use it keep it alive)."""
        self._handle = None

    @property
    def closed(self):
        return self._handle is None

    def _h(self):
        if self._handle is None:
            raise NNPOPSError("the model is closed")
        return self._handle

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self._handle is None:
            return "<nnpops.Model %r (closed)>" % (self._spec[0],)
        return "<nnpops.Model %r type=%s device=%s precision=%s species=%s>" % (
            self.name, self.type, self.device, self.precision, list(self.species))

    @property
    def name(self):
        ffi, lib = _load()
        return _string(ffi, lib.nnpops_model_name(self._h()))

    @property
    def type(self):
        ffi, lib = _load()
        return _string(ffi, lib.nnpops_model_type(self._h()))

    @property
    def path(self):
        ffi, lib = _load()
        return _string(ffi, lib.nnpops_model_path(self._h()))

    @property
    def device(self):
        ffi, lib = _load()
        return _string(ffi, lib.nnpops_model_device(self._h()))

    @property
    def precision(self):
        _, lib = _load()
        return "float64" if int(lib.nnpops_model_precision(self._h())) == 1 else "float32"

    @property
    def species(self):
        """Atomic numbers the model describes, in the model's species order."""
        _, lib = _load()
        h = self._h()
        n = int(lib.nnpops_model_num_species(h))
        return tuple(int(lib.nnpops_model_species(h, i)) for i in range(n))

    @property
    def ensemble_size(self):
        _, lib = _load()
        return int(lib.nnpops_model_ensemble_size(self._h()))

    @property
    def cutoff(self):
        _, lib = _load()
        return float(lib.nnpops_model_cutoff(self._h()))

    @property
    def interaction_range(self):
        """Å beyond which an atom cannot change another atom's energy (ANI, LJ: the cutoff)."""
        _, lib = _load()
        return float(lib.nnpops_model_interaction_range(self._h()))

    @property
    def uses_charge(self):
        """Whether the model reads a total charge per system (ANI, LJ: no)."""
        _, lib = _load()
        return bool(lib.nnpops_model_uses_charge(self._h()))


# ---------------------------------------------------------------------------------------------
# Context
# ---------------------------------------------------------------------------------------------

def _option_text(value):
    if isinstance(value, (bool, np.bool_)):
        return "on" if value else "off"
    return str(value)


class Context:
    """One simulation's workspace on a model (used by one thread at a time).

    ``model``: a :class:`Model` or a model name/path (loaded on the CPU in float64).  Keyword
    arguments are options set by name (``min_distance=0.05``, ``ensemble_member=3``,
    ``length_unit="nm"``, ``cuda_graphs=True``, ...); booleans become ``"on"``/``"off"``.
    """

    def __init__(self, model="ani2x", **options):
        ffi, lib = _load()
        if not isinstance(model, Model):
            model = Model(model)
        self.model = model
        model_handle = model._h()
        out = ffi.new("nnpops_context **")
        _check(lib.nnpops_context_create(model_handle, out), "creating a context")
        destroy = lib.nnpops_context_destroy

        # The destructor closes over the model handle: the C model outlives the C context.
        def _destroy(p, _model_handle=model_handle):
            destroy(p)

        self._handle = ffi.gc(out[0], _destroy)
        self._model_handle = model_handle
        self._ensemble_size = model.ensemble_size
        self._inputs = ffi.new("nnpops_inputs *")
        self._outputs = ffi.new("nnpops_outputs *")
        self._inputs.struct_size = ffi.sizeof("nnpops_inputs")
        self._outputs.struct_size = ffi.sizeof("nnpops_outputs")
        for name, value in options.items():
            self.set_option(name, value)

    def close(self):
        if self._handle is not None:
            ffi, _ = _load()
            h, self._handle = self._handle, None
            ffi.release(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _h(self):
        if self._handle is None:
            raise NNPOPSError("the context is closed")
        return self._handle

    # ---- options ----
    def set_option(self, name, value):
        ffi, lib = _load()
        _check(lib.nnpops_context_set_option_by_name(self._h(), _to_bytes(name),
                                                     _option_text(value).encode("utf-8")),
               "option %s=%s" % (name, _option_text(value)))

    def set_options(self, **options):
        for name, value in options.items():
            self.set_option(name, value)

    def get_option(self, name):
        """The numeric value of an option (enumerations as their numbers)."""
        ffi, lib = _load()
        opt = ffi.new("nnpops_option *")
        _check(lib.nnpops_option_from_name(_to_bytes(name), opt), "option %s" % (name,))
        val = ffi.new("double *")
        _check(lib.nnpops_context_get_option(self._h(), opt[0], val), "option %s" % (name,))
        return float(val[0])

    def stats(self):
        ffi, lib = _load()
        st = ffi.new("nnpops_stats *")
        st.struct_size = ffi.sizeof("nnpops_stats")
        _check(lib.nnpops_context_stats(self._h(), st), "context stats")
        return {name: int(getattr(st, name)) for name, _ in ffi.typeof("nnpops_stats").fields
                if name != "struct_size"}

    # ---- compute ----
    def compute(self, numbers, positions, cells=None, pbc=None, batch=None, n_systems=None,
                n_local=None, forces=True, virial=False, atomic_energies=False,
                atomic_virials=False, member_energies=False, out=None, charges=None):
        """Evaluate the model on one system or a batch of systems.

        numbers [n] (int32 passed without copy), positions [n, 3] Å (float64, no copy when
        C-contiguous), cells [3, 3] or [n_systems, 3, 3] (rows a, b, c), pbc: bool, [3] or
        [n_systems, 3] (with cells given and pbc None: fully periodic), batch [n] system index of
        each atom (None: one system), n_systems (None: batch.max() + 1), n_local (atoms whose
        energy counts, the rest are ghosts), charges: the total charge of each system in
        elementary charges, a number or [n_systems] (None: neutral; a model that does not use a
        charge raises UnsupportedError for a nonzero one).  ``out``: optional dict of
        preallocated outputs (C-contiguous float64, right shape) filled in place and returned as
        they are.

        Returns a dict: ``energies`` [n_systems] and, as asked, ``forces`` [n, 3], ``virials``
        [n_systems, 3, 3], ``atomic_energies`` [n], ``atomic_virials`` [n, 3, 3],
        ``member_energies`` [n_systems, ensemble_size].  Units: the context's (Å, eV default).
        """
        ffi, lib = _load()
        h = self._h()
        z = _as_array(numbers, np.int32)
        if z.ndim != 1:
            z = z.reshape(-1)
        n = z.shape[0]
        x = _as_array(positions, np.float64)
        if x.shape != (n, 3):
            if x.size == 3 * n:
                x = x.reshape(n, 3)
            else:
                raise ValueError("positions must have shape (%d, 3), not %s" % (n, x.shape))

        b = None
        if batch is not None:
            b = _as_array(batch, np.int32)
            if b.shape != (n,):
                raise ValueError("batch must have shape (%d,), not %s" % (n, b.shape))
        if n_systems is None:
            n_systems = int(b.max()) + 1 if (b is not None and n > 0) else 1
        n_systems = int(n_systems)

        c = None
        p = None
        if cells is not None:
            c = _as_array(cells, np.float64)
            if c.shape == (3, 3) and n_systems == 1:
                pass
            elif c.shape != (n_systems, 3, 3):
                raise ValueError("cells must have shape (%d, 3, 3), not %s" % (n_systems, c.shape))
            if pbc is None:
                pbc = True
        if pbc is not None:
            pa = np.asarray(pbc)
            if pa.dtype != np.uint8:
                pa = pa.astype(bool)
            if pa.ndim == 0 or pa.shape == (3,):
                if pa.ndim == 0 or n_systems != 1:
                    pa = np.broadcast_to(pa, (n_systems, 3))
            elif pa.shape != (n_systems, 3):
                raise ValueError("pbc must be a bool, 3 flags or (%d, 3) flags" % n_systems)
            p = _as_array(pa, np.uint8)
            if c is None:
                if p.any():
                    raise ValueError("periodic boundary conditions need cells")
                p = None

        q = None
        if charges is not None:
            qa = np.asarray(charges, dtype=np.float64)
            if qa.ndim == 0:
                qa = np.broadcast_to(qa, (n_systems,))
            elif qa.shape != (n_systems,):
                raise ValueError("charges must be a number or have shape (%d,), not %s"
                                 % (n_systems, qa.shape))
            q = _as_array(qa, np.float64)

        ens = self._ensemble_size
        res = {"energies": _out_array(out, "energies", (n_systems,))}
        if forces:
            res["forces"] = _out_array(out, "forces", (n, 3))
        if virial:
            res["virials"] = _out_array(out, "virials", (n_systems, 3, 3))
        if atomic_energies:
            res["atomic_energies"] = _out_array(out, "atomic_energies", (n,))
        if atomic_virials:
            res["atomic_virials"] = _out_array(out, "atomic_virials", (n, 3, 3))
        if member_energies:
            res["member_energies"] = _out_array(out, "member_energies", (n_systems, ens))

        inp = self._inputs
        inp.n_atoms = n
        inp.n_local = -1 if n_local is None else int(n_local)
        inp.n_systems = n_systems
        inp.atomic_numbers = zp = _ptr(ffi, z)
        inp.positions = xp = _ptr(ffi, x)
        inp.batch = bp = _ptr(ffi, b)
        inp.cells = cp = _ptr(ffi, c)
        inp.pbc = pp = _ptr(ffi, p)
        inp.charges = qp = _ptr(ffi, q)
        o = self._outputs
        o.energies = ep = _ptr(ffi, res["energies"])
        o.forces = fp = _ptr(ffi, res.get("forces"))
        o.virials = vp = _ptr(ffi, res.get("virials"))
        o.atomic_energies = aep = _ptr(ffi, res.get("atomic_energies"))
        o.atomic_virials = avp = _ptr(ffi, res.get("atomic_virials"))
        o.member_energies = mp = _ptr(ffi, res.get("member_energies"))
        status = lib.nnpops_compute(h, inp, o)
        # The pointers above borrow the arrays' memory: keep them alive until the call returned.
        del zp, xp, bp, cp, pp, qp, ep, fp, vp, aep, avp, mp
        if status != 0:
            raise _error(status)
        return res


# ---------------------------------------------------------------------------------------------
# Neighbor pairs
# ---------------------------------------------------------------------------------------------

def neighbor_pairs(positions, cutoff, cell=None, pbc=None, capacity=None):
    """All pairs closer than ``cutoff`` as a half list (each pair once).

    Returns ``(pairs [P, 2] int64, shifts [P, 3] int32, distances [P])`` with
    r_ij = x_j - x_i + shifts . cell.  With a cell and pbc None the system is fully periodic.
    The arrays grow and the search is repeated when the first capacity was too small.
    """
    ffi, lib = _load()
    x = _as_array(positions, np.float64)
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError("positions must have shape (n, 3), not %s" % (x.shape,))
    n = x.shape[0]
    c = None
    p = None
    if cell is not None:
        c = _as_array(cell, np.float64)
        if c.shape != (3, 3):
            raise ValueError("cell must have shape (3, 3)")
        p = _as_array(np.broadcast_to(np.asarray(True if pbc is None else pbc, dtype=bool), (3,)),
                      np.uint8)
    elif pbc is not None and np.any(pbc):
        raise ValueError("periodic boundary conditions need a cell")
    cap = int(capacity) if capacity is not None else max(16, 32 * n)
    count = ffi.new("int64_t *")
    for _ in range(8):
        pairs = np.empty((cap, 2), dtype=np.int64)
        shifts = np.empty((cap, 3), dtype=np.int32)
        dist = np.empty((cap,), dtype=np.float64)
        status = lib.nnpops_neighbor_pairs(n, _ptr(ffi, x), _ptr(ffi, c), _ptr(ffi, p),
                                           float(cutoff), cap, count,
                                           _ptr(ffi, pairs) if cap else ffi.NULL,
                                           _ptr(ffi, shifts) if cap else ffi.NULL,
                                           _ptr(ffi, dist) if cap else ffi.NULL)
        found = int(count[0])
        if status == 12 and found > cap:  # NNPOPS_ERROR_NEIGHBOR_OVERFLOW: grow and repeat
            cap = found
            continue
        _check(status, "neighbor_pairs")
        return pairs[:found], shifts[:found], dist[:found]
    raise NeighborOverflowError("neighbor_pairs: the pair count kept growing", status=None)
