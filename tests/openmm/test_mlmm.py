"""ML/MM: an ANI ethanol in amber14 TIP3P water (PME), and the bond force that keeps it whole
under MonteCarloBarostat and periodic wrapping."""

import numpy as np
import pytest

import openmm_helpers as H
from openmm_helpers import openmm, unit

from nnpops import openmm as nom

ML_GROUP = 1


@pytest.fixture(scope="module")
def solvated():
    return H.solvated_ethanol(box_nm=2.0)


def _mixed_system(topology, ligand, **kw):
    system = H.remove_internal_mm(H.mm_system(topology), ligand)
    numbers = H.numbers_of(topology)
    nom.create_force(numbers, model="ani1x", atoms=ligand, periodic=True, system=system,
                     force_group=ML_GROUP, **kw)
    return system


def _ml_energy(ctx):
    st = ctx.getState(getEnergy=True, groups={ML_GROUP})
    return st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)


def test_mixed_system_runs_and_matches_library(solvated):
    topology, positions, ligand = solvated
    assert len(ligand) == 9 and topology.getNumAtoms() > 300
    system = _mixed_system(topology, ligand)
    box = np.asarray(topology.getPeriodicBoxVectors().value_in_unit(unit.nanometer))
    integ = openmm.LangevinMiddleIntegrator(300 * unit.kelvin, 1.0 / unit.picosecond,
                                            0.5 * unit.femtosecond)
    integ.setRandomNumberSeed(2)
    ctx = H.context(system, positions, "CPU", integrator=integ, box=box)
    numbers = H.numbers_of(topology)[ligand]
    e_ml0 = _ml_energy(ctx)
    e_ref0, _ = H.library_reference("ani1x", numbers, positions[ligand])
    assert e_ml0 == pytest.approx(e_ref0, rel=1e-8)

    openmm.LocalEnergyMinimizer.minimize(ctx, 10.0, 20)
    ctx.setVelocitiesToTemperature(300 * unit.kelvin, 4)
    integ.step(20)
    st = ctx.getState(getPositions=True, getEnergy=True, getForces=True)
    e_total = st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
    assert np.isfinite(e_total)
    pos = np.asarray(st.getPositions(asNumpy=True).value_in_unit(unit.nanometer))
    # The ML energy on the State equals a direct library call on the ligand's coordinates
    # (not periodic: the ligand is far smaller than the box, its images are beyond the cutoff).
    e_ml = _ml_energy(ctx)
    e_ref, f_ref = H.library_reference("ani1x", numbers, pos[ligand])
    assert e_ml == pytest.approx(e_ref, rel=1e-8)
    st_ml = ctx.getState(getForces=True, groups={ML_GROUP})
    f_ml = np.asarray(st_ml.getForces(asNumpy=True).value_in_unit(
        unit.kilojoule_per_mole / unit.nanometer))
    assert H.rel_err(f_ml[ligand], f_ref) < 1e-8
    water = [i for i in range(len(pos)) if i not in set(ligand)]
    assert np.all(f_ml[water] == 0.0)
    # Ethanol is still ethanol: its bonds within 0.85-1.7 angstrom.
    d = np.array([np.linalg.norm(pos[ligand[i]] - pos[ligand[j]]) for i, j in H.ETHANOL_BONDS])
    assert 0.085 < d.min() and d.max() < 0.17, d


def _wrapped_bond_lengths(ctx, ligand):
    st = ctx.getState(getPositions=True, enforcePeriodicBox=True)
    pos = np.asarray(st.getPositions(asNumpy=True).value_in_unit(unit.nanometer))
    return np.array([np.linalg.norm(pos[ligand[i]] - pos[ligand[j]]) * 10.0
                     for i, j in H.ETHANOL_BONDS])


