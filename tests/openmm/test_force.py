"""nnpops.openmm.create_force: energies and forces against the library, ML/MM subsets, units,
force dtypes, pickling (XmlSerializer, deepcopy, clone) and errors."""

import copy
import pickle
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import openmm_helpers as H
from openmm_helpers import openmm, unit

import nnpops
from nnpops import openmm as nom
from nnpops import structures

PLATFORMS = ["Reference", "CPU"]
TOL = 1e-8  # relative, float64


@pytest.mark.parametrize("platform", PLATFORMS)
def test_whole_molecule_matches_library(platform):
    """Alanine (13 atoms), ANI-2x, not periodic: OpenMM's energy and forces equal a direct
    library call in angstrom/eV converted to kJ/mol and kJ/mol/nm."""
    numbers, pos, _ = H.atoms_nm(structures.alanine())
    system = H.system_of(numbers)
    force = nom.create_force(numbers, model="ani2x", system=system)
    assert isinstance(force, openmm.PythonForce)
    assert not force.usesPeriodicBoundaryConditions()
    assert list(force.getParticles()) == []
    ctx = H.context(system, pos, platform)
    e, f = H.energy_forces(ctx)
    e_ref, f_ref = H.library_reference("ani2x", numbers, pos)
    assert e == pytest.approx(e_ref, rel=TOL, abs=0)
    assert H.rel_err(f, f_ref) < TOL
    assert np.all(np.isfinite(f)) and np.abs(f).max() > 1.0


@pytest.mark.parametrize("platform", PLATFORMS)
def test_matches_ase_calculator(platform):
    """Same energies and forces as the ASE calculator (eV, eV/angstrom) after unit conversion."""
    nase = pytest.importorskip("nnpops.ase")
    atoms = structures.ethanol()
    atoms.calc = nase.NNPOpsCalculator("ani2x")
    e_ase = atoms.get_potential_energy() * H.EV_IN_KJ_PER_MOL
    f_ase = atoms.get_forces() * H.EV_PER_A_IN_KJ_PER_MOL_NM
    numbers, pos, _ = H.atoms_nm(atoms)
    system = H.system_of(numbers)
    nom.create_force(numbers, model="ani2x", system=system)
    e, f = H.energy_forces(H.context(system, pos, platform))
    assert e == pytest.approx(e_ase, rel=TOL, abs=0)
    assert H.rel_err(f, f_ase) < TOL


@pytest.mark.parametrize("platform", PLATFORMS)
def test_periodic_matches_library(platform):
    """A periodic ANI-1x water box (cutoff > half the box): box vectors come from the State,
    and atoms placed outside the cell (OpenMM may also wrap them atom by atom) change nothing."""
    numbers, pos, cell = H.atoms_nm(structures.water_box(3, seed=1))
    e_ref, f_ref = H.library_reference("ani1x", numbers, pos, cell)
    system = H.system_of(numbers, cell)
    force = nom.create_force(numbers, model="ani1x", periodic=True, system=system)
    assert force.usesPeriodicBoundaryConditions()
    # Shift some molecules by lattice vectors and every atom by a common offset.
    shifted = pos + np.array([0.37, -0.21, 0.05])
    shifted[::4] += cell[0] - 2 * cell[2]
    e_ref2, f_ref2 = H.library_reference("ani1x", numbers, shifted, cell)
    assert e_ref2 == pytest.approx(e_ref, rel=1e-10)
    ctx = H.context(system, shifted, platform, box=cell)
    e, f = H.energy_forces(ctx)
    assert e == pytest.approx(e_ref, rel=TOL, abs=0)
    assert H.rel_err(f, f_ref) < TOL
    # The box really is the State's: a larger box changes the energy (fewer image contacts).
    ctx.setPeriodicBoxVectors(*[openmm.Vec3(*row) for row in cell * 1.05])
    ctx.setPositions(pos)
    e2, _ = H.energy_forces(ctx)
    e_ref3, _ = H.library_reference("ani1x", numbers, pos, cell * 1.05)
    assert e2 == pytest.approx(e_ref3, rel=TOL, abs=0)
    assert abs(e2 - e) > 1.0


