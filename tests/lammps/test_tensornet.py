"""TensorNet in LAMMPS on 1, 2 and 4 ranks, against torchmd-net 3.1.0's values
(../shared/reference/tensornet/reference.json, converted models of fixture
model.convert_tensornet).

On several ranks a rank hands the library its local atoms and every ghost out to the model's
interaction range ((layers + 1) x cutoff); the library computes the ghosts' features too (ghost
centres, pairs of two ghosts), so the local atoms' energies are exact, and the model's `mean` (a
constant per system) is added once over all ranks.  One rank hands it the box's atoms and the
periodic cell (periodic auto; test_cell.py compares that with the ghosts).  Checked:

- periodic reference systems on 1, 2 and 4 ranks: the energy (|dE|/N <= 1e-8 eV), the forces
  (|dF| <= 1e-7 eV/A + 1e-7 |F|), the stress's diagonal (1e-8 eV/A^3; its shear terms are
  torchmd-net's reading of the box, which the C test checks), the per-atom energies less the
  mean's share mean / N against the reference's per-atom terms (5e-8 eV, the bound of
  tests/model/test_tensornet_reference.py), and the sums of pe/atom, stress/atom and
  centroid/stress/atom against the energy and the virial (and compute pair nnpops of a single
  model: no spread, the energy as its one member's);
- per atom (energies and the nine virial components) equal to the library on the periodic
  system;
- a short NVE run (tn_b, 64 waters) in which atoms cross sub-domain boundaries: 2 and 4
  ranks equal 1 rank at every step (1e-10 relative), forces at the end 1e-9;
- every periodic reference system of tn_a and tn_b: water_pbc_192 (tn_a on 1 rank), water8_x2_pbc
  (tn_a, 2 ranks), water_triclinic_240 (tn_a on 4 ranks, tn_b on 2);
- precision float32 (tn_b, 2 ranks) within the float32 bounds.

Tolerances are those of the C and ASE TensorNet tests; float64 but for the float32 case.  The models are the
smaller ones (tn_a: 2 layers, 5 A, range 15 A; tn_b: 1 layer, 4.5 A, range 9 A)."""
import json
import os

import numpy as np
import pytest

import lammps_support as ls
import nnpops_ctypes
from test_reference import prepare

TN_B = "tn_b_oldlayout_so3"
STEPS = 3
# water_pbc_192 has planes of oxygens at multiples of 3.104 A (within 0.1 A), so the sub-domain
# boundaries at 0 and L/2 run through planes of atoms: thermal motion carries atoms across them
# within a few femtoseconds
SHIFT = 0.0


def tn_reference():
    path = os.path.join(os.environ.get("NNPOPS_SHARED_DIR", ""), "reference", "tensornet",
                        "reference.json")
    if not os.path.isfile(path):
        ls.missing(f"{path} not found (NNPOPS_SHARED_DIR)")
    with open(path) as f:
        return json.load(f)


PER_ATOM = """compute pea all pe/atom
compute sa all stress/atom NULL virial
compute ca all centroid/stress/atom NULL virial
compute spe all reduce sum c_pea
compute ss all reduce sum c_sa[1] c_sa[2] c_sa[3] c_sa[4] c_sa[5] c_sa[6]
compute cs all reduce sum c_ca[1] c_ca[2] c_ca[3] c_ca[4] c_ca[5] c_ca[6] c_ca[7] c_ca[8] c_ca[9]
compute pv all pressure NULL virial
compute pn all pair nnpops
thermo_style custom step pe c_spe c_pn[1] c_pn[3] vol c_pv[1] c_pv[2] c_pv[3] c_pv[4] c_pv[5] c_pv[6] &
  c_ss[1] c_ss[2] c_ss[3] c_ss[4] c_ss[5] c_ss[6] &
  c_cs[1] c_cs[2] c_cs[3] c_cs[4] c_cs[5] c_cs[6] c_cs[7] c_cs[8] c_cs[9]
thermo_modify format float %.17g norm no
run 0
write_dump all custom start.dump id x y z fx fy fz c_pea &
  c_ca[1] c_ca[2] c_ca[3] c_ca[4] c_ca[5] c_ca[6] c_ca[7] c_ca[8] c_ca[9] &
  modify sort id format float %.17g
"""

