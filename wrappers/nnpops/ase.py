"""ASE front end: an ASE calculator and a batched evaluation helper.

    from nnpops.ase import NNPOpsCalculator
    atoms.calc = NNPOpsCalculator("ani2x")            # device="auto", precision="float64"
    atoms.get_potential_energy(); atoms.get_forces(); atoms.get_stress()

Units are ASE's (Å, eV).  The C context (workspace, neighbor buffers, options) is created once and
reused; results are cleared whenever anything in ``ase.calculators.calculator.all_changes``
changes.  Stress = -sym(W)/V (Voigt xx yy zz yz xz xy) from the library's virial; it is provided
whenever all three cell vectors are non-zero (any periodicity; no cell raises
``PropertyNotImplementedError``).

Extra results (ensembles: ANI, TensorNet ensembles): ``energy_std`` (the standard deviation of
the system energy over the ensemble members, ddof=1 as torchani's QBC and torchmd-net's Ensemble), ``qbc`` (``energy_std / sqrt(n_atoms)``, torchani's
``energies_qbcs`` value) and ``member_energies`` (each member's energy, eV).  Set
``ensemble_member=k`` to evaluate one member only.
"""

import numpy as np
from ase.calculators.calculator import (Calculator, PropertyNotImplementedError, all_changes)

from . import _lib

__all__ = ["NNPOpsCalculator", "evaluate_batch", "virial_to_stress"]

_MODEL_KEYS = ("model", "device", "precision")
# Calculator parameters that are neither model keys nor context options.
_CALC_KEYS = ("charge",)


def _total_charge(atoms, default):
    """The total charge of ``atoms``: ``atoms.info["charge"]`` when present, else ``default``
    (the calculator's ``charge`` keyword; None = neutral)."""
    q = atoms.info.get("charge", default) if atoms is not None else default
    return None if q is None else float(q)


def virial_to_stress(virial, cell):
    """3x3 stress -sym(W)/V (eV/Å^3) from a virial W (eV) and a cell (rows a, b, c)."""
    w = np.asarray(virial, dtype=np.float64).reshape(3, 3)
    volume = abs(float(np.linalg.det(np.asarray(cell, dtype=np.float64))))
    return -0.5 * (w + w.T) / volume


def _voigt(s):
    return np.array([s[0, 0], s[1, 1], s[2, 2], s[1, 2], s[0, 2], s[0, 1]])


def _full_cell(cell):
    """True when all three cell vectors are non-zero and the cell has a volume."""
    c = np.asarray(cell, dtype=np.float64)
    if not c.any():
        return False
    return bool(c.any(axis=1).all()) and abs(np.linalg.det(c)) > 0.0


def _library_cell(cell, pbc):
    """The cell handed to the library for a system with at least one periodic axis.

    The library wants three independent cell vectors as soon as one axis is periodic.  A zero
    vector along a NON-periodic axis (a slab or a wire, ``Atoms(cell=[a, b, 0], pbc=[1, 1, 0])``)
    only fixes the fractional coordinates along that axis, which do not enter the energy, so it is
    replaced by a vector orthogonal to the others (length 1 Å).  A zero vector along a periodic
    axis is left as it is: the library reports it (BadCellError).
    """
    c = np.asarray(cell, dtype=np.float64)
    zero = np.linalg.norm(c, axis=1) == 0.0
    if not zero.any() or np.any(zero & pbc):
        return c
    from ase.cell import Cell
    return np.ascontiguousarray(Cell(c).complete().array)


def _energy_std(member_energies):
    """Standard deviation over the last axis with ddof=1 (0 for a single member)."""
    m = np.asarray(member_energies, dtype=np.float64)
    k = m.shape[-1]
    if k < 2:
        return np.zeros(m.shape[:-1])
    d = m - m.mean(axis=-1, keepdims=True)
    return np.sqrt((d * d).sum(axis=-1) / (k - 1))


