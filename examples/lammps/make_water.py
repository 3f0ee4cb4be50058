#!/usr/bin/env python3
"""Writes a LAMMPS data file of a periodic box of liquid water for pair_style nnpops.

Rigid waters (O-H 0.9572 A, H-O-H 104.52 deg, the TIP3P geometry) are put on a cubic lattice of
spacing 3.104 A (1.00 g/cm^3: one 18.015 g/mol molecule per 29.9 A^3), each with a random
orientation drawn from a fixed seed, so the same command always writes the same file.

    python3 make_water.py [--n 6] [--seed 2024] [--output water_648.data]

--n N gives N^3 molecules (3 N^3 atoms): 4 -> 192 atoms, 6 -> 648 atoms.  Atom types: 1 = O,
2 = H (pair_coeff * * ani2x O H).  Standard library only.
"""
import argparse
import math
import random

OH = 0.9572                   # angstrom
HOH = math.radians(104.52)
SPACING = 3.104               # angstrom
MASS = {1: 15.999, 2: 1.008}


def random_rotation(rng):
    """A uniformly random rotation matrix (from a random unit quaternion)."""
    q = [rng.gauss(0.0, 1.0) for _ in range(4)]
    norm = math.sqrt(sum(c * c for c in q))
    w, x, y, z = (c / norm for c in q)
    return [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=6, help="molecules per box edge (default 6)")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--output", default=None, help="default water_<atoms>.data")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    # molecule frame: O at the origin, the Hs in the xz plane, symmetric about z
    local = [(1, (0.0, 0.0, 0.0)),
             (2, (OH * math.sin(HOH / 2), 0.0, OH * math.cos(HOH / 2))),
             (2, (-OH * math.sin(HOH / 2), 0.0, OH * math.cos(HOH / 2)))]
    atoms = []
    n = args.n
    for i in range(n):
        for j in range(n):
            for k in range(n):
                rot = random_rotation(rng)
                center = [(i + 0.5) * SPACING, (j + 0.5) * SPACING, (k + 0.5) * SPACING]
                for t, p in local:
                    r = [sum(rot[a][b] * p[b] for b in range(3)) + center[a] for a in range(3)]
                    atoms.append((t, r))
    edge = n * SPACING
    out = args.output or f"water_{len(atoms)}.data"
    with open(out, "w") as f:
        f.write(f"Liquid water, {n ** 3} molecules, seed {args.seed} (examples/lammps/make_water.py)\n\n")
        f.write(f"{len(atoms)} atoms\n2 atom types\n\n")
        for ax in "xyz":
            f.write(f"0.0 {edge:.6f} {ax}lo {ax}hi\n")
        f.write("\nMasses\n\n")
        for t, m in MASS.items():
            f.write(f"{t} {m}\n")
        f.write("\nAtoms # atomic\n\n")
        for idx, (t, r) in enumerate(atoms, 1):
            x, y, z = (c % edge for c in r)    # wrap into the box
            f.write(f"{idx} {t} {x:.6f} {y:.6f} {z:.6f}\n")
    print(f"wrote {out}: {len(atoms)} atoms, box {edge:.3f} A")


if __name__ == "__main__":
    main()