MD = f"""velocity all create 600.0 4928459 dist gaussian
timestep 0.001
fix nve all nve
thermo 1
thermo_style custom step pe ke etotal
thermo_modify format float %.17g norm no
run {STEPS}
write_dump all custom end.dump id x y z fx fy fz modify sort id format float %.17g
"""


def run_system(tmp_path, model, system, np_, shift=0.0, md=False, pair_args=""):
    symbols, pos, cell, R = prepare(system)
    assert np.allclose(R, np.eye(3)), "the reference cells are in LAMMPS's orientation"
    pos = ls.wrap_positions(pos + shift, cell)
    d = tmp_path / f"{model}_np{np_}"
    d.mkdir()
    elements = ls.write_data(d / "data.lmp", symbols, pos, cell)
    script = f"""units metal
atom_style atomic
atom_modify map array sort 0 0.0
boundary p p p
read_data data.lmp
pair_style nnpops {pair_args}
pair_coeff * * {model} {' '.join(elements)}
neighbor 0.3 bin
neigh_modify every 1 delay 0 check no
{PER_ATOM}
{MD if md else ''}"""
    run = ls.run_lammps(d, script, np_=np_)
    return run, symbols, pos, cell


def check_step0(run, model, name, ref, symbols, pos, cell, np_):
    """The run-0 values against torchmd-net's and the library's; returns the start dump."""
    r = ref["models"][model]["systems"][name]
    n = len(symbols)
    row = ls.last_row(run.thermo()[0])
    e = row["PotEng"]
    print(f"{model} {name} np {np_}: |dE|/N = {abs(e - r['energy_eV']) / n:.3g} eV")
    assert abs(e - r["energy_eV"]) / n <= 1e-8

    dump = run.read_dump("start.dump")
    f = np.stack([dump["fx"], dump["fy"], dump["fz"]], axis=1)
    fref = np.asarray(r["forces_eV_per_A"])
    df = np.abs(f - fref)
    print(f"  max |dF| = {df.max():.3g} eV/A")
    assert np.all(df <= 1e-7 + 1e-7 * np.abs(fref)), df.max()

    w = ls.virial_from_thermo(row)
    vol = row["Volume"]
    if "stress_eV_per_A3" in r:
        s = np.asarray(r["stress_eV_per_A3"])
        mine = -w / vol    # ASE's sign: (1/V) dE/d(strain)
        print(f"  max |d stress| (diagonal) = {np.abs(np.diag(mine) - np.diag(s)).max():.3g}")
        assert np.abs(np.diag(mine) - np.diag(s)).max() <= 1e-8

    # per-atom sums: energy, stress/atom and the nine centroid components against the virial
    nk = ls.NKTV2P["metal"]
    assert abs(row["c_spe"] - e) <= 1e-12 * abs(e)
    # compute pair nnpops of a single model: no spread, its energy as the one member's
    assert row["c_pn[1]"] == 0.0 and abs(row["c_pn[3]"] - e) <= 1e-12 * abs(e)
    w6 = np.array([w[0, 0], w[1, 1], w[2, 2], w[0, 1], w[0, 2], w[1, 2]])
    s6 = -np.array([row["c_ss[%d]" % k] for k in range(1, 7)]) / nk
    assert ls.rel_err(s6, w6) <= 1e-10, (s6, w6)
    w9 = np.concatenate([w6, [w[1, 0], w[2, 0], w[2, 1]]])
    c9 = -np.array([row["c_cs[%d]" % k] for k in range(1, 10)]) / nk
    assert ls.rel_err(c9, w9) <= 1e-10, (c9, w9)

    # `mean` once: per-atom energies less mean / N are the reference's per-atom terms
    atomic = np.asarray(r["atomic_energies_eV"])
    mean = r["energy_eV"] - atomic.sum()
    assert abs(mean) > 0.1    # the check below is about something
    da = np.abs(dump["c_pea"] - mean / n - atomic)
    print(f"  mean {mean:.6g} eV; max |d atomic energy| = {da.max():.3g} eV")
    assert da.max() <= 5e-8
    return dump