@pytest.mark.parametrize("platform", PLATFORMS)
def test_subset_ml_atoms(platform):
    """ML/MM subset: ethanol among waters, ML atoms listed in a scrambled order.  The energy is
    the ethanol's alone, only ML atoms get forces, and atomic numbers may be given for every
    particle or for the ML atoms in the order of `atoms`."""
    eth = structures.ethanol()
    wat = structures.water()
    parts = [wat.positions + [4.0, 0, 0], eth.positions, wat.positions + [-4.0, 0, 0]]
    numbers = np.concatenate([wat.numbers, eth.numbers, wat.numbers])
    pos = np.concatenate(parts) / 10.0
    ml = [3 + k for k in (4, 0, 8, 2, 1, 7, 3, 6, 5)]  # scrambled ethanol indices
    e_ref, f_ref = H.library_reference("ani2x", numbers[ml], pos[ml])
    for given in (numbers, numbers[ml]):
        system = H.system_of(numbers)
        force = nom.create_force(given, model="ani2x", atoms=ml, system=system)
        assert list(force.getParticles()) == ml
        e, f = H.energy_forces(H.context(system, pos, platform))
        assert e == pytest.approx(e_ref, rel=TOL, abs=0)
        assert H.rel_err(f[ml], f_ref) < TOL
        mm = [i for i in range(len(numbers)) if i not in ml]
        assert np.all(f[mm] == 0.0)


def test_public_state_api_fallback(monkeypatch):
    """The private State helpers (positions into our buffer, raw box vectors) and the public
    getters give the same numbers."""
    numbers, pos, cell = H.atoms_nm(structures.water_box(2, seed=5))
    system = H.system_of(numbers, cell)
    nom.create_force(numbers, model="ani1x", periodic=True, system=system)
    ctx = H.context(system, pos + 0.3, box=cell)
    e_fast, f_fast = H.energy_forces(ctx)
    monkeypatch.setattr(nom, "_FAST_STATE", False)
    monkeypatch.setattr(nom, "_raw_box_vectors", None)
    e_pub, f_pub = H.energy_forces(ctx)
    assert e_pub == e_fast and np.array_equal(f_pub, f_fast)
    e_ref, _ = H.library_reference("ani1x", numbers, pos, cell)
    assert e_fast == pytest.approx(e_ref, rel=TOL, abs=0)


def test_topology_as_atomic_numbers():
    top, pos = H.ethanol_topology()
    system = H.system_of(H.numbers_of(top))
    nom.create_force(top, model="ani2x", system=system)
    e, _ = H.energy_forces(H.context(system, pos.value_in_unit(unit.nanometer)))
    e_ref, _ = H.library_reference("ani2x", H.numbers_of(top), pos.value_in_unit(unit.nanometer))
    assert e == pytest.approx(e_ref, rel=TOL, abs=0)


def test_charge():
    """create_force(..., charge=): zero is the neutral force; ANI refuses a nonzero total charge
    when the force is made (not on OpenMM's worker thread), and the charge survives pickling."""
    numbers, pos, _ = H.atoms_nm(structures.alanine())
    system = H.system_of(numbers)
    nom.create_force(numbers, model="ani2x", system=system, charge=0)
    e, _ = H.energy_forces(H.context(system, pos))
    e_ref, _ = H.library_reference("ani2x", numbers, pos)
    assert e == pytest.approx(e_ref, rel=TOL, abs=0)
    with pytest.raises(nnpops.UnsupportedError, match="does not use a total charge"):
        nom.create_force(numbers, model="ani2x", system=H.system_of(numbers), charge=1)
    comp = nom.NNPOpsComputation(numbers, model="ani2x", charge=0.0)
    assert pickle.loads(pickle.dumps(comp))._spec["charge"] == 0.0


def test_computation_keeps_context_and_buffers():
    """One library context per computation, reused at every step; forces C-contiguous float64."""
    numbers, pos, _ = H.atoms_nm(structures.alanine())
    comp = nom.NNPOpsComputation(numbers, model="ani2x")
    assert not comp.is_open
    e1, f1 = comp.compute(pos)
    lib_ctx = comp._context
    e2, f2 = comp.compute(pos * unit.nanometer)
    assert comp._context is lib_ctx and f2 is f1  # same context, same output buffer
    assert e1 == e2
    assert f1.dtype == np.float64 and f1.flags.c_contiguous and f1.shape == (13, 3)
    assert lib_ctx.stats()["steps"] == 2
    assert lib_ctx.get_option("length_unit") == 1.0  # nm
    assert lib_ctx.get_option("energy_unit") == 2.0  # kJ/mol
    # Models are shared through the module cache, whatever the spelling of the precision.
    assert nom.shared_model("ani2x") is nom.shared_model("ani2x", "cpu", "double")
    assert lib_ctx.model is nom.shared_model("ani2x")


