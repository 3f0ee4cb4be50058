"""OpenMM front end: an nnpops potential as an ``openmm.PythonForce`` (OpenMM >= 8.6).

    from nnpops.openmm import create_force
    force = create_force(numbers, model="ani2x", periodic=True)   # whole system
    system.addForce(force)

    # ML/MM: only the ligand atoms feel the potential (and only they get its forces)
    create_force(numbers, model="ani2x", atoms=ligand, periodic=True, system=system,
                 add_bond_force=True, positions=modeller.positions)

How it works
------------
The force's computation is a :class:`NNPOpsComputation`, a callable object that OpenMM invokes on
its worker thread with a ``State`` (positions in nm; box vectors when the force is periodic).  It
calls the C library through one ``nnpops.Context`` whose length and energy units are set to nm
and kJ/mol, so nothing is converted in Python; the positions, cell and force buffers are
allocated once and reused at every step.  Forces are handed back C-contiguous in the dtype the
platform uses (``forces_dtype``: float64 for Reference/CPU or double precision, float32 for
CUDA/OpenCL single or mixed precision), which OpenMM copies without a conversion.

OpenMM pickles the computation to clone a System, to write it with ``XmlSerializer`` and when it is
deep-copied (openmm-ml's interpolating ML/MM does that).  The pickled state is only the
specification (atomic numbers, model, device, precision, periodicity, options): the C handles are
re-opened lazily on the first call after unpickling.  Loaded models are shared by every
computation in the process through a cache keyed by (model, device, precision).

``PythonForce`` makes each of its atoms a molecule of its own as far as OpenMM is concerned
(``MonteCarloBarostat`` scales, and ``enforcePeriodicBox`` wraps, molecule by molecule).  With
``bonds=`` or ``add_bond_force=True`` a zero-energy ``CustomBondForce`` over the bonds of the ML
molecules is added so that they stay whole.

Importing this module imports NumPy and OpenMM but does not open the C library.
"""

import os
import threading

import numpy as np
import openmm

__all__ = ["EV_IN_KJ_PER_MOL", "NNPOpsComputation", "create_force", "create_bond_force",
           "find_bonds", "platform_forces_dtype", "shared_model", "clear_model_cache",
           "COVALENT_RADII"]

#: 1 eV in kJ/mol (the library converts with the same constant).
EV_IN_KJ_PER_MOL = 96.48533212331002

# Covalent radii in angstrom (B. Cordero et al., "Covalent radii revisited", Dalton Trans. 2008,
# 2832; low-spin values for Mn, Fe, Co and sp3 carbon), by atomic number.
COVALENT_RADII = {
    1: 0.31, 2: 0.28, 3: 1.28, 4: 0.96, 5: 0.84, 6: 0.76, 7: 0.71, 8: 0.66, 9: 0.57, 10: 0.58,
    11: 1.66, 12: 1.41, 13: 1.21, 14: 1.11, 15: 1.07, 16: 1.05, 17: 1.02, 18: 1.06, 19: 2.03,
    20: 1.76, 21: 1.70, 22: 1.60, 23: 1.53, 24: 1.39, 25: 1.39, 26: 1.32, 27: 1.26, 28: 1.24,
    29: 1.32, 30: 1.22, 31: 1.22, 32: 1.20, 33: 1.19, 34: 1.20, 35: 1.20, 36: 1.16, 53: 1.39,
}

# Options fixed by this front end (OpenMM's units); any other library option may be passed.
_FIXED_OPTIONS = {"length_unit": "nm", "energy_unit": "kJ/mol"}

_PRECISION_NAMES = {"float64": "float64", "double": "float64", "fp64": "float64",
                    "float32": "float32", "single": "float32", "float": "float32",
                    "fp32": "float32"}
_DTYPE_NAMES = {"float64": "float64", "double": "float64", "float32": "float32",
                "single": "float32", "mixed": "float32", "float": "float32"}

_POSITIONS_KIND = openmm.State.Positions
# State's own helpers behind getPositions(asNumpy=True), used to fill a preallocated buffer.
_FAST_STATE = hasattr(openmm.State, "_getVectorAsNumpy") and hasattr(openmm.State,
                                                                     "_getNumParticles")

# ------------------------------------------------------------------------------------------------
# Shared models
# ------------------------------------------------------------------------------------------------

