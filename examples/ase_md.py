#!/usr/bin/env python3
"""ANI-2x on alanine with ASE: energy, forces, then a short NVE molecular dynamics run.

    python3 examples/ase_md.py [--steps 200] [--model ani2x] [--precision float64] [--device auto]
                               [--trajectory md.traj] [--log -] [--plot md_drift.png]

Needs the converted models (``nnpops convert``, or ``nnpops convert --download`` on a machine
with internet access) and the C library (installed with the package by ``pip install .``).  The
molecule is nnpops' bundled neutral L-alanine (built from standard bond lengths and angles).  The
velocities are drawn from a Maxwell-Boltzmann distribution at 300 K with a fixed seed, then
ASE's velocity Verlet runs at 0.5 fs: ASE's ``MDLogger`` writes time, energies and temperature
every tenth of the run (``--log``, ``-`` for standard output) and the frames go to an ASE
trajectory (``--trajectory``).  At the end the script prints the time per step and the drift of
the total energy (eV/atom/ps, from a least-squares line through the total energy of every step),
and plots the total energy against time (``--plot``, a PNG) when matplotlib is installed.
"""

import argparse
import os
import sys
import time

import numpy as np

try:  # the installed package (pip install .); else the source tree's
    import nnpops  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "wrappers"))

from ase import units  # noqa: E402
from ase.io.trajectory import Trajectory  # noqa: E402
from ase.md import MDLogger  # noqa: E402
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


def plot_drift(path, times_ps, totals, n_atoms, slope):
    """Total energy per atom against time, with its least-squares line, as a PNG (matplotlib)."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot written")
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.asarray(times_ps)
    e = (np.asarray(totals) - totals[0]) * 1e3 / n_atoms
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(t, e, lw=1, label="E_tot - E_tot(0)")
    ax.plot(t, slope * 1e3 / n_atoms * (t - t[0]) + (e.mean() - slope * 1e3 / n_atoms
                                                     * (t.mean() - t[0])),
            "--", lw=1, label="drift %.2e eV/atom/ps" % (slope / n_atoms))
    ax.set_xlabel("time (ps)")
    ax.set_ylabel("total energy (meV/atom)")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print("energy plot: %s" % path)
    return True


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200, help="MD steps (default 200)")
    p.add_argument("--model", default="ani2x", help="model name or YAML path (default ani2x)")
    p.add_argument("--precision", default="float64", choices=["float64", "float32"])
    p.add_argument("--device", default="auto",
                   help="auto, cpu, cuda or cuda:N (default auto: CUDA when built and present)")
    p.add_argument("--timestep", type=float, default=0.5, help="fs (default 0.5)")
    p.add_argument("--temperature", type=float, default=300.0, help="K (default 300)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--trajectory", default="md.traj", help="ASE trajectory (default md.traj)")
    p.add_argument("--log", default="-", help="MDLogger output ('-': standard output)")
    p.add_argument("--plot", default="md_drift.png",
                   help="energy-drift plot, PNG (default md_drift.png; needs matplotlib)")
    args = p.parse_args(argv)

    atoms = structures.alanine()
    atoms.calc = NNPOpsCalculator(args.model, device=args.device, precision=args.precision)
    energy = atoms.get_potential_energy()
    forces = atoms.get_forces()
    print("model %s (%s, %s), alanine, %d atoms" % (args.model, atoms.calc.model.device,
                                                   args.precision, len(atoms)))
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
        times_ps.append(dyn.nsteps * args.timestep * 1e-3)
        totals.append(atoms.get_potential_energy() + atoms.get_kinetic_energy())

    every = max(1, args.steps // 10)
    sys.stdout.flush()
    dyn.attach(record, interval=1)
    dyn.attach(MDLogger(dyn, atoms, sys.stdout if args.log == "-" else args.log, header=True,
                        stress=False, peratom=False), interval=every)
    traj = Trajectory(args.trajectory, "w", atoms)
    dyn.attach(traj.write, interval=every)
    t0 = time.perf_counter()
    dyn.run(args.steps)
    elapsed = time.perf_counter() - t0
    traj.close()
    sys.stdout.flush()
    print("trajectory: %s (%d frames)" % (args.trajectory, args.steps // every + 1))
    if args.steps > 0:
        print("time per step: %.3f ms (%d steps, %.2f s)" % (1e3 * elapsed / args.steps,
                                                             args.steps, elapsed))
    if len(times_ps) > 2:
        slope = np.polyfit(np.array(times_ps), np.array(totals), 1)[0]
        print("total energy drift: %.3e eV/atom/ps (max |Etot - Etot(0)| %.3e eV)"
              % (slope / n_atoms, float(np.max(np.abs(np.array(totals) - totals[0])))))
        if args.plot:
            plot_drift(args.plot, times_ps, totals, n_atoms, slope)
    return 0


if __name__ == "__main__":
    sys.exit(main())
