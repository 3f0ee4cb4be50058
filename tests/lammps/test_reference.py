"""Single points: LAMMPS + pair nnpops equals the library (energy, forces, virial / pressure) for the
reference systems, periodic (the triclinic water box included) or not; and a hybrid/overlay run
with a NULL type.  Float64, relative tolerance 1e-9."""
import json
import os

import numpy as np
import pytest

import lammps_support as ls
import nnpops_ctypes

TOL = 1e-9


def reference(model):
    path = os.path.join(os.environ.get("NNPOPS_SHARED_DIR", ""), "reference",
                        f"{model}-torchani.json")
    if not os.path.isfile(path):
        ls.missing(f"{path} not found (NNPOPS_SHARED_DIR)")
    with open(path) as f:
        return json.load(f)["systems"]


def prepare(system):
    """Symbols, positions and cell in LAMMPS's frame (cell None if not periodic), rotation R."""
    symbols = system["symbols"]
    pos = np.array(system["positions_A"], dtype=float)
    if system["cell_A"] is None:
        return symbols, pos, None, np.eye(3)
    R, L = ls.lammps_frame(system["cell_A"])
    pos = ls.wrap_positions(pos @ R.T, L)
    return symbols, pos, L, R


def single_point(tmp_path, model, symbols, pos, cell, np_=1, extra="", pre=""):
    elements = ls.write_data(tmp_path / "data.lmp", symbols, pos, cell)
    boundary = "p p p" if cell is not None else "f f f"
    script = f"""units metal
atom_style atomic
atom_modify map array
boundary {boundary}
{pre}
read_data data.lmp
pair_style nnpops
pair_coeff * * {model} {' '.join(elements)}
{extra}
{ls.VIRIAL_SETUP}
run 0
write_dump all custom forces.dump id fx fy fz modify sort id format float %.17g
"""
    run = ls.run_lammps(tmp_path, script, np_=np_)
    row = ls.last_row(run.thermo()[-1])
    forces = run.read_dump("forces.dump")
    f = np.stack([forces["fx"], forces["fy"], forces["fz"]], axis=1)
    return run, row, f


CASES = [("ani2x", "water16_triclinic", 1), ("ani2x", "water16_triclinic", 2),
         ("ani2x", "water8_pbc", 1), ("ani2x", "13_f0", 1), ("ani2x", "mol_CH3Cl", 1),
         ("ani1x", "28_f0", 1)]


@pytest.mark.parametrize("model,name,np_", CASES)
def test_single_point_equals_library(tmp_path, model, name, np_):
    ls.require_model(model)
    system = reference(model)[name]
    symbols, pos, cell, R = prepare(system)
    run, row, f_lmp = single_point(tmp_path, model, symbols, pos, cell, np_=np_)

    lib = nnpops_ctypes.Model(model)
    numbers = [ls.ATOMIC_NUMBERS[s] for s in symbols]
    ref = lib.compute(numbers, pos, cell)
    e_lmp = row["PotEng"]
    w_lmp = ls.virial_from_thermo(row)
    print(f"{model} {name} np {np_}: relative differences energy "
          f"{ls.rel_err(e_lmp, ref['energy']):.2g}, forces {ls.rel_err(f_lmp, ref['forces']):.2g}, "
          f"virial {ls.rel_err(w_lmp, ref['virial']):.2g}")
    assert ls.rel_err(e_lmp, ref["energy"]) <= TOL, (e_lmp, ref["energy"])
    assert ls.rel_err(f_lmp, ref["forces"]) <= TOL
    assert ls.rel_err(w_lmp, ref["virial"]) <= TOL, (w_lmp, ref["virial"])
    if cell is not None:
        # LAMMPS's pressure (no velocities) is tr(W)/(3V) in bar
        p = np.trace(ref["virial"]) / (3 * abs(np.linalg.det(cell))) * ls.NKTV2P["metal"]
        assert ls.rel_err(row["Press"], p) <= TOL

    # and, loosely, torchani's numbers (rotated back from LAMMPS's frame)
    n = len(symbols)
    assert abs(e_lmp - system["energy_eV"]) / n < 1e-6
    assert np.abs(f_lmp @ R - np.array(system["forces_eV_per_A"])).max() < 1e-4


