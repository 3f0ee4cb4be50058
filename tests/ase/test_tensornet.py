"""TensorNet models from Python: ``Context.compute(..., charges=)``, the ASE calculator,
``nnpops eval`` and ``nnpops info`` against torchmd-net 3.1.0's values
(../shared/reference/tensornet/reference.json), and the ensemble tn_a_ens (tn_a and
tn_a_member2) against its members' values.

The models are the converted ones (fixture model.convert_tensornet writes them into
NNPOPS_MODEL_PATH).  Tolerances (float64) as tests/model/test_tensornet.c argues them:
|dE|/N <= 1e-8 eV, |dF| <= 1e-7 eV/A + 1e-7 |F| per component, the stress's diagonal 1e-8
eV/A^3 (its shear terms are torchmd-net's reading of the box: the C test checks them).  Models
without a ZBL prior only (with one, torchmd-net's float32 screening length needs an allowance
that the C test computes).  A missing reference file fails when CI == "true", else skips.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from ase import Atoms

import nnpops
from nnpops.ase import NNPOpsCalculator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from shared_data import tensornet_reference  # noqa: E402


def _atoms(ref, name, charge=None):
    s = ref["systems"][name]
    atoms = Atoms(symbols=s["symbols"], positions=np.array(s["positions_A"]))
    cell = s.get("cell_A")
    if cell is not None:
        atoms.cell = np.array(cell).reshape(3, 3)
        atoms.pbc = True
    if charge is not None:
        atoms.info["charge"] = charge
    return atoms


def _check_forces(f, fref):
    fref = np.asarray(fref).reshape(-1, 3)
    assert np.all(np.abs(f - fref) <= 1e-7 + 1e-7 * np.abs(fref)), np.abs(f - fref).max()


@pytest.mark.parametrize("model", ["tn_a", "tn_b_oldlayout_so3"])
def test_calculator(model):
    ref = tensornet_reference()
    mref = ref["models"][model]["systems"]
    calc = NNPOpsCalculator(model)
    for name in ("mol_mol_CH3SH", "water_triclinic_240"):
        atoms = _atoms(ref, name)
        atoms.calc = calc
        r = mref[name]
        n = len(atoms)
        assert abs(atoms.get_potential_energy() - r["energy_eV"]) / n <= 1e-8
        _check_forces(atoms.get_forces(), r["forces_eV_per_A"])
        # the per-atom energies add up to the energy (the model's mean shared over the atoms)
        assert abs(atoms.get_potential_energies().sum() - r["energy_eV"]) <= 1e-8 * n
        if atoms.pbc.all():
            s = np.asarray(r["stress_eV_per_A3"]).reshape(3, 3)
            mine = atoms.get_stress(voigt=False)
            assert np.abs(np.diag(mine) - np.diag(s)).max() <= 1e-8
    # a charged batch member through atoms.info["charge"], and through the keyword
    batch = mref["batch_q0_q1_qm1"]
    for name, q, e in zip(batch["members"], batch["charges"], batch["energies_eV"]):
        atoms = _atoms(ref, name, charge=q)
        atoms.calc = calc
        assert abs(atoms.get_potential_energy() - e) / len(atoms) <= 1e-8
        atoms2 = _atoms(ref, name)
        atoms2.calc = NNPOpsCalculator(model, charge=q)
        assert atoms2.get_potential_energy() == atoms.get_potential_energy()
        # the Atoms' own charge wins over the keyword (torchmd-net's calculator reads info too)
        atoms3 = _atoms(ref, name, charge=q)
        atoms3.calc = NNPOpsCalculator(model, charge=q + 3)
        assert atoms3.get_potential_energy() == atoms.get_potential_energy()


def test_compute_batch_charges():
    """Context.compute on the reference batch (three systems, charges 0, 1, -1) in one call."""
    ref = tensornet_reference()
    r = ref["models"]["tn_a"]["systems"]["batch_q0_q1_qm1"]
    zs, xs, batch = [], [], []
    for k, name in enumerate(r["members"]):
        a = _atoms(ref, name)
        zs.append(a.numbers)
        xs.append(a.positions)
        batch.append(np.full(len(a), k))
    ctx = nnpops.Context("tn_a")
    out = ctx.compute(np.concatenate(zs), np.concatenate(xs), batch=np.concatenate(batch),
                      charges=r["charges"], forces=True)
    n = np.array([len(z) for z in zs])
    assert np.all(np.abs(out["energies"] - np.array(r["energies_eV"])) / n <= 1e-8)
    _check_forces(out["forces"], r["forces_eV_per_A"])
    neutral = ctx.compute(np.concatenate(zs), np.concatenate(xs), batch=np.concatenate(batch))
    assert abs(neutral["energies"][1] - out["energies"][1]) > 1e-6  # the charge matters


def test_info():
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "nnpops", "info", "tn_c_gauss_lower_zbl"],
                       capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    for line in ("type: tensornet", "uses charge: yes", "interaction range: 24 A",
                 "  embedding_dimension: 32", "  num_layers: 3", "  rbf_type: gauss",
                 "  activation: tanh", "  cutoff_lower: 0.5", "  cutoff_upper: 6.0",
                 "  priors: Atomref, ZBL"):
        assert line in text, (line, text)


def _run_cli(*args):
    r = subprocess.run([sys.executable, "-m", "nnpops"] + list(args), capture_output=True,
                       text=True, env=dict(os.environ), check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_cli_eval_charge(tmp_path):
    """nnpops eval: a frame's own charge= key, else --charge; against the reference batch."""
    import ase.io

    ref = tensornet_reference()
    batch = ref["models"]["tn_a"]["systems"]["batch_q0_q1_qm1"]
    frames = []
    for name, q in zip(batch["members"], batch["charges"]):
        frames.append(_atoms(ref, name, charge=q if q < 0 else None))
    path = str(tmp_path / "batch.traj")  # positions and info as they are (extxyz rounds)
    ase.io.write(path, frames)
    # frame 0 (q 0) and frame 1 (q 1) take --charge; frame 2 carries charge=-1
    doc = json.loads(_run_cli("eval", path, "--model", "tn_a", "--charge", "1", "--json", "-",
                              "--quiet"))
    e = [f["energy_eV"] for f in doc["frames"]]
    n = [len(a) for a in frames]
    assert abs(e[1] - batch["energies_eV"][1]) / n[1] <= 1e-8
    assert abs(e[2] - batch["energies_eV"][2]) / n[2] <= 1e-8
    assert abs(e[0] - batch["energies_eV"][0]) / n[0] > 1e-6  # charge 1, not the reference's 0
    for a, q in zip(frames, batch["charges"]):  # every frame with its own charge
        a.info["charge"] = q
    path = str(tmp_path / "charged.traj")
    ase.io.write(path, frames)
    doc = json.loads(_run_cli("eval", path, "--model", "tn_a", "--charge", "5", "--json", "-",
                              "--quiet"))
    for k in range(3):
        assert abs(doc["frames"][k]["energy_eV"] - batch["energies_eV"][k]) / n[k] <= 1e-8
        _check_forces(np.asarray(doc["frames"][k]["forces_eV_per_A"]),
                      np.asarray(batch["forces_eV_per_A"]).reshape(-1, 3)[sum(n[:k]):sum(n[:k + 1])])
    assert doc["ensemble_size"] == 1 and "energy_std_eV" not in doc["frames"][0]


