"""The LJ potential through nnpops (an `lj` model file written here, Ar + Kr, shifted) equals
LAMMPS's own lj/cut with the same parameters and pair_modify shift yes: potential and total
energy at every step of 200 NVE steps to 1e-12 relative (serial), and 1e-10 on 2 ranks."""
import numpy as np
import pytest

import lammps_support as ls

# (type i, type j, epsilon eV, sigma A, cutoff A)
PAIRS = [(1, 1, 0.0104, 3.40, 8.5), (1, 2, 0.0121, 3.52, 8.75), (2, 2, 0.0140, 3.65, 9.0)]
NAMES = {1: "Ar", 2: "Kr"}
STEPS = 200

SYSTEM = """units metal
atom_style atomic
boundary p p p
lattice fcc 5.5
region box block 0 4 0 4 0 4
create_box 2 box
create_atoms 1 box
mass 1 39.948
mass 2 83.798
set type 1 type/fraction 2 0.25 29381
"""

MD = f"""velocity all create 60.0 87287 dist gaussian
timestep 0.002
fix nve all nve
thermo 1
thermo_style custom step pe ke etotal press
thermo_modify format float %.17g norm no
run {STEPS}
"""


def write_model(path):
    lines = ["format: nnpops-model", "format_version: 1", "name: lj-arkr", "type: lj",
             "units: {length: angstrom, energy: eV}", "species: [Ar, Kr]", "lj:",
             "  shift: true", "  pairs:"]
    for i, j, eps, sig, rc in PAIRS:
        lines.append(f"    - {{elements: [{NAMES[i]}, {NAMES[j]}], epsilon: {eps}, "
                     f"sigma: {sig}, cutoff: {rc}}}")
    path.write_text("\n".join(lines) + "\n")


def test_lj_equals_lj_cut(tmp_path):
    ls.require_model()
    model = tmp_path / "lj-arkr.yaml"
    write_model(model)
    ref_dir = tmp_path / "lj_cut"
    ref_dir.mkdir()
    coeffs = "\n".join(f"pair_coeff {i} {j} {eps} {sig} {rc}" for i, j, eps, sig, rc in PAIRS)
    ref = ls.run_lammps(ref_dir, SYSTEM + f"pair_style lj/cut 9.0\n{coeffs}\n"
                        "pair_modify shift yes\n" + MD)
    ref_t = ref.thermo()[-1]
    for np_ in (1, 2):
        d = tmp_path / f"nnpops{np_}"
        d.mkdir()
        run = ls.run_lammps(d, SYSTEM + f"pair_style nnpops\npair_coeff * * {model} Ar Kr\n" + MD,
                            np_=np_)
        t = run.thermo()[-1]
        assert len(t["Step"]) == STEPS + 1
        tol = 1e-12 if np_ == 1 else 1e-10
        for key in ("PotEng", "TotEng"):
            err = np.abs(t[key] - ref_t[key]).max() / np.abs(ref_t[key]).max()
            print(f"np {np_}: {key} max relative difference {err:.3g}")
            assert err <= tol, key
        err = np.abs(t["Press"] - ref_t["Press"]).max() / np.abs(ref_t["Press"]).max()
        assert err <= 1e-9, "Press"
