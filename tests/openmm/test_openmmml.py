"""openmm-ml integration: the entry point metadata (pyproject.toml) and the factory,
registered by hand (the package need not be installed), in createSystem and createMixedSystem."""

import os

import numpy as np
import pytest

import openmm_helpers as H
from openmm_helpers import app, openmm, unit

from nnpops import openmmml as nml

PYPROJECT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pyproject.toml")


def _toml():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(PYPROJECT, "rb") as f:
        return tomllib.load(f)


def test_entry_points_declared():
    eps = _toml()["project"]["entry-points"]["openmmml.potentials"]
    assert eps == nml.ENTRY_POINTS
    assert eps["nnpops-ani2x"] == "nnpops.openmmml:NNPOpsPotentialImplFactory"
    assert eps["nnpops-ani1x"] == "nnpops.openmmml:NNPOpsPotentialImplFactory"
    assert eps["nnpops-ani1ccx"] == "nnpops.openmmml:NNPOpsPotentialImplFactory"
    # Each value names an importable factory class.
    module, _, cls = eps["nnpops-ani2x"].partition(":")
    assert module == nml.__name__ and isinstance(getattr(nml, cls), type)


@pytest.fixture(scope="module")
def MLPotential():
    mlp = pytest.importorskip("openmmml.mlpotential")
    nml.register()
    assert isinstance(mlp.MLPotential._implFactories["nnpops-ani2x"],
                      nml.NNPOpsPotentialImplFactory)
    assert issubclass(nml.NNPOpsPotentialImplFactory, mlp.MLPotentialImplFactory)
    return mlp.MLPotential


def test_create_system(MLPotential):
    top, pos = H.ethanol_topology()
    pos_nm = pos.value_in_unit(unit.nanometer)
    system = MLPotential("nnpops-ani2x").createSystem(top)
    py = [f for f in system.getForces() if isinstance(f, openmm.PythonForce)]
    assert len(py) == 1 and not py[0].usesPeriodicBoundaryConditions()
    e, f = H.energy_forces(H.context(system, pos_nm))
    e_ref, f_ref = H.library_reference("ani2x", H.numbers_of(top), pos_nm)
    assert e == pytest.approx(e_ref, rel=1e-8)
    assert H.rel_err(f, f_ref) < 1e-8
    # ANI-1x, one ensemble member chosen the way openmm-ml's ANI potential takes it
    system = MLPotential("nnpops-ani1x").createSystem(top, modelIndex=2)
    e1, _ = H.energy_forces(H.context(system, pos_nm))
    import nnpops
    ctx = nnpops.Context(H.model("ani1x"), ensemble_member=2)
    ref = ctx.compute(H.numbers_of(top), pos_nm * 10)["energies"][0] * H.EV_IN_KJ_PER_MOL
    assert e1 == pytest.approx(ref, rel=1e-8)


def test_create_mixed_system(MLPotential):
    topology, positions, ligand = H.solvated_ethanol(box_nm=2.0)
    mm = H.mm_system(topology)
    potential = MLPotential("nnpops-ani1x")
    mixed = potential.createMixedSystem(topology, mm, ligand, forceGroup=1)
    py = [f for f in mixed.getForces() if isinstance(f, openmm.PythonForce)]
    assert len(py) == 1 and list(py[0].getParticles()) == ligand
    assert py[0].usesPeriodicBoundaryConditions()
    box = np.asarray(topology.getPeriodicBoxVectors().value_in_unit(unit.nanometer))
    integ = openmm.LangevinMiddleIntegrator(300 * unit.kelvin, 1.0 / unit.picosecond,
                                            0.5 * unit.femtosecond)
    ctx = H.context(mixed, positions, "CPU", integrator=integ, box=box)
    integ.step(5)
    st = ctx.getState(getPositions=True, getEnergy=True, groups={1})
    pos = np.asarray(st.getPositions(asNumpy=True).value_in_unit(unit.nanometer))
    e_ref, _ = H.library_reference("ani1x", H.numbers_of(topology)[ligand], pos[ligand])
    assert st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole) == \
        pytest.approx(e_ref, rel=1e-8)


def test_create_mixed_system_interpolating(MLPotential):
    """interpolate=True deep-copies the System and puts the ML force inside a CustomCVForce:
    the computation must pickle; lambda_interpolate = 1 gives the ML energy of the ligand."""
    top, pos = H.ethanol_topology()
    ff = H.forcefield()
    mm = ff.createSystem(top, nonbondedMethod=app.NoCutoff)
    potential = MLPotential("nnpops-ani2x")
    ligand = list(range(top.getNumAtoms()))
    mixed = potential.createMixedSystem(top, mm, ligand, interpolate=True)
    pos_nm = pos.value_in_unit(unit.nanometer)
    ctx = H.context(mixed, pos_nm)
    ctx.setParameter("lambda_interpolate", 1.0)
    e1, _ = H.energy_forces(ctx)
    e_ref, _ = H.library_reference("ani2x", H.numbers_of(top), pos_nm)
    assert e1 == pytest.approx(e_ref, rel=1e-8)
    ctx.setParameter("lambda_interpolate", 0.0)
    e0, _ = H.energy_forces(ctx)
    assert abs(e0 - e1) > 1.0  # the MM energy of the ligand is another number


def test_bond_force_from_topology(MLPotential):
    topology, positions, ligand = H.solvated_ethanol(box_nm=2.0)
    mm = H.mm_system(topology)
    mixed = MLPotential("nnpops-ani1x").createMixedSystem(topology, mm, ligand,
                                                          add_bond_force=True)
    bf = [f for f in mixed.getForces() if isinstance(f, openmm.CustomBondForce)]
    assert len(bf) == 1 and bf[0].getNumBonds() == len(H.ETHANOL_BONDS)
    ctx = H.context(mixed, positions, "Reference",
                    box=topology.getPeriodicBoxVectors().value_in_unit(unit.nanometer))
    assert any(set(ligand) == set(m) for m in ctx.getMolecules())


def test_unknown_name():
    with pytest.raises(ValueError):
        nml.NNPOpsPotentialImplFactory().createImpl("ani2x")
    impl = nml.NNPOpsPotentialImplFactory().createImpl("nnpops-ani2x", device="cpu")
    assert impl.model == "ani2x" and impl.getMLLongRange() is False
