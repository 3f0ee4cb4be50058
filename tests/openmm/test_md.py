"""A short periodic ANI-1x water simulation through OpenMM (every run asserts numbers)."""

import numpy as np
import pytest

import openmm_helpers as H
from openmm_helpers import openmm, unit

from nnpops import openmm as nom
from nnpops import structures

N_STEPS = 50


def _water_simulation(integrator, seed=7):
    numbers, pos, cell = H.atoms_nm(structures.water_box(3, seed=seed))  # 27 waters, 0.93 nm box
    system = H.system_of(numbers, cell)
    nom.create_force(numbers, model="ani1x", periodic=True, system=system)
    ctx = H.context(system, pos, "CPU", integrator=integrator, box=cell)
    return ctx, numbers, pos, cell


def _min_image(d, cell):
    frac = d @ np.linalg.inv(cell)
    return (frac - np.round(frac)) @ cell


def test_water_box_langevin():
    """50 steps of 0.5 fs (LangevinMiddleIntegrator, 300 K) after a short minimisation: the
    potential energy stays finite and near the initial one, no atom moves more than 1 angstrom,
    molecules stay intact, and the energy of the last frame equals a direct library call on the
    State's coordinates."""
    integ = openmm.LangevinMiddleIntegrator(300 * unit.kelvin, 1.0 / unit.picosecond,
                                            0.5 * unit.femtosecond)
    integ.setRandomNumberSeed(11)
    ctx, numbers, _, cell = _water_simulation(integ)
    e_start = _potential(ctx)
    # The generated box is not relaxed (random orientations): relax it a little first, so that
    # the dynamics does not start by turning hundreds of kJ/mol of strain into heat.
    openmm.LocalEnergyMinimizer.minimize(ctx, 10.0, 15)
    e0 = _potential(ctx)
    assert e0 < e_start - 100.0  # the minimiser followed the forces downhill
    ctx.setVelocitiesToTemperature(100 * unit.kelvin, 5)
    pos0 = _positions(ctx)
    energies = []
    for _ in range(N_STEPS // 10):
        integ.step(10)
        energies.append(_potential(ctx))
    energies = np.array(energies)
    assert np.all(np.isfinite(energies))
    # 81 atoms at 100-300 K hold 100-300 kJ/mol of kinetic energy; a broken force (wrong sign,
    # units off by 10 or 96) makes the energy run away by thousands within 25 fs.
    assert np.max(np.abs(energies - e0)) < 300.0, (e0, energies)

    st = ctx.getState(getPositions=True, getEnergy=True)
    pos = np.asarray(st.getPositions(asNumpy=True).value_in_unit(unit.nanometer))
    disp = np.linalg.norm(_min_image(pos - pos0, cell), axis=1) * 10.0  # angstrom
    assert disp.max() < 1.0, disp.max()
    assert disp.max() > 0.01  # it did move
    # O-H bonds intact (minimum image), in angstrom
    oh = np.concatenate([np.linalg.norm(_min_image(pos[k::3] - pos[0::3], cell), axis=1)
                         for k in (1, 2)]) * 10.0
    assert 0.85 < oh.min() and oh.max() < 1.25, (oh.min(), oh.max())
    e_ref, _ = H.library_reference("ani1x", numbers, pos, cell)
    e_last = st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
    assert e_last == pytest.approx(e_ref, rel=1e-8)


def _potential(ctx):
    return ctx.getState(getEnergy=True).getPotentialEnergy().value_in_unit(
        unit.kilojoule_per_mole)


def _positions(ctx):
    st = ctx.getState(getPositions=True)
    return np.asarray(st.getPositions(asNumpy=True).value_in_unit(unit.nanometer))


def test_water_box_energy_conservation():
    """Velocity Verlet at 0.25 fs: the total energy drifts by far less than kT, which holds only
    if the forces are the exact gradient of the energy, in consistent units."""
    ctx, numbers, _, _ = _water_simulation(openmm.VerletIntegrator(0.25 * unit.femtosecond))
    ctx.setVelocitiesToTemperature(100 * unit.kelvin, 3)

    def total():
        st = ctx.getState(getEnergy=True)
        return (st.getPotentialEnergy() + st.getKineticEnergy()).value_in_unit(
            unit.kilojoule_per_mole)

    t0 = total()
    totals = []
    for _ in range(4):
        ctx.getIntegrator().step(10)
        totals.append(total())
    drift = np.max(np.abs(np.array(totals) - t0))
    assert np.isfinite(drift) and drift < 1.0, (t0, totals)