_models = {}
_models_lock = threading.Lock()


def _model_key(model, device, precision):
    return (os.fspath(model), "cpu" if device is None else str(device),
            _normalize_precision(precision))


def _normalize_precision(precision):
    key = str(precision).lower()
    if key not in _PRECISION_NAMES:
        raise ValueError("precision must be 'float64' or 'float32', not %r" % (precision,))
    return _PRECISION_NAMES[key]


def shared_model(model="ani2x", device="cpu", precision="float64"):
    """The process-wide ``nnpops.Model`` for (model, device, precision), loaded on first use.

    Every computation of this module gets its model here, so a System cloned, deserialized or
    deep-copied many times loads its weights once.  Thread safe.
    """
    key = _model_key(model, device, precision)
    m = _models.get(key)
    if m is not None:
        return m
    with _models_lock:
        m = _models.get(key)
        if m is None:
            from . import _lib
            m = _lib.Model(key[0], device=key[1], precision=key[2])
            _models[key] = m
        return m


def clear_model_cache():
    """Forget the shared models (contexts already open keep theirs alive)."""
    with _models_lock:
        _models.clear()


def _model_spec(model, device, precision):
    """(model string, device, precision) for the pickled spec; registers Model instances."""
    from_instance = not isinstance(model, (str, bytes, os.PathLike))
    if from_instance:
        # An nnpops.Model: keep its resolved path, device and precision, and share the instance.
        inst = model
        key = _model_key(inst.path, inst.device, inst.precision)
        with _models_lock:
            _models.setdefault(key, inst)
        return key
    name = os.fspath(model)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    # A relative path to a YAML file is made absolute, so that an unpickled copy (another
    # working directory) finds the same file; bare model names are kept as names.
    if name.endswith((".yaml", ".yml")) and os.path.isfile(name):
        name = os.path.abspath(name)
    return _model_key(name, device, precision)


def _normalize_dtype(forces_dtype):
    if forces_dtype is None:
        return "float64"
    if isinstance(forces_dtype, str):
        key = forces_dtype.lower()
        if key in _DTYPE_NAMES:
            return _DTYPE_NAMES[key]
    else:
        dt = np.dtype(forces_dtype)
        if dt == np.float64:
            return "float64"
        if dt == np.float32:
            return "float32"
    raise ValueError("forces_dtype must be 'float64' or 'float32', not %r" % (forces_dtype,))


def platform_forces_dtype(platform, properties=None):
    """The dtype (``"float64"`` or ``"float32"``) in which an OpenMM platform takes forces.

    ``platform``: an ``openmm.Context`` (its platform and precision are read), an
    ``openmm.Platform`` or a platform name; ``properties``: the platform properties the Context is
    (to be) created with (``{"Precision": "mixed"}``).  Reference and CPU use float64; CUDA,
    OpenCL, HIP and Metal use float32 unless their precision is ``double`` (default ``single``).
    Pass the result as ``forces_dtype`` to :func:`create_force`.
    """
    precision = None
    if isinstance(platform, openmm.Context):
        context = platform
        platform = context.getPlatform()
        if "Precision" in platform.getPropertyNames():
            precision = platform.getPropertyValue(context, "Precision")
    name = platform if isinstance(platform, str) else platform.getName()
    if name in ("Reference", "CPU"):
        return "float64"
    if properties and "Precision" in properties:
        precision = properties["Precision"]
    if precision is None and not isinstance(platform, str):
        try:
            precision = platform.getPropertyDefaultValue("Precision")
        except Exception:  # a platform without that property
            precision = None
    return "float64" if str(precision).lower() == "double" else "float32"


# ------------------------------------------------------------------------------------------------
# The computation given to PythonForce
# ------------------------------------------------------------------------------------------------