def test_runs_on_openmm_worker_thread():
    """OpenMM calls the computation from its own thread; record it with a subclass."""
    seen = []

    class Recording(nom.NNPOpsComputation):
        def __call__(self, state):
            seen.append(threading.get_ident())
            return super().__call__(state)

    numbers, pos, _ = H.atoms_nm(structures.water())
    system = H.system_of(numbers)
    system.addForce(openmm.PythonForce(Recording(numbers, model="ani1x")))
    ctx = H.context(system, pos, "CPU")
    e, _ = H.energy_forces(ctx)
    assert seen and np.isfinite(e)
    e_ref, _ = H.library_reference("ani1x", numbers, pos)
    assert e == pytest.approx(e_ref, rel=TOL, abs=0)


def test_forces_dtype_float32():
    numbers, pos, _ = H.atoms_nm(structures.ethanol())
    comp = nom.NNPOpsComputation(numbers, model="ani2x", forces_dtype="float32")
    e, f = comp.compute(pos)
    assert f.dtype == np.float32 and f.flags.c_contiguous
    _, f_ref = H.library_reference("ani2x", numbers, pos)
    assert H.rel_err(f, f_ref) < 1e-6
    # Still accepted (converted by OpenMM) on a double-precision platform.
    system = H.system_of(numbers)
    nom.create_force(numbers, model="ani2x", system=system, forces_dtype="float32")
    _, f2 = H.energy_forces(H.context(system, pos))
    assert H.rel_err(f2, f_ref) < 1e-6


def test_platform_forces_dtype():
    assert nom.platform_forces_dtype("Reference") == "float64"
    assert nom.platform_forces_dtype("CPU") == "float64"
    assert nom.platform_forces_dtype("CUDA") == "float32"
    assert nom.platform_forces_dtype("CUDA", {"Precision": "mixed"}) == "float32"
    assert nom.platform_forces_dtype("OpenCL", {"Precision": "double"}) == "float64"
    numbers, pos, _ = H.atoms_nm(structures.water())
    system = H.system_of(numbers)
    nom.create_force(numbers, model="ani1x", system=system)
    ctx = H.context(system, pos, "CPU")
    assert nom.platform_forces_dtype(ctx) == "float64"
    assert nom.platform_forces_dtype(openmm.Platform.getPlatformByName("Reference")) == "float64"


# ------------------------------------------------------------------------------------------------
# Pickling: XmlSerializer, deepcopy, clone


def _computation_of(force):
    """The computation of a PythonForce, unpickled from the hex string of its XML."""
    root = ET.fromstring(openmm.XmlSerializer.serialize(force))
    return pickle.loads(bytes.fromhex(root.get("function")))


def _ml_mm_periodic_system():
    numbers, pos, cell = H.atoms_nm(structures.water_box(2, seed=3))
    system = H.system_of(numbers, cell)
    ml = list(range(3, 12))  # three of the eight waters
    nom.create_force(numbers, model="ani1x", atoms=ml, periodic=True, system=system,
                     force_group=2, ensemble_member=3, min_distance=0.05)
    return system, pos, cell, numbers, ml


def test_pickle_keeps_only_the_spec():
    numbers, pos, _ = H.atoms_nm(structures.ethanol())
    comp = nom.NNPOpsComputation(numbers, model="ani2x", options={"ensemble_member": 2})
    e, _ = comp.compute(pos)
    data = pickle.dumps(comp)
    assert len(data) < 1000  # the specification, no weights or buffers
    state = comp.__getstate__()
    assert set(state) == {"atomic_numbers", "model", "device", "precision", "periodic", "options",
                          "forces_dtype", "charge", "version"}
    clone = pickle.loads(data)
    assert not clone.is_open and comp.is_open
    assert clone.options == {"ensemble_member": 2}
    e2, _ = clone.compute(pos)
    assert e2 == e
    assert clone._context is not comp._context  # its own context ...
    assert clone._context.model is comp._context.model  # ... on the shared model


def test_xml_serializer_round_trip():
    system, pos, cell, numbers, ml = _ml_mm_periodic_system()
    e0, f0 = H.energy_forces(H.context(system, pos, box=cell))
    xml = openmm.XmlSerializer.serialize(system)
    assert "PythonForce" in xml
    system2 = openmm.XmlSerializer.deserialize(xml)
    forces = [f for f in system2.getForces() if isinstance(f, openmm.PythonForce)]
    assert len(forces) == 1
    assert list(forces[0].getParticles()) == ml
    assert forces[0].getForceGroup() == 2 and forces[0].usesPeriodicBoundaryConditions()
    e1, f1 = H.energy_forces(H.context(system2, pos, box=cell))
    assert e1 == e0
    assert np.array_equal(f1, f0)
    # The options travelled: ensemble member 3 alone, not the ensemble mean.
    comp = _computation_of(forces[0])
    assert comp.options == {"ensemble_member": 3, "min_distance": 0.05}
    ctx = nnpops.Context(H.model("ani1x"), ensemble_member=3)
    ref = ctx.compute(numbers[ml], pos[ml] * 10, cells=cell * 10)["energies"][0]
    assert e0 == pytest.approx(ref * H.EV_IN_KJ_PER_MOL, rel=TOL)


