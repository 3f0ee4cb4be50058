#!/usr/bin/env python3
"""Writes a LAMMPS data file of one ethanol molecule (CH3-CH2-OH) in a large non-periodic box.

The geometry comes from standard bond lengths and angles, built atom by atom from internal
coordinates (a Z-matrix: bond to one atom, angle with a second, dihedral with a third), staggered
conformation.  The structure is a reasonable starting point, not a minimum.

    python3 make_molecule.py [--output ethanol.data]

Atom types: 1 = H, 2 = C, 3 = O (pair_coeff * * ani2x H C O).  Standard library only.
"""
import argparse
import math

# bond lengths (angstrom) and angles (degrees)
CC, CO, OH, CH = 1.530, 1.430, 0.960, 1.090
TET = 109.47                  # tetrahedral angle at sp3 carbons
COH = 108.5                   # C-O-H angle

# Z-matrix rows: (element, bonded-to, bond, angle-with, angle, dihedral-with, dihedral)
ZMATRIX = [
    ("C", None, None, None, None, None, None),    # 0 C1 (methyl)
    ("C", 0, CC, None, None, None, None),         # 1 C2 (methylene)
    ("O", 1, CO, 0, TET, None, None),             # 2 O
    ("H", 2, OH, 1, COH, 0, 180.0),               # 3 H on O (anti)
    ("H", 0, CH, 1, TET, 2, 180.0),               # 4-6 H on C1, staggered
    ("H", 0, CH, 1, TET, 2, 60.0),
    ("H", 0, CH, 1, TET, 2, -60.0),
    ("H", 1, CH, 0, TET, 2, 120.0),               # 7-8 H on C2
    ("H", 1, CH, 0, TET, 2, -120.0),
]
TYPES = {"H": 1, "C": 2, "O": 3}
MASS = {1: 1.008, 2: 12.011, 3: 15.999}


def sub(a, b):
    return [a[i] - b[i] for i in range(3)]


def cross(a, b):
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def unit(a):
    n = math.sqrt(sum(c * c for c in a))
    return [c / n for c in a]


def place(a, b, c, bond, angle, dihedral):
    """Position of d with |d-a| = bond, angle(d,a,b) = angle, dihedral(d,a,b,c) = dihedral."""
    th, ph = math.radians(angle), math.radians(dihedral)
    bc = unit(sub(b, c))
    ab = unit(sub(a, b))
    n = unit(cross(sub(b, c), ab))
    m = cross(n, ab)
    d2 = [-bond * math.cos(th), bond * math.sin(th) * math.cos(ph), bond * math.sin(th) * math.sin(ph)]
    return [a[i] + d2[0] * ab[i] + d2[1] * m[i] + d2[2] * n[i] for i in range(3)]


def build():
    pos = []
    for k, (el, i, r, j, ang, l, dih) in enumerate(ZMATRIX):
        if k == 0:
            pos.append([0.0, 0.0, 0.0])
        elif k == 1:
            pos.append([r, 0.0, 0.0])
        elif l is None:
            # third atom: in the xy plane
            a, b = pos[i], pos[j]
            ba = unit(sub(b, a))
            th = math.radians(ang)
            perp = unit(cross([0.0, 0.0, 1.0], ba))
            pos.append([a[q] + r * (math.cos(th) * ba[q] + math.sin(th) * perp[q]) for q in range(3)])
        else:
            pos.append(place(pos[i], pos[j], pos[l], r, ang, dih))
    return [(el, p) for (el, *_), p in zip(ZMATRIX, pos)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output", default="ethanol.data")
    ap.add_argument("--box", type=float, default=30.0, help="box edge in angstrom (default 30)")
    args = ap.parse_args()
    atoms = build()
    c = [sum(p[q] for _, p in atoms) / len(atoms) for q in range(3)]
    half = args.box / 2
    with open(args.output, "w") as f:
        f.write("Ethanol from standard bond lengths and angles (examples/lammps/make_molecule.py)\n\n")
        f.write(f"{len(atoms)} atoms\n3 atom types\n\n")
        for ax in "xyz":
            f.write(f"{-half:.4f} {half:.4f} {ax}lo {ax}hi\n")
        f.write("\nMasses\n\n")
        for t, m in MASS.items():
            f.write(f"{t} {m}\n")
        f.write("\nAtoms # atomic\n\n")
        for idx, (el, p) in enumerate(atoms, 1):
            f.write(f"{idx} {TYPES[el]} {p[0] - c[0]:.6f} {p[1] - c[1]:.6f} {p[2] - c[2]:.6f}\n")
    print(f"wrote {args.output}: ethanol, {len(atoms)} atoms")


if __name__ == "__main__":
    main()