class NNPOpsComputation:
    """The callable that OpenMM's ``PythonForce`` invokes: ``(energy kJ/mol, forces kJ/mol/nm)``.

    ``atomic_numbers``: those of the atoms the force applies to, in the force's particle order.
    ``model``, ``device``, ``precision``: the nnpops model (name or YAML path) and where and in
    which precision it is evaluated.  ``periodic``: take box vectors from the State.
    ``options``: library context options (``ensemble_member``, ``min_distance``, ``threads``, ...).
    ``forces_dtype``: dtype of the returned forces (see :func:`platform_forces_dtype`).
    ``charge``: the total charge of the atoms in elementary charges (None: neutral; a model that
    does not use a charge refuses a nonzero one when the computation is opened).

    Picklable: only the specification is pickled; the context is re-opened on the first call.
    One computation serves one OpenMM Context at a time (calls are serialized by a lock).
    The returned forces array is a buffer reused by the next call.
    """

    _STATE_VERSION = 2  # 2: the spec has "charge" (absent in 1: neutral)

    def __init__(self, atomic_numbers, model="ani2x", device="cpu", precision="float64",
                 periodic=False, options=None, forces_dtype="float64", charge=None):
        numbers = [int(z) for z in np.asarray(atomic_numbers).reshape(-1)]
        model, device, precision = _model_spec(model, device, precision)
        options = dict(options or {})
        for key, value in _FIXED_OPTIONS.items():
            if key in options and str(options[key]).lower() != value.lower():
                raise ValueError("option %s is fixed to %r by the OpenMM front end" % (key, value))
            options.pop(key, None)
        self._spec = {
            "atomic_numbers": numbers,
            "model": model,
            "device": device,
            "precision": precision,
            "periodic": bool(periodic),
            "options": options,
            "forces_dtype": _normalize_dtype(forces_dtype),
            "charge": None if charge is None else float(charge),
        }
        self._setup()

    # ---- specification ----
    @property
    def atomic_numbers(self):
        return list(self._spec["atomic_numbers"])

    @property
    def model(self):
        return self._spec["model"]

    @property
    def device(self):
        return self._spec["device"]

    @property
    def precision(self):
        return self._spec["precision"]

    @property
    def periodic(self):
        return self._spec["periodic"]

    @property
    def options(self):
        return dict(self._spec["options"])

    @property
    def forces_dtype(self):
        return self._spec["forces_dtype"]

    @property
    def n_atoms(self):
        return len(self._spec["atomic_numbers"])

    @property
    def is_open(self):
        """True once the library context is open (after the first call, or open())."""
        return self._context is not None

    def __repr__(self):
        s = self._spec
        return ("NNPOpsComputation(%d atoms, model=%r, device=%r, precision=%r, periodic=%r%s)"
                % (len(s["atomic_numbers"]), s["model"], s["device"], s["precision"],
                   s["periodic"], "".join(", %s=%r" % kv for kv in sorted(s["options"].items()))))

    # ---- pickling: the specification only ----
    def __getstate__(self):
        state = dict(self._spec)
        state["options"] = dict(state["options"])
        state["atomic_numbers"] = list(state["atomic_numbers"])
        state["version"] = self._STATE_VERSION
        return state

    def __setstate__(self, state):
        state = dict(state)
        version = state.pop("version", 1)
        if version > self._STATE_VERSION:
            raise ValueError("NNPOpsComputation state version %d is newer than this nnpops (%d)"
                             % (version, self._STATE_VERSION))
        self._spec = state
        self._setup()

    # ---- runtime (never pickled) ----
    def _setup(self):
        n = len(self._spec["atomic_numbers"])
        self._lock = threading.Lock()
        self._context = None
        self._numbers = np.asarray(self._spec["atomic_numbers"], dtype=np.int32)
        self._positions = np.zeros((n, 3), dtype=np.float64)
        self._cell = np.zeros((3, 3), dtype=np.float64)
        self._pbc = np.ones((3,), dtype=np.uint8)
        self._out = {"energies": np.zeros((1,), dtype=np.float64),
                     "forces": np.zeros((n, 3), dtype=np.float64)}
        self._forces32 = (np.zeros((n, 3), dtype=np.float32)
                          if self._spec["forces_dtype"] == "float32" else None)

    def open(self):
        """Open the library context now (the first call does it otherwise); returns it."""
        with self._lock:
            return self._open()

    def _open(self):
        if self._context is None:
            from . import _lib
            s = self._spec
            model = shared_model(s["model"], s["device"], s["precision"])
            supported = set(model.species)
            missing = sorted(set(s["atomic_numbers"]) - supported)
            if missing:
                raise ValueError("model %r does not describe atomic number(s) %s (it has %s)"
                                 % (s["model"], missing, sorted(supported)))
            charge = s.get("charge")
            if charge and not model.uses_charge:
                raise _lib.UnsupportedError(
                    "model %r does not use a total charge (it describes neutral systems only); "
                    "charge=%g was given" % (s["model"], charge))
            ctx = _lib.Context(model, **_FIXED_OPTIONS)
            for key, value in s["options"].items():
                ctx.set_option(key, value)
            self._context = ctx
        return self._context

    def close(self):
        """Release the library context (re-opened by the next call)."""
        with self._lock:
            ctx, self._context = self._context, None
        if ctx is not None:
            ctx.close()

    def compute(self, positions, box_vectors=None):
        """Energy (kJ/mol) and forces (kJ/mol/nm) for positions in nm (and a 3x3 box in nm).

        The same evaluation as a PythonForce step, without a State (the forces array returned
        is this computation's reusable buffer)."""
        with self._lock:
            ctx = self._context if self._context is not None else self._open()
            np.copyto(self._positions, _in_nm(positions))
            if self._spec["periodic"]:
                if box_vectors is None:
                    raise ValueError("a periodic computation needs box_vectors")
                np.copyto(self._cell, _in_nm(box_vectors))
            return self._evaluate(ctx)

    def __call__(self, state):
        with self._lock:
            ctx = self._context if self._context is not None else self._open()
            pos = self._positions
            if _FAST_STATE:
                n = state._getNumParticles()
                if n != pos.shape[0]:
                    raise ValueError(_count_message(n, pos.shape[0]))
                if n:
                    # Fills our buffer in place (the public getPositions(asNumpy=True) allocates
                    # a new array and wraps it in a Quantity at every step).
                    state._getVectorAsNumpy(_POSITIONS_KIND, pos)
            else:  # pragma: no cover - an OpenMM without the private fast path
                x = state.getPositions(asNumpy=True).value_in_unit(openmm.unit.nanometer)
                if x.shape[0] != pos.shape[0]:
                    raise ValueError(_count_message(x.shape[0], pos.shape[0]))
                np.copyto(pos, x)
            if self._spec["periodic"]:
                a, b, c = _box_vectors_nm(state)
                cell = self._cell
                cell[0] = a
                cell[1] = b
                cell[2] = c
            return self._evaluate(ctx)

    def _evaluate(self, ctx):
        periodic = self._spec["periodic"]
        res = ctx.compute(self._numbers, self._positions,
                          cells=self._cell if periodic else None,
                          pbc=self._pbc if periodic else None, forces=True, out=self._out,
                          charges=self._spec.get("charge"))
        energy = float(res["energies"][0])
        if self._forces32 is not None:
            np.copyto(self._forces32, res["forces"], casting="same_kind")
            return energy, self._forces32
        return energy, res["forces"]