class NNPOpsCalculator(Calculator):
    """ASE calculator for nnpops models.

    ``model``: a model name (``"ani2x"``, ``"ani1x"``), the path of a model YAML file, or an
    :class:`nnpops.Model` (then ``device`` and ``precision`` are the model's).  Other keyword
    arguments are context options (``min_distance``, ``ensemble_member``, ``max_neighbors``,
    ``cuda_graphs``, ``threads`` (CPU: threads of a step, 0 = all; the same results), ...).
    ``charge``: the total charge (elementary charges) of the systems this calculator evaluates;
    an Atoms object's ``atoms.info["charge"]`` takes precedence (torchmd-net's calculator reads
    the charge from there too; the keyword is the default for Atoms without one).  None (default):
    neutral.  A model that does not use a charge (ANI, LJ) raises ``UnsupportedError`` for a
    nonzero one, from either source: a charged system is never evaluated as a neutral one.
    ``atoms`` attaches the calculator to an Atoms object.
    """

    implemented_properties = ["energy", "free_energy", "forces", "stress", "energies"]
    nolabel = True
    default_parameters = {}

    def __init__(self, model="ani2x", device="auto", precision="float64", *, atoms=None,
                 charge=None, **options):
        self._model = None
        self._context = None
        self._charge_used = None
        Calculator.__init__(self, atoms=None)
        self.parameters["charge"] = charge
        if isinstance(model, _lib.Model):
            device, precision = model.device, model.precision
            self.parameters.update(model=None, device=device, precision=precision)
        else:
            self.parameters.update(model=model, device=device, precision=precision)
        self.parameters.update(options)
        self._open(model, device, precision, options)
        if atoms is not None:
            atoms.calc = self

    # ---- C objects ----
    def _open(self, model, device, precision, options):
        if isinstance(model, _lib.Model):
            m = model
        else:
            m = _lib.Model(model, device=device, precision=precision)
        ctx = _lib.Context(m, **options)
        self._model, self._context = m, ctx
        self._ensemble_size = m.ensemble_size
        self._z32 = None
        self._z_key = None

    @property
    def model(self):
        """The :class:`nnpops.Model` in use."""
        return self._model

    @property
    def context(self):
        """The :class:`nnpops.Context` in use (persists across calls)."""
        return self._context

    def set(self, **kwargs):
        """Change parameters: ``model``/``device``/``precision`` reload the model, anything else
        is a context option.  Results are cleared when something changed."""
        changed = Calculator.set(self, **kwargs)
        if not changed:
            return changed
        if any(k in _MODEL_KEYS for k in changed):
            p = self.parameters
            options = {k: v for k, v in p.items() if k not in _MODEL_KEYS + _CALC_KEYS}
            model = p.get("model")
            if model is None:  # the calculator was made from a Model object
                model = self._model
            if isinstance(model, _lib.Model) and ("device" in changed or "precision" in changed):
                model = model.path  # the same file, loaded for the new device or precision
            old = self._context
            self._open(model, p["device"], p["precision"], options)
            if old is not None:
                old.close()
        else:
            for k, v in changed.items():
                if k not in _CALC_KEYS:
                    self._context.set_option(k, v)
        self.reset()
        return changed

    def todict(self, skip_default=True):
        d = dict(self.parameters)
        if d.get("model") is None and self._model is not None:
            d["model"] = self._model.path
        return d

    # ---- evaluation ----
    def _numbers32(self, atoms):
        z = atoms.numbers
        if self._z32 is None or self._z32.shape != z.shape or not np.array_equal(self._z_key, z):
            self._z_key = z.copy()
            self._z32 = np.ascontiguousarray(z, dtype=np.int32)
        return self._z32

    def check_state(self, atoms, tol=1e-15):
        """ASE's changes, and "charge" when the total charge differs from the last calculation's
        (ASE does not compare atoms.info)."""
        changes = Calculator.check_state(self, atoms, tol)
        if self.atoms is not None and "charge" not in changes:
            if _total_charge(atoms, self.parameters.get("charge")) != self._charge_used:
                changes = list(changes) + ["charge"]
        return changes

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        Calculator.calculate(self, atoms, properties, system_changes)
        atoms = self.atoms
        charge = _total_charge(atoms, self.parameters.get("charge"))
        pbc = np.asarray(atoms.pbc, dtype=bool)
        cell = atoms.cell.array
        full = _full_cell(cell)
        if "stress" in properties and not full:
            raise PropertyNotImplementedError(
                "stress needs a cell with three non-zero lattice vectors")
        periodic = bool(pbc.any())
        ens = self._ensemble_size
        res = self._context.compute(
            self._numbers32(atoms), atoms.positions,
            cells=_library_cell(cell, pbc) if periodic else None, pbc=pbc if periodic else None,
            forces=True, virial=full, atomic_energies=True, member_energies=ens > 1,
            charges=charge)
        self._charge_used = charge
        energy = float(res["energies"][0])
        results = {"energy": energy, "free_energy": energy, "forces": res["forces"],
                   "energies": res["atomic_energies"]}
        if full:
            results["stress"] = _voigt(virial_to_stress(res["virials"][0], cell))
        if ens > 1:
            members = res["member_energies"][0]
            std = float(_energy_std(members))
            results["member_energies"] = members
            results["energy_std"] = std
            results["qbc"] = std / np.sqrt(max(len(atoms), 1))
        else:
            results["energy_std"] = 0.0
            results["qbc"] = 0.0
        self.results = results

    def get_energy_std(self, atoms=None):
        """Standard deviation of the energy over the ensemble members (eV, ddof=1)."""
        if atoms is None:
            atoms = self.atoms
        if atoms is None:
            raise ValueError("no atoms to evaluate")
        self.get_potential_energy(atoms)  # computes unless the results are current
        return self.results["energy_std"]