def check_library(dump, model, symbols, pos, cell):
    """Per atom as the library gives them for the periodic system."""
    lib = nnpops_ctypes.Model(model)
    out = lib.compute([ls.ATOMIC_NUMBERS[s] for s in symbols], pos, cell)
    lib.close()
    assert ls.rel_err(dump["c_pea"], out["atomic_energies"]) <= 1e-9
    av = out["atomic_virials"]
    ref9 = np.stack([av[:, 0, 0], av[:, 1, 1], av[:, 2, 2], av[:, 0, 1], av[:, 0, 2],
                     av[:, 1, 2], av[:, 1, 0], av[:, 2, 0], av[:, 2, 1]], axis=1)
    lmp9 = -np.stack([dump["c_ca[%d]" % k] for k in range(1, 10)], axis=1) / ls.NKTV2P["metal"]
    assert ls.rel_err(lmp9, ref9) <= 1e-9


def test_md_across_ranks(tmp_path):
    """tn_b, water_pbc_192 (12.4 A box, 9 A range: every rank's ghosts wrap the box) on 1, 2
    and 4 ranks: step 0 against the reference, then a short NVE run with atoms crossing
    sub-domain boundaries, the ranks agreeing at every step."""
    ls.require_model(TN_B)
    ref = tn_reference()
    system = ref["systems"]["water_pbc_192"]
    runs = {}
    for np_ in (1, 2, 4):
        run, symbols, pos, cell = run_system(tmp_path, TN_B, system, np_, shift=SHIFT, md=True)
        dump = check_step0(run, TN_B, "water_pbc_192", ref, symbols, pos, cell, np_)
        if np_ == 1:
            check_library(dump, TN_B, symbols, pos, cell)
        runs[np_] = (run, dump, cell)
    base_run, base_dump, _ = runs[1]
    for np_ in (2, 4):
        run, dump, cell = runs[np_]
        assert ls.rel_err(dump["c_pea"], base_dump["c_pea"]) <= 1e-9
        ls.check_ranks_agree(run, base_run, np_, STEPS, dump, cell)


@pytest.mark.parametrize("model,name,np_", [
    ("tn_a", "water_pbc_192", 1),
    ("tn_a", "water8_x2_pbc", 2),
    ("tn_a", "water_triclinic_240", 4),
    (TN_B, "water_triclinic_240", 2),
])
def test_reference_systems(tmp_path, model, name, np_):
    """The other periodic reference systems of the two models, one rank count each (single
    points; tn_a's 15 A range is longer than the 12.4 A box of water_pbc_192)."""
    ls.require_model(model)
    ref = tn_reference()
    run, symbols, pos, cell = run_system(tmp_path, model, ref["systems"][name], np_)
    dump = check_step0(run, model, name, ref, symbols, pos, cell, np_)
    if np_ == 1:
        check_library(dump, model, symbols, pos, cell)


def test_float32_two_ranks(tmp_path):
    """precision float32 on 2 ranks: the TensorNet tests' float32 bounds against torchmd-net's float64
    values, |dE|/N <= max(5e-6 eV, twice torchmd-net's own float32 deviation) and max |dF| <=
    max(5e-4 eV/A, twice its own) (the per-system constant is measured in float32 too)."""
    ls.require_model(TN_B)
    ref = tn_reference()
    name = "water_pbc_192"
    r = ref["models"][TN_B]["systems"][name]
    run, symbols, _, _ = run_system(tmp_path, TN_B, ref["systems"][name], 2,
                                    pair_args="precision float32")
    n = len(symbols)
    e = ls.last_row(run.thermo()[0])["PotEng"]
    de = abs(e - r["energy_eV"]) / n
    dump = run.read_dump("start.dump")
    f = np.stack([dump["fx"], dump["fy"], dump["fz"]], axis=1)
    df = np.abs(f - np.asarray(r["forces_eV_per_A"])).max()
    print(f"{TN_B} {name} float32 np 2: |dE|/N = {de:.3g} eV, max |dF| = {df:.3g} eV/A")
    assert de <= max(5e-6, 2 * r["torch_float32_dE_per_atom"])
    assert df <= max(5e-4, 2 * r["torch_float32_dF_max"])
    assert abs(ls.last_row(run.thermo()[0])["c_spe"] - e) <= 1e-12 * abs(e)