try:  # the SWIG function behind State.getPeriodicBoxVectors: Vec3s in nm, no Quantity
    from openmm.openmm import _openmm as _swig_openmm
    _raw_box_vectors = _swig_openmm.State_getPeriodicBoxVectors
except (ImportError, AttributeError):  # pragma: no cover - another OpenMM layout
    _raw_box_vectors = None


def _box_vectors_nm(state):
    """The State's three box vectors (nm) as plain 3-tuples.  The public getter wraps them in a
    Quantity, which costs about five times more per step."""
    if _raw_box_vectors is not None:
        try:
            return _raw_box_vectors(state)
        except Exception:  # pragma: no cover - fall back on the public API
            pass
    return state.getPeriodicBoxVectors().value_in_unit(openmm.unit.nanometer)


def _count_message(n_state, n_force):
    return ("NNPOpsComputation: the State has %d particles, the force was made for %d atoms"
            % (n_state, n_force))


def _in_nm(x):
    """A plain float64 array in nm from an array (taken as nm) or an OpenMM Quantity."""
    if openmm.unit.is_quantity(x):
        x = x.value_in_unit(openmm.unit.nanometer)
    return np.asarray(x, dtype=np.float64)


# ------------------------------------------------------------------------------------------------
# Bonds (to keep ML molecules whole)
# ------------------------------------------------------------------------------------------------