def test_bond_force_keeps_molecule_whole_under_barostat(solvated):
    topology, positions, ligand = solvated
    box = np.asarray(topology.getPeriodicBoxVectors().value_in_unit(unit.nanometer))
    # Move everything so that the ethanol straddles a corner of the box.
    shifted = positions - positions[ligand].mean(axis=0)

    # Control: without the bond force OpenMM wraps each ML atom on its own: a broken molecule.
    system = _mixed_system(topology, ligand)
    ctx = H.context(system, shifted, "Reference", box=box)
    assert _wrapped_bond_lengths(ctx, ligand).max() > 5.0
    assert not any(set(ligand) <= set(m) for m in ctx.getMolecules())
    del ctx

    # With the bond force (bonds found from the distances), the ethanol is one molecule.
    system = _mixed_system(topology, ligand, add_bond_force=True, positions=shifted)
    bond_forces = [f for f in system.getForces() if isinstance(f, openmm.CustomBondForce)]
    assert len(bond_forces) == 1 and bond_forces[0].getNumBonds() == len(H.ETHANOL_BONDS)
    found = {tuple(sorted(bond_forces[0].getBondParameters(k)[:2]))
             for k in range(bond_forces[0].getNumBonds())}
    assert found == {tuple(sorted((ligand[i], ligand[j]))) for i, j in H.ETHANOL_BONDS}
    system.addForce(openmm.MonteCarloBarostat(1.0 * unit.bar, 300 * unit.kelvin, 1))
    integ = openmm.LangevinMiddleIntegrator(300 * unit.kelvin, 1.0 / unit.picosecond,
                                            0.5 * unit.femtosecond)
    integ.setRandomNumberSeed(9)
    ctx = H.context(system, shifted, "CPU", integrator=integ, box=box)
    ctx.setVelocitiesToTemperature(300 * unit.kelvin, 8)
    assert any(set(ligand) == set(m) for m in ctx.getMolecules())
    e_bonds = ctx.getState(getEnergy=True, groups={ML_GROUP}).getPotentialEnergy()
    v0 = ctx.getState().getPeriodicBoxVolume().value_in_unit(unit.nanometer ** 3)
    ref = _wrapped_bond_lengths(ctx, ligand)  # 0.96 (O-H) to 1.53 (C-C) angstrom
    assert ref.max() < 1.6
    integ.step(30)  # a barostat move every step
    v1 = ctx.getState().getPeriodicBoxVolume().value_in_unit(unit.nanometer ** 3)
    assert v1 != v0  # some volume moves were accepted
    # Whole after wrapping: every bond within 20% of its length (the C-C bond is 1.53 angstrom;
    # a molecule split by the wrap has "bonds" of 5 angstrom and more, see the control above).
    lengths = _wrapped_bond_lengths(ctx, ligand)
    assert np.all(lengths < 1.2 * ref) and lengths.max() < 1.85, lengths
    assert np.isfinite(e_bonds.value_in_unit(unit.kilojoule_per_mole))
    # The bond force adds nothing: ML group energy still equals the library's.
    st = ctx.getState(getPositions=True)
    pos = np.asarray(st.getPositions(asNumpy=True).value_in_unit(unit.nanometer))
    e_ref, _ = H.library_reference("ani1x", H.numbers_of(topology)[ligand], pos[ligand])
    assert _ml_energy(ctx) == pytest.approx(e_ref, rel=1e-8)


def test_explicit_bonds_and_find_bonds():
    top, pos = H.ethanol_topology()
    numbers = H.numbers_of(top)
    pos_nm = pos.value_in_unit(unit.nanometer)
    found = nom.find_bonds(numbers, pos)
    assert sorted(found) == sorted(tuple(sorted(b)) for b in H.ETHANOL_BONDS)
    # minimum image across a periodic boundary
    box = np.eye(3) * 1.0
    moved = pos_nm - pos_nm[0] + 0.0  # carbon 1 at the origin: neighbours on the other side
    moved = moved - np.floor(moved)  # wrap every atom into [0, 1)
    assert sorted(nom.find_bonds(numbers, moved, box_vectors=box)) == sorted(found)
    system = H.system_of(numbers)
    nom.create_force(numbers, model="ani2x", system=system, bonds=H.ETHANOL_BONDS)
    bf = [f for f in system.getForces() if isinstance(f, openmm.CustomBondForce)][0]
    assert bf.getEnergyFunction() == "0" and bf.getNumBonds() == 8
    e, _ = H.energy_forces(H.context(system, pos_nm))
    assert e == pytest.approx(H.library_reference("ani2x", numbers, pos_nm)[0], rel=1e-8)
