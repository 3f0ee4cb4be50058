#!/usr/bin/env python3
"""Optimise a bundled molecule with ANI and ASE's BFGS.

    python3 examples/ase_optimize.py [--molecule alanine|ethanol|water] [--model ani2x]
                                     [--fmax 0.01] [--precision float64] [--device cpu]
"""

import argparse
import os
import sys

import numpy as np

try:  # the installed package (pip install .); else the source tree's
    import nnpops  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "wrappers"))

from ase.optimize import BFGS  # noqa: E402

from nnpops import structures  # noqa: E402
from nnpops.ase import NNPOpsCalculator  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--molecule", default="alanine", choices=["alanine", "ethanol", "water"])
    p.add_argument("--model", default="ani2x")
    p.add_argument("--precision", default="float64", choices=["float64", "float32"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--fmax", type=float, default=0.01, help="eV/A (default 0.01)")
    p.add_argument("--steps", type=int, default=500, help="maximum BFGS steps (default 500)")
    p.add_argument("--output", help="write the optimised structure here (any ase.io format)")
    args = p.parse_args(argv)

    atoms = structures.get(args.molecule)
    atoms.calc = NNPOpsCalculator(args.model, device=args.device, precision=args.precision)
    e0 = atoms.get_potential_energy()
    f0 = np.abs(atoms.get_forces()).max()
    print("%s with %s: start energy %.6f eV, max force component %.4f eV/A"
          % (args.molecule, args.model, e0, f0))
    opt = BFGS(atoms, logfile="-")
    converged = opt.run(fmax=args.fmax, steps=args.steps)
    e1 = atoms.get_potential_energy()
    f1 = np.sqrt((atoms.get_forces() ** 2).sum(axis=1)).max()
    print("%s after %d steps: energy %.6f eV (change %.6f eV), max |F| %.5f eV/A"
          % ("converged" if converged else "NOT converged", opt.nsteps, e1, e1 - e0, f1))
    if args.output:
        atoms.write(args.output)
        print("wrote", args.output)
    return 0 if converged else 1


if __name__ == "__main__":
    sys.exit(main())