@pytest.mark.parametrize("how", ["deepcopy", "clone"])
def test_deepcopy_and_clone(how):
    system, pos, cell, _, _ = _ml_mm_periodic_system()
    e0, f0 = H.energy_forces(H.context(system, pos, box=cell))
    if how == "deepcopy":
        system2 = copy.deepcopy(system)
    else:
        system2 = system.__copy__()
    e1, f1 = H.energy_forces(H.context(system2, pos, box=cell))
    assert e1 == e0 and np.array_equal(f1, f0)
    # and the copy of a copy, used while the first is alive
    system3 = copy.deepcopy(system2)
    e2, _ = H.energy_forces(H.context(system3, pos, box=cell))
    assert e2 == e0


def test_two_contexts_on_one_system():
    """Two OpenMM Contexts built from one System share the computation object: calls are
    serialized by its lock and both give the right energy."""
    numbers, pos, _ = H.atoms_nm(structures.alanine())
    system = H.system_of(numbers)
    nom.create_force(numbers, model="ani2x", system=system)
    c1 = H.context(system, pos, "CPU")
    c2 = H.context(system, pos + 0.01, "CPU")
    e1, _ = H.energy_forces(c1)
    e2, _ = H.energy_forces(c2)
    assert e1 == pytest.approx(H.library_reference("ani2x", numbers, pos)[0], rel=TOL)
    assert e2 == pytest.approx(H.library_reference("ani2x", numbers, pos + 0.01)[0], rel=TOL)


# ------------------------------------------------------------------------------------------------
# Errors and import behaviour


def test_errors_are_raised_early():
    numbers, pos, _ = H.atoms_nm(structures.water())
    with pytest.raises(ValueError, match="atomic number"):
        nom.create_force([1, 8, 1, 26], model="ani2x")  # iron: not an ANI-2x element
    with pytest.raises(nnpops.NNPOPSError):
        nom.create_force(numbers, model="ani2x", no_such_option=1)
    with pytest.raises(ValueError, match="fixed"):
        nom.create_force(numbers, model="ani2x", length_unit="angstrom")
    with pytest.raises(ValueError):
        nom.create_force(numbers, model="ani2x", atoms=[])
    with pytest.raises(ValueError):
        nom.create_force(numbers, model="ani2x", atoms=[0, 0])
    with pytest.raises(ValueError):
        nom.create_force(numbers, model="ani2x", bonds=[(0, 1)])  # no system to add it to
    with pytest.raises(nnpops.ModelNotFoundError):
        nom.create_force(numbers, model="no-such-model")
    system = H.system_of(numbers)
    with pytest.raises(ValueError):
        nom.create_force(numbers[:2], model="ani2x", system=system)


def test_wrong_particle_count_is_an_openmm_error():
    numbers, pos, _ = H.atoms_nm(structures.water())
    system = H.system_of(list(numbers) + [8])
    system.addForce(openmm.PythonForce(nom.NNPOpsComputation(numbers, model="ani1x")))
    ctx = H.context(system, np.concatenate([pos, [[1.0, 1.0, 1.0]]]))
    with pytest.raises(openmm.OpenMMException, match="particles"):
        ctx.getState(getEnergy=True)


def test_library_error_becomes_openmm_exception():
    numbers, pos, _ = H.atoms_nm(structures.water())
    system = H.system_of(numbers)
    nom.create_force(numbers, model="ani1x", system=system)
    bad = pos.copy()
    bad[1] = bad[0] + 1e-4  # closer than min_distance
    ctx = H.context(system, bad)
    with pytest.raises(openmm.OpenMMException):
        ctx.getState(getEnergy=True)


def test_import_does_not_load_library():
    code = ("import nnpops.openmm, nnpops.openmmml, nnpops._lib as L, sys; "
            "sys.exit(1 if L.is_loaded() else 0)")
    subprocess.run([sys.executable, "-c", code], check=True)
