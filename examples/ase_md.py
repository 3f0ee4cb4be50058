#!/usr/bin/env python3
"""ANI-2x on alanine with ASE: energy, forces, then a short NVE molecular dynamics run.

    python3 examples/ase_md.py [--steps 200] [--model ani2x] [--precision float64] [--device cpu]

Needs the converted models (``python3 -m nnpops convert``) and the C library (found through
NNPOPS_LIBRARY, inside the package, or on the system path).  The molecule is nnpops' bundled
neutral L-alanine (built from standard bond lengths and angles).  The velocities are drawn from a
Maxwell-Boltzmann distribution at 300 K with a fixed seed, then velocity Verlet runs at 0.5 fs.
At the end the script prints the time per step and the drift of the total energy (eV/atom/ps,
from a least-squares line through the total energy).
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "wrappers"))

from ase import units  # noqa: E402
from ase.md.velocitydistribution import Stationary, ZeroRotation  # noqa: E402
from ase.md.verlet import VelocityVerlet  # noqa: E402

from nnpops import structures  # noqa: E402
from nnpops.ase import NNPOpsCalculator  # noqa: E402

try:
    from ase.md.velocitydistribution import thermalize_momenta  # noqa: E402
except ImportError:  # ASE < 3.29
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution

    def thermalize_momenta(atoms, temperature_K, rng=None):
        MaxwellBoltzmannDistribution(atoms, temperature_K=temperature_K, rng=rng)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200, help="MD steps (default 200)")
    p.add_argument("--model", default="ani2x", help="model name or YAML path (default ani2x)")
    p.add_argument("--precision", default="float64", choices=["float64", "float32"])
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--timestep", type=float, default=0.5, help="fs (default 0.5)")
    p.add_argument("--temperature", type=float, default=300.0, help="K (default 300)")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args(argv)

    atoms = structures.alanine()
    atoms.calc = NNPOpsCalculator(args.model, device=args.device, precision=args.precision)
    energy = atoms.get_potential_energy()
    forces = atoms.get_forces()
    print("model %s (%s, %s), alanine, %d atoms" % (args.model, args.device, args.precision,
                                                   len(atoms)))
    print("energy: %.6f eV" % energy)
    print("forces (eV/A):")
    for sym, f in zip(atoms.get_chemical_symbols(), forces):
        print("  %-2s %12.6f %12.6f %12.6f" % (sym, f[0], f[1], f[2]))

    rng = np.random.default_rng(args.seed)
    thermalize_momenta(atoms, args.temperature, rng=rng)
    Stationary(atoms)
    ZeroRotation(atoms)
    dyn = VelocityVerlet(atoms, timestep=args.timestep * units.fs)

    n_atoms = len(atoms)
    times_ps, totals = [], []

    def record():
        epot = atoms.get_potential_energy()
        ekin = atoms.get_kinetic_energy()
        times_ps.append(dyn.nsteps * args.timestep * 1e-3)
        totals.append(epot + ekin)
        return epot, ekin

    record()
    every = max(1, args.steps // 10)
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        dyn.run(1)
        epot, ekin = record()
        if step % every == 0 or step == args.steps:
            elapsed = time.perf_counter() - t0
            temp = ekin / (1.5 * units.kB * n_atoms)
            print("step %5d/%d  t %7.3f ps  Epot %12.6f eV  Etot %12.6f eV  T %6.1f K  %.3f ms/step"
                  % (step, args.steps, times_ps[-1], epot, epot + ekin, temp,
                     1e3 * elapsed / step), flush=True)
    elapsed = time.perf_counter() - t0
    if args.steps > 0:
        print("time per step: %.3f ms (%d steps, %.2f s)" % (1e3 * elapsed / args.steps,
                                                             args.steps, elapsed))
    if len(times_ps) > 2:
        slope = np.polyfit(np.array(times_ps), np.array(totals), 1)[0]
        print("total energy drift: %.3e eV/atom/ps (max |Etot - Etot(0)| %.3e eV)"
              % (slope / n_atoms, float(np.max(np.abs(np.array(totals) - totals[0])))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