def find_bonds(atomic_numbers, positions, atoms=None, scale=1.2, box_vectors=None):
    """Bonds (i, j) between atoms closer than ``scale`` times the sum of their covalent radii.

    ``positions``: nm (array or Quantity) of every particle, indexed like ``atomic_numbers``;
    ``atoms``: restrict the search to these particle indices (the returned pairs are particle
    indices).  ``box_vectors``: 3x3 nm; when given, distances use the minimum image.
    """
    numbers = np.asarray(atomic_numbers, dtype=np.int64).reshape(-1)
    pos = _in_nm(positions).reshape(-1, 3) * 10.0  # angstrom
    if pos.shape[0] != numbers.shape[0]:
        raise ValueError("positions (%d) and atomic_numbers (%d) differ in length"
                         % (pos.shape[0], numbers.shape[0]))
    idx = np.arange(numbers.shape[0]) if atoms is None else np.asarray(atoms, dtype=np.int64)
    if idx.size == 0:
        return []
    try:
        radii = np.array([COVALENT_RADII[int(z)] for z in numbers[idx]])
    except KeyError as exc:
        raise ValueError("no covalent radius for atomic number %s" % exc.args[0]) from None
    x = pos[idx]
    cell = inv = None
    if box_vectors is not None:
        cell = _in_nm(box_vectors).reshape(3, 3) * 10.0
        inv = np.linalg.inv(cell)
    bonds = []
    chunk = max(1, 2_000_000 // max(1, len(idx)))
    for start in range(0, len(idx), chunk):
        stop = min(len(idx), start + chunk)
        d = x[None, :, :] - x[start:stop, None, :]
        if cell is not None:
            frac = d @ inv
            d = (frac - np.round(frac)) @ cell
        r = np.sqrt(np.einsum("ijk,ijk->ij", d, d))
        limit = scale * (radii[start:stop, None] + radii[None, :])
        ii, jj = np.nonzero(r < limit)
        ii = ii + start
        keep = jj > ii
        bonds.extend(zip(idx[ii[keep]].tolist(), idx[jj[keep]].tolist()))
    return bonds


def create_bond_force(bonds, periodic=False):
    """A ``CustomBondForce("0")`` over ``bonds`` (particle index pairs): zero energy and forces,
    but OpenMM counts bonded atoms as one molecule (barostat scaling, periodic wrapping)."""
    force = openmm.CustomBondForce("0")
    force.setName("NNPOpsBonds")
    force.setUsesPeriodicBoundaryConditions(bool(periodic))
    for i, j in bonds:
        force.addBond(int(i), int(j), [])
    return force


# ------------------------------------------------------------------------------------------------
# create_force
# ------------------------------------------------------------------------------------------------

def _numbers_of(atomic_numbers):
    """Atomic numbers from a sequence or an openmm.app.Topology."""
    if callable(getattr(atomic_numbers, "atoms", None)):  # an openmm.app.Topology
        out = []
        for atom in atomic_numbers.atoms():
            if atom.element is None:
                raise ValueError("atom %d (%s) has no element" % (atom.index, atom.name))
            out.append(atom.element.atomic_number)
        return np.asarray(out, dtype=np.int64)
    return np.asarray(atomic_numbers, dtype=np.int64).reshape(-1)


def create_force(atomic_numbers, model="ani2x", atoms=None, periodic=False, precision="float64",
                 device="cpu", bonds=None, add_bond_force=False, positions=None, system=None,
                 forces_dtype="float64", force_group=None, name="NNPOpsForce", charge=None,
                 **options):
    """An ``openmm.PythonForce`` that evaluates an nnpops model (energies kJ/mol, lengths nm).

    atomic_numbers
        Of every particle of the System (indexed by particle), or an ``openmm.app.Topology``.
        With ``atoms`` given and ``len(atomic_numbers) == len(atoms)``, they are taken as those
        of the ML atoms in the order of ``atoms`` instead.
    model, device, precision
        The nnpops model (``"ani2x"``, ``"ani1x"``, a YAML path or an ``nnpops.Model``), the
        device (``"cpu"``, ``"cuda"``, ``"cuda:N"``) and compute precision.
    atoms
        Particle indices of the ML atoms (ML/MM); None = every particle.  Only these atoms enter
        the model and receive its forces (``PythonForce.setParticles``).
    periodic
        Use the State's box vectors (positions may be wrapped atom by atom: the library handles
        positions outside the cell).
    bonds, add_bond_force, positions
        Add a zero-energy ``CustomBondForce`` over these bonds (particle index pairs), or over
        bonds found from ``positions`` (nm or Quantity, all particles) by distance
        (< 1.2 x sum of covalent radii) when ``add_bond_force`` is true, so that
        ``MonteCarloBarostat`` and periodic wrapping keep the ML molecules whole.  Needs
        ``system``.
    system
        When given, the force(s) are added to it (and, unless it is empty, its particle count is
        checked).
    forces_dtype
        ``"float64"`` (Reference, CPU, double precision) or ``"float32"`` (CUDA/OpenCL single or
        mixed precision): see :func:`platform_forces_dtype`.
    force_group, name
        Force group and name of the PythonForce.
    charge
        Total charge of the ML atoms in elementary charges (None: neutral).  A model that does
        not use a charge (ANI) raises ``UnsupportedError`` for a nonzero one, here.
    options
        Library context options (``ensemble_member=0``, ``min_distance=0.05``, ...).

    Returns the ``PythonForce`` (whose computation is an :class:`NNPOpsComputation`).
    """
    numbers = _numbers_of(atomic_numbers)
    # (openmm-ml's interpolation passes an empty scratch System: no count to check then)
    n_particles = system.getNumParticles() if system is not None else 0
    n_particles = n_particles or None
    if atoms is not None:
        atoms = [int(i) for i in np.asarray(atoms).reshape(-1)]
        if not atoms:
            raise ValueError("atoms is empty (PythonForce would apply to every particle)")
        if len(set(atoms)) != len(atoms):
            raise ValueError("atoms lists a particle more than once")
        if min(atoms) < 0:
            raise ValueError("atoms holds a negative index")
        if n_particles is not None and max(atoms) >= n_particles:
            raise ValueError("atoms holds index %d but the System has %d particles"
                             % (max(atoms), n_particles))
        if len(numbers) == len(atoms):
            ml_numbers = numbers
            all_numbers = None
        else:
            if max(atoms) >= len(numbers):
                raise ValueError("atoms holds index %d but only %d atomic numbers were given"
                                 % (max(atoms), len(numbers)))
            if n_particles is not None and len(numbers) != n_particles:
                raise ValueError("%d atomic numbers for a System of %d particles (give one per "
                                 "particle, or one per ML atom)" % (len(numbers), n_particles))
            ml_numbers = numbers[atoms]
            all_numbers = numbers
    else:
        ml_numbers = numbers
        all_numbers = numbers
        if n_particles is not None and n_particles != len(numbers):
            raise ValueError("%d atomic numbers for a System of %d particles"
                             % (len(numbers), n_particles))

    computation = NNPOpsComputation(ml_numbers, model=model, device=device, precision=precision,
                                    periodic=periodic, options=options,
                                    forces_dtype=forces_dtype, charge=charge)
    # Fail here, not on OpenMM's worker thread: load the model, check the elements and options.
    computation.open()

    bond_force = None
    if bonds is not None or add_bond_force:
        if system is None:
            raise ValueError("bonds/add_bond_force need system= (the bond force is added to it)")
        if bonds is None:
            if positions is None:
                raise ValueError("add_bond_force=True needs positions= (nm) to find the bonds")
            if all_numbers is None:
                # numbers given for the ML atoms only: scatter them to particle indices
                all_numbers = np.zeros(max(atoms) + 1, dtype=np.int64)
                all_numbers[atoms] = ml_numbers
            pos = _in_nm(positions).reshape(-1, 3)
            bonds = find_bonds(all_numbers, pos[:len(all_numbers)], atoms=atoms)
        bonds = [(int(i), int(j)) for i, j in bonds]
        if n_particles is not None:
            for i, j in bonds:
                if not (0 <= i < n_particles and 0 <= j < n_particles) or i == j:
                    raise ValueError("bad bond (%d, %d)" % (i, j))
        bond_force = create_bond_force(bonds, periodic=periodic)

    force = openmm.PythonForce(computation)
    force.setName(name)
    force.setUsesPeriodicBoundaryConditions(bool(periodic))
    if atoms is not None:
        force.setParticles(atoms)
    if force_group is not None:
        force.setForceGroup(int(force_group))
        if bond_force is not None:
            bond_force.setForceGroup(int(force_group))
    if system is not None:
        system.addForce(force)
        if bond_force is not None:
            system.addForce(bond_force)
    return force