def test_hybrid_overlay_null_type(tmp_path):
    """Water by nnpops (types O H), argon (type 3, NULL for nnpops) by lj/cut: the nnpops part
    equals the library on the water atoms alone."""
    ls.require_model("ani2x")
    system = reference("ani2x")["water8_pbc"]
    symbols, pos, cell, _ = prepare(system)
    ar = np.array([[1.0, 1.0, 1.0], [4.9, 1.3, 6.1], [2.2, 6.6, 3.9]])
    all_symbols = symbols + ["Ar"] * len(ar)
    elements = ["O", "H", "Ar"]
    ls.write_data(tmp_path / "data.lmp", all_symbols, np.vstack([pos, ar]), cell, elements)
    script = f"""units metal
atom_style atomic
boundary p p p
read_data data.lmp
pair_style hybrid/overlay nnpops lj/cut 6.0
pair_coeff * * nnpops ani2x O H NULL
pair_coeff 1*3 3 lj/cut 0.0 3.4
pair_coeff 3 3 lj/cut 0.0104 3.4
compute pn all pair nnpops
compute pl all pair lj/cut
compute pvn all pressure NULL pair/hybrid nnpops
thermo_style custom step pe c_pn c_pl vol c_pvn[1] c_pvn[2] c_pvn[3] c_pvn[4] c_pvn[5] c_pvn[6]
thermo_modify format float %.17g norm no
run 0
write_dump all custom forces.dump id fx fy fz modify sort id format float %.17g
"""
    run = ls.run_lammps(tmp_path, script)
    row = ls.last_row(run.thermo()[-1])
    dump = run.read_dump("forces.dump")
    f = np.stack([dump["fx"], dump["fy"], dump["fz"]], axis=1)

    lib = nnpops_ctypes.Model("ani2x")
    ref = lib.compute([ls.ATOMIC_NUMBERS[s] for s in symbols], pos, cell)
    assert ls.rel_err(row["c_pn"], ref["energy"]) <= TOL
    assert abs(row["PotEng"] - row["c_pn"] - row["c_pl"]) <= 1e-9 * abs(row["PotEng"])
    assert ls.rel_err(f[: len(symbols)], ref["forces"]) <= TOL
    v = np.array([row["c_pvn[%d]" % k] for k in range(1, 7)]) * row["Volume"] / ls.NKTV2P["metal"]
    w = ref["virial"]
    assert ls.rel_err(v, [w[0, 0], w[1, 1], w[2, 2], w[0, 1], w[0, 2], w[1, 2]]) <= TOL


def test_ranks_without_local_atoms(tmp_path):
    """4 ranks along x, a molecule inside the first sub-domain: two ranks hold only ghosts, one
    nothing at all; the result still equals the library's."""
    ls.require_model("ani2x")
    system = reference("ani2x")["mol_CH3Cl"]
    symbols = system["symbols"]
    pos = np.array(system["positions_A"], dtype=float)
    pos += np.array([4.0, 15.0, 15.0]) - pos.mean(axis=0)
    cell = np.diag([40.0, 30.0, 30.0])
    run, row, f = single_point(tmp_path, "ani2x", symbols, pos, cell, np_=4,
                               pre="processors 4 1 1")
    assert "4 by 1 by 1 MPI processor grid" in run.log
    lib = nnpops_ctypes.Model("ani2x")
    ref = lib.compute([ls.ATOMIC_NUMBERS[s] for s in symbols], pos, cell)
    assert ls.rel_err(row["PotEng"], ref["energy"]) <= TOL
    assert ls.rel_err(f, ref["forces"]) <= TOL
    assert ls.rel_err(ls.virial_from_thermo(row), ref["virial"]) <= TOL
