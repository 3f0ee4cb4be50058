"""pair_style nnpops periodic cell|ghosts|auto on one rank: the local atoms plus the periodic cell
give the same energy, forces, pressure tensor, per-atom energies and per-atom (centroid) virials
as the local atoms plus LAMMPS's ghost atoms, float64, 1e-10 relative:

- ANI-2x, 81 waters' atoms in a 9.3 A cube (the 5.1 A cutoff is more than half the box, so the
  library's cell path needs images beyond the nearest), orthogonal, triclinic, and a triclinic
  slab (boundary f p p: the pbc flags per axis);
- TensorNet tn_a (range 15 A, twice the box) on a sparse triclinic water box, so that the ghosts
  mode stays small enough for CI;
- a 2d box (z is not periodic for the library: LAMMPS makes no images along it), ANI-2x;
- a short NVE run with re-neighbouring every 4 steps (atoms may leave the box between them) in both
  modes, ANI-2x.

Which mode ran is checked from the log line the plugin writes at init and from compute pair
nnpops's last entry (the atoms the library got): the box's atoms in the cell mode, more in the
ghosts mode.  periodic auto takes the cell mode on one rank, the ghosts mode on two."""
import re

import numpy as np
import pytest

import lammps_support as ls
import nnpops_ctypes

TOL = 1e-10

# c_pn[${na}]: compute pair nnpops's entry [3+K] (K ensemble members), the atoms the library got
OUTPUT = """compute pea all pe/atom
compute ca all centroid/stress/atom NULL virial
compute pv all pressure NULL virial
compute pn all pair nnpops
thermo_style custom step pe vol c_pv[1] c_pv[2] c_pv[3] c_pv[4] c_pv[5] c_pv[6] c_pn[${na}]
thermo_modify format float %.17g norm no
run 0
write_dump all custom start.dump id x y z fx fy fz c_pea &
  c_ca[1] c_ca[2] c_ca[3] c_ca[4] c_ca[5] c_ca[6] c_ca[7] c_ca[8] c_ca[9] &
  modify sort id format float %.17g
"""

MD = """velocity all create 2000.0 4928459 dist gaussian
timestep 0.002
fix nve all nve
neighbor 1.0 bin
neigh_modify every 4 delay 0 check no
thermo 1
thermo_style custom step pe ke etotal c_pn[${na}]
run 8
write_dump all custom end.dump id x y z fx fy fz modify sort id format float %.17g
"""


def sheared(cell, pos):
    """The same fractional coordinates in a triclinic version of a cubic cell."""
    L = np.array(cell, dtype=float)
    frac = pos @ np.linalg.inv(L)
    L = L + np.array([[0, 0, 0], [0.23, 0, 0], [-0.17, 0.31, 0]]) * L[0, 0]
    return L, frac @ L


def library_atoms_entry(model):
    """compute pair nnpops's entry 3+K, K the model's ensemble members."""
    lib = nnpops_ctypes.Model(model)
    members = lib.ensemble_size
    lib.close()
    return 3 + max(members, 1)


def run_mode(tmp_path, model, symbols, pos, cell, mode, np_=1, body=OUTPUT, boundary="p p p"):
    d = tmp_path / f"{mode}_np{np_}"
    d.mkdir()
    elements = ls.write_data(d / "data.lmp", symbols, ls.wrap_positions(pos, cell), cell)
    script = f"""units metal
atom_style atomic
atom_modify map array sort 0 0.0
boundary {boundary}
read_data data.lmp
pair_style nnpops periodic {mode}
pair_coeff * * {model} {' '.join(elements)}
{body}"""
    return ls.run_lammps(d, script, np_=np_, variables={"na": library_atoms_entry(model)})


def mode_of(run):
    """The mode the plugin's log line names ("nnpops: periodic cell: ..."), one per run."""
    modes = re.findall(r"^nnpops: periodic (cell|ghosts):", run.log, re.M)
    assert len(modes) == 1, run.log
    return modes[0]


def library_atoms_column(table):
    (col,) = [k for k in table if k.startswith("c_pn[")]
    return col


def values(run):
    row = ls.last_row(run.thermo()[0])
    dump = run.read_dump("start.dump")
    return {
        "energy": row["PotEng"],
        "forces": np.stack([dump["fx"], dump["fy"], dump["fz"]], axis=1),
        "pressure": np.array([row["c_pv[%d]" % k] for k in range(1, 7)]),
        "atomic_energies": dump["c_pea"],
        "atomic_virials": np.stack([dump["c_ca[%d]" % k] for k in range(1, 10)], axis=1),
        "library_atoms": row[library_atoms_column(row)],
    }


def compare_modes(tmp_path, model, symbols, pos, cell, boundary="p p p"):
    n = len(symbols)
    cell_run = run_mode(tmp_path, model, symbols, pos, cell, "cell", boundary=boundary)
    ghost_run = run_mode(tmp_path, model, symbols, pos, cell, "ghosts", boundary=boundary)
    assert mode_of(cell_run) == "cell" and mode_of(ghost_run) == "ghosts"
    c, g = values(cell_run), values(ghost_run)
    print(f"{model}, {n} atoms: the library got {c['library_atoms']:.0f} atoms with the cell, "
          f"{g['library_atoms']:.0f} with the ghosts")
    assert c["library_atoms"] == n
    assert g["library_atoms"] > n
    assert abs(c["energy"] - g["energy"]) <= TOL * abs(g["energy"])
    for key in ("forces", "pressure", "atomic_energies", "atomic_virials"):
        err = ls.rel_err(c[key], g[key])
        print(f"  {key}: max relative difference {err:.2g}")
        assert err <= TOL, key
    assert abs(c["atomic_energies"].sum() - c["energy"]) <= 1e-12 * abs(c["energy"])
    return c


