"""A tiny ctypes binding of libnnpops for the LAMMPS tests: the reference the plugin is compared with.

Independent of the Python package in wrappers/ on purpose (the plugin tests only need the C API).
The library is NNPOPS_LIBRARY, else NNPOPS_BUILD_DIR/libnnpops.so.
"""
import ctypes
import os

import numpy as np

_c_double_p = ctypes.POINTER(ctypes.c_double)


class _Inputs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("n_atoms", ctypes.c_int64),
        ("n_local", ctypes.c_int64),
        ("n_systems", ctypes.c_int64),
        ("atomic_numbers", ctypes.POINTER(ctypes.c_int32)),
        ("positions", _c_double_p),
        ("batch", ctypes.POINTER(ctypes.c_int32)),
        ("cells", _c_double_p),
        ("pbc", ctypes.POINTER(ctypes.c_uint8)),
    ]


class _Outputs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("energies", _c_double_p),
        ("forces", _c_double_p),
        ("virials", _c_double_p),
        ("atomic_energies", _c_double_p),
        ("atomic_virials", _c_double_p),
        ("member_energies", _c_double_p),
    ]


PRECISIONS = {"float32": 0, "float64": 1}
ENERGY_UNITS = {"eV": 0, "kcal/mol": 1, "kJ/mol": 2, "hartree": 3}
OPTION_ENERGY_UNIT = 1


class LibraryError(RuntimeError):
    def __init__(self, status_name, detail):
        super().__init__(f"{status_name}: {detail}")
        self.status_name = status_name
        self.detail = detail


def library_path():
    path = os.environ.get("NNPOPS_LIBRARY")
    if path:
        return path
    build = os.environ.get("NNPOPS_BUILD_DIR", "")
    return os.path.join(build, "libnnpops.so")


_lib = None


def lib():
    global _lib
    if _lib is None:
        L = ctypes.CDLL(library_path())
        L.nnpops_status_name.restype = ctypes.c_char_p
        L.nnpops_status_name.argtypes = [ctypes.c_int]
        L.nnpops_last_error.restype = ctypes.c_char_p
        L.nnpops_version_string.restype = ctypes.c_char_p
        L.nnpops_model_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                        ctypes.POINTER(ctypes.c_void_p)]
        L.nnpops_model_destroy.argtypes = [ctypes.c_void_p]
        L.nnpops_model_cutoff.argtypes = [ctypes.c_void_p]
        L.nnpops_model_cutoff.restype = ctypes.c_double
        L.nnpops_model_ensemble_size.argtypes = [ctypes.c_void_p]
        L.nnpops_model_ensemble_size.restype = ctypes.c_int32
        L.nnpops_context_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
        L.nnpops_context_destroy.argtypes = [ctypes.c_void_p]
        L.nnpops_context_set_option.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_double]
        L.nnpops_compute.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Inputs),
                                     ctypes.POINTER(_Outputs)]
        _lib = L
    return _lib


def _check(status):
    if status != 0:
        L = lib()
        raise LibraryError(L.nnpops_status_name(status).decode(),
                           (L.nnpops_last_error() or b"").decode())


def _dp(a):
    return a.ctypes.data_as(_c_double_p) if a is not None else None


class Model:
    """A model and one context: compute() returns what LAMMPS should reproduce."""

    def __init__(self, name, device="cpu", precision="float64", energy_unit="eV"):
        L = lib()
        self._model = ctypes.c_void_p()
        _check(L.nnpops_model_load(name.encode(), device.encode(), PRECISIONS[precision],
                                   ctypes.byref(self._model)))
        self._ctx = ctypes.c_void_p()
        _check(L.nnpops_context_create(self._model, ctypes.byref(self._ctx)))
        _check(L.nnpops_context_set_option(self._ctx, OPTION_ENERGY_UNIT,
                                           float(ENERGY_UNITS[energy_unit])))

    @property
    def cutoff(self):
        return lib().nnpops_model_cutoff(self._model)

    @property
    def ensemble_size(self):
        return lib().nnpops_model_ensemble_size(self._model)

    def close(self):
        L = lib()
        if self._ctx:
            L.nnpops_context_destroy(self._ctx)
            self._ctx = ctypes.c_void_p()
        if self._model:
            L.nnpops_model_destroy(self._model)
            self._model = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def compute(self, numbers, positions, cell=None, pbc=None, n_local=None, per_atom=True,
                members=False):
        """Energy, forces [n,3], virial [3,3], per-atom energies / virials [n,3,3] and, with
        members, each ensemble member's energy [K]."""
        numbers = np.ascontiguousarray(numbers, dtype=np.int32)
        positions = np.ascontiguousarray(positions, dtype=np.float64).reshape(-1, 3)
        n = len(numbers)
        inp = _Inputs()
        inp.struct_size = ctypes.sizeof(_Inputs)
        inp.n_atoms = n
        inp.n_local = n if n_local is None else n_local
        inp.n_systems = 1
        inp.atomic_numbers = numbers.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
        inp.positions = _dp(positions)
        cell_a = pbc_a = None
        if cell is not None:
            cell_a = np.ascontiguousarray(cell, dtype=np.float64).reshape(3, 3)
            pbc_a = np.ascontiguousarray([1, 1, 1] if pbc is None else pbc, dtype=np.uint8)
            inp.cells = _dp(cell_a)
            inp.pbc = pbc_a.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        energy = np.zeros(1)
        forces = np.zeros((n, 3))
        virial = np.zeros((3, 3))
        ae = np.zeros(n) if per_atom else None
        av = np.zeros((n, 3, 3)) if per_atom else None
        out = _Outputs()
        out.struct_size = ctypes.sizeof(_Outputs)
        out.energies = _dp(energy)
        out.forces = _dp(forces)
        out.virials = _dp(virial)
        out.atomic_energies = _dp(ae)
        out.atomic_virials = _dp(av)
        me = np.zeros(self.ensemble_size) if members else None
        out.member_energies = _dp(me)
        _check(lib().nnpops_compute(self._ctx, ctypes.byref(inp), ctypes.byref(out)))
        return {"energy": float(energy[0]), "forces": forces, "virial": virial,
                "atomic_energies": ae, "atomic_virials": av, "member_energies": me}


def load_error(name, device="cpu", precision="float64"):
    """The LibraryError nnpops_model_load gives for `name` (None if it loads)."""
    try:
        Model(name, device, precision).close()
    except LibraryError as e:
        return e
    return None


def compute_error(model_name, numbers, positions):
    """The LibraryError nnpops_compute gives for these atoms (None if it succeeds)."""
    m = Model(model_name)
    try:
        m.compute(numbers, positions)
    except LibraryError as e:
        return e
    finally:
        m.close()
    return None