def _context_for(calc_or_model, device, precision, options):
    """(context, model, owned) for a calculator, Context, Model, or model name."""
    if isinstance(calc_or_model, NNPOpsCalculator):
        if options:
            raise ValueError("options cannot be given together with a calculator")
        return calc_or_model.context, calc_or_model.model, False
    if isinstance(calc_or_model, _lib.Context):
        if options:
            raise ValueError("options cannot be given together with a context")
        return calc_or_model, calc_or_model.model, False
    if isinstance(calc_or_model, _lib.Model):
        model = calc_or_model
    else:
        model = _lib.Model(calc_or_model, device=device, precision=precision)
    return _lib.Context(model, **options), model, True


def evaluate_batch(atoms_list, calc_or_model="ani2x", device="auto", precision="float64",
                   **options):
    """Evaluate several structures in ONE batched compute call.

    ``calc_or_model``: an :class:`NNPOpsCalculator` (its context is used), an
    :class:`nnpops.Context`, an :class:`nnpops.Model`, or a model name/path (a temporary context
    with ``options`` is created).  Each structure keeps its own cell and periodicity: a structure
    whose pbc is all False has no cell.  Returns one dict per structure with ``energy`` (eV),
    ``forces`` [n, 3] (eV/Å), ``energies`` [n] (eV per atom), ``stress`` (Voigt, eV/Å^3, or None
    when the cell does not have three non-zero vectors), ``virial`` [3, 3] (eV), and for
    ensembles ``energy_std`` and ``member_energies``.
    """
    atoms_list = list(atoms_list)
    ctx, model, owned = _context_for(calc_or_model, device, precision, options)
    try:
        n_sys = len(atoms_list)
        if n_sys == 0:
            return []
        counts = np.array([len(a) for a in atoms_list], dtype=np.int64)
        numbers = np.concatenate([a.numbers for a in atoms_list]).astype(np.int32)
        positions = np.concatenate([a.positions for a in atoms_list]).astype(np.float64)
        batch = np.repeat(np.arange(n_sys, dtype=np.int32), counts)
        cells = np.zeros((n_sys, 3, 3))
        pbc = np.zeros((n_sys, 3), dtype=np.uint8)
        full = np.zeros(n_sys, dtype=bool)
        for k, a in enumerate(atoms_list):
            full[k] = _full_cell(a.cell.array)
            if np.any(a.pbc):
                cells[k] = _library_cell(a.cell.array, np.asarray(a.pbc, dtype=bool))
                pbc[k] = a.pbc
        any_periodic = bool(pbc.any())
        ens = model.ensemble_size
        charges = None
        if any("charge" in a.info for a in atoms_list):
            charges = np.array([float(a.info.get("charge", 0.0)) for a in atoms_list])
        res = ctx.compute(numbers, positions, cells=cells if any_periodic else None,
                          pbc=pbc if any_periodic else None, batch=batch, n_systems=n_sys,
                          forces=True, virial=True, atomic_energies=True,
                          member_energies=ens > 1, charges=charges)
    finally:
        if owned:
            ctx.close()
    out = []
    start = 0
    for k, a in enumerate(atoms_list):
        end = start + int(counts[k])
        d = {"energy": float(res["energies"][k]),
             "forces": res["forces"][start:end],
             "energies": res["atomic_energies"][start:end],
             "virial": res["virials"][k],
             "stress": (_voigt(virial_to_stress(res["virials"][k], a.cell.array))
                        if full[k] else None)}
        if ens > 1:
            d["member_energies"] = res["member_energies"][k]
            d["energy_std"] = float(_energy_std(res["member_energies"][k]))
        out.append(d)
        start = end
    return out
