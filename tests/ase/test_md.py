"""NVE molecular dynamics through the ASE calculator conserves the total energy.

Bundled L-alanine (13 atoms), ANI-1x, float64, velocity Verlet at 0.5 fs, velocities from a
Maxwell-Boltzmann distribution at 300 K (fixed seed).  The drift of the total energy (slope of a
least-squares line through E_tot(t)) must stay within 1e-4 eV/atom/ps.

The run length is NNPOPS_MD_STEPS (default 2000 steps = 1 ps).
"""

import os
import time

import numpy as np
from ase import units
from ase.md.velocitydistribution import Stationary, ZeroRotation
from ase.md.verlet import VelocityVerlet

from nnpops import structures
from nnpops.ase import NNPOpsCalculator

try:
    from ase.md.velocitydistribution import thermalize_momenta
except ImportError:  # ASE < 3.29
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution

    def thermalize_momenta(atoms, temperature_K, rng=None):
        MaxwellBoltzmannDistribution(atoms, temperature_K=temperature_K, rng=rng)

DT_FS = 0.5
MAX_DRIFT = 1e-4  # eV/atom/ps


def run_nve(steps, seed=2024):
    atoms = structures.alanine()
    atoms.calc = NNPOpsCalculator("ani1x", precision="float64")
    thermalize_momenta(atoms, 300.0, rng=np.random.default_rng(seed))
    Stationary(atoms)
    ZeroRotation(atoms)
    dyn = VelocityVerlet(atoms, timestep=DT_FS * units.fs)
    t, etot, temp = [], [], []

    def record():
        ekin = atoms.get_kinetic_energy()
        t.append(dyn.nsteps * DT_FS * 1e-3)
        etot.append(atoms.get_potential_energy() + ekin)
        temp.append(ekin / (1.5 * units.kB * len(atoms)))

    dyn.attach(record, interval=1)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    dyn.run(steps)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    t, etot = np.array(t), np.array(etot)
    slope = np.polyfit(t, etot, 1)[0] / len(atoms)
    return {"n_atoms": len(atoms), "steps": steps, "drift": slope,
            "max_dev": float(np.abs(etot - etot[0]).max()), "mean_T": float(np.mean(temp)),
            "cpu_s": cpu, "wall_s": wall}


def test_nve_energy_conservation():
    steps = int(os.environ.get("NNPOPS_MD_STEPS", "2000"))
    r = run_nve(steps)
    print("\nNVE alanine ANI-1x: %d steps (%.3f ps), drift %.2e eV/atom/ps, max |dE_tot| %.2e eV, "
          "<T> %.0f K, %.1f s CPU, %.1f s wall (%.2f ms/step)"
          % (r["steps"], r["steps"] * DT_FS * 1e-3, r["drift"], r["max_dev"], r["mean_T"],
             r["cpu_s"], r["wall_s"], 1e3 * r["wall_s"] / r["steps"]))
    assert abs(r["drift"]) <= MAX_DRIFT
    assert r["max_dev"] < 0.05  # no jumps
    assert 50.0 < r["mean_T"] < 1000.0  # it really moved