def _members(ref, name):
    names = ref["ensembles"]["tn_a+tn_a_member2"]["members"]
    return [ref["models"][m]["systems"][name] for m in names]


def test_ensemble_calculator():
    """ASE: energy and forces the members' mean, member_energies each member's value, the spread
    energy_std = sample standard deviation (ddof=1) as for ANI ensembles; ensemble_member=k."""
    ref = tensornet_reference()
    calc = NNPOpsCalculator("tn_a_ens")
    assert calc.model.ensemble_size == 2
    for name in ("mol_13_f0", "water_triclinic_240"):
        r = _members(ref, name)
        atoms = _atoms(ref, name)
        atoms.calc = calc
        n = len(atoms)
        e_m = [x["energy_eV"] for x in r]
        assert abs(atoms.get_potential_energy() - np.mean(e_m)) / n <= 1e-8
        _check_forces(atoms.get_forces(), 0.5 * (np.asarray(r[0]["forces_eV_per_A"])
                                                 + np.asarray(r[1]["forces_eV_per_A"])))
        members = calc.results["member_energies"]
        assert np.all(np.abs(members - np.array(e_m)) / n <= 1e-8)
        assert calc.get_energy_std(atoms) == pytest.approx(np.std(members, ddof=1), rel=1e-12)
        assert abs(calc.results["energy_std"] - abs(e_m[0] - e_m[1]) / np.sqrt(2)) <= 1e-8 * n
        assert abs(atoms.get_potential_energies().sum() - np.mean(e_m)) <= 1e-8 * n
        if atoms.pbc.all():
            atoms.get_stress()
        for k in range(2):
            a2 = _atoms(ref, name)
            a2.calc = NNPOpsCalculator("tn_a_ens", ensemble_member=k)
            assert abs(a2.get_potential_energy() - e_m[k]) / n <= 1e-8
            _check_forces(a2.get_forces(), r[k]["forces_eV_per_A"])


def test_ensemble_cli(tmp_path):
    """nnpops eval of an ensemble: member energies and the spread per frame; --member K; nnpops
    info shows the ensemble."""
    import ase.io

    ref = tensornet_reference()
    names = ("mol_13_f0", "mol_98_f0")
    frames = [_atoms(ref, x) for x in names]
    path = str(tmp_path / "two.traj")
    ase.io.write(path, frames)
    doc = json.loads(_run_cli("eval", path, "--model", "tn_a_ens", "--json", "-", "--quiet"))
    assert doc["ensemble_size"] == 2
    for name, a, f in zip(names, frames, doc["frames"]):
        e_m = [x["energy_eV"] for x in _members(ref, name)]
        n = len(a)
        assert abs(f["energy_eV"] - np.mean(e_m)) / n <= 1e-8
        assert np.all(np.abs(np.array(f["member_energies_eV"]) - e_m) / n <= 1e-8)
        assert abs(f["energy_std_eV"] - np.std(f["member_energies_eV"], ddof=1)) <= 1e-12
    out = str(tmp_path / "out.xyz")
    _run_cli("eval", path, "--model", "tn_a_ens", "--xyz", out, "--quiet")
    back = ase.io.read(out, index=":")
    assert back[1].info["energy_std"] == pytest.approx(doc["frames"][1]["energy_std_eV"],
                                                       rel=1e-8)
    doc1 = json.loads(_run_cli("eval", path, "--model", "tn_a_ens", "--member", "1", "--json",
                               "-", "--quiet"))
    for name, a, f in zip(names, frames, doc1["frames"]):
        r = _members(ref, name)[1]
        assert abs(f["energy_eV"] - r["energy_eV"]) / len(a) <= 1e-8
        assert "member_energies_eV" not in f
    lines = _run_cli("eval", path, "--model", "tn_a_ens")
    assert lines.count(", spread ") == 2
    text = _run_cli("info", "tn_a_ens")
    assert "ensemble size: 2" in text and "  ensemble_size: 2" in text
    assert "  mean: [" in text