@pytest.mark.parametrize("shape", ["orthogonal", "triclinic", "slab"])
def test_ani2x_water(tmp_path, shape):
    ls.require_model("ani2x")
    symbols, pos, cell = ls.water_box(3)
    if shape != "orthogonal":
        cell, pos = sheared(cell, pos)
    boundary = "f p p" if shape == "slab" else "p p p"    # LAMMPS tilts need y, z periodic
    if shape == "slab":
        assert mode_of(run_mode(tmp_path, "ani2x", symbols, pos, cell, "auto",
                                boundary=boundary)) == "cell"
    compare_modes(tmp_path, "ani2x", symbols, pos, cell, boundary)


def test_tensornet_triclinic(tmp_path):
    """tn_a: 4 waters in a sheared 7.2 A box (a 15 A range: the ghosts mode computes ~1,500
    atoms, the cell mode 12)."""
    ls.require_model("tn_a")
    symbols, pos, cell = ls.water_box(2, seed=7, spacing=3.6)
    keep = list(range(0, 6)) + list(range(15, 21))    # 4 of the 8 waters: a sparse box
    symbols = [symbols[i] for i in keep]
    pos = pos[keep]
    cell, pos = sheared(cell, pos)
    compare_modes(tmp_path, "tn_a", symbols, pos, cell)


def test_md_and_auto(tmp_path):
    """Eight NVE steps, re-neighbouring every 4 (between them atoms may leave the box): the cell
    mode (periodic auto on one rank) follows the ghosts mode step by step."""
    ls.require_model("ani2x")
    symbols, pos, cell = ls.water_box(3)
    cell, pos = sheared(cell, pos)
    auto = run_mode(tmp_path, "ani2x", symbols, pos, cell, "auto", body=OUTPUT + MD)
    ghost = run_mode(tmp_path, "ani2x", symbols, pos, cell, "ghosts", body=OUTPUT + MD)
    assert mode_of(auto) == "cell" and mode_of(ghost) == "ghosts"
    a, g = auto.thermo()[-1], ghost.thermo()[-1]
    assert len(a["Step"]) == 9
    na = library_atoms_column(a)
    assert np.all(a[na] == len(symbols)) and np.all(g[na] > len(symbols))
    for key in ("PotEng", "TotEng"):
        err = ls.rel_err(a[key], g[key])
        print(f"MD: {key} max relative difference {err:.2g}")
        assert err <= TOL
    ea, eg = auto.read_dump("end.dump"), ghost.read_dump("end.dump")
    fa = np.stack([ea["fx"], ea["fy"], ea["fz"]], axis=1)
    fg = np.stack([eg["fx"], eg["fy"], eg["fz"]], axis=1)
    assert ls.rel_err(fa, fg) <= 1e-9


def test_2d(tmp_path):
    """dimension 2: LAMMPS makes no images along z, so the cell mode passes z as not periodic
    (pbc 1 1 0); 9 planar waters in a 9.3 A square."""
    ls.require_model("ani2x")
    rng = np.random.default_rng(5)
    r, theta = 0.9572, np.radians(104.52)
    symbols, pos = [], []
    for i in range(3):
        for j in range(3):
            phi = rng.uniform(0, 2 * np.pi)
            o = (np.array([i, j]) + 0.5) * 3.104
            symbols += ["O", "H", "H"]
            pos += [o, o + r * np.array([np.cos(phi), np.sin(phi)]),
                    o + r * np.array([np.cos(phi + theta), np.sin(phi + theta)])]
    L = 3 * 3.104
    lines = ["2d waters", "", f"{len(symbols)} atoms", "2 atom types", "",
             f"0 {L} xlo xhi", f"0 {L} ylo yhi", "-0.5 0.5 zlo zhi", "", "Masses", "",
             "1 15.999", "2 1.008", "", "Atoms # atomic", ""]
    lines += [f"{k + 1} {1 if s == 'O' else 2} {p[0]:.17g} {p[1]:.17g} 0.0"
              for k, (s, p) in enumerate(zip(symbols, pos))]
    runs = {}
    for mode in ("cell", "ghosts"):
        d = tmp_path / mode
        d.mkdir()
        (d / "data.lmp").write_text("\n".join(lines) + "\n")
        script = f"""units metal
dimension 2
atom_style atomic
atom_modify map array
boundary p p p
read_data data.lmp
pair_style nnpops periodic {mode}
pair_coeff * * ani2x O H
{OUTPUT}"""
        runs[mode] = ls.run_lammps(d, script, variables={"na": library_atoms_entry("ani2x")})
    assert "periodic cell: the library gets the local atoms and the box as its cell (pbc 1 1 0)" \
        in runs["cell"].log
    c, g = values(runs["cell"]), values(runs["ghosts"])
    assert c["library_atoms"] == len(symbols) < g["library_atoms"]
    assert abs(c["energy"] - g["energy"]) <= TOL * abs(g["energy"])
    for key in ("forces", "pressure", "atomic_energies"):
        assert ls.rel_err(c[key], g[key]) <= TOL, key


def test_auto_two_ranks(tmp_path):
    """periodic auto on two ranks takes the ghosts mode (periodic cell there: test_errors.py)."""
    ls.require_model("ani2x")
    symbols, pos, cell = ls.water_box(2)
    run = run_mode(tmp_path, "ani2x", symbols, pos, cell, "auto", np_=2)
    assert mode_of(run) == "ghosts"
