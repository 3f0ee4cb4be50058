"""TensorNet models in OpenMM: ``create_force(..., charge=)`` and openmm-ml's
``nnpops-tensornet`` potential against torchmd-net 3.1.0's values
(../shared/reference/tensornet/reference.json), and the ensemble tn_a_ens against its members.

The models are the converted ones (fixture model.convert_tensornet writes them into
NNPOPS_MODEL_PATH).  Bounds as tests/model/test_tensornet.c (float64): |dE|/N <= 1e-8 eV,
|dF| <= 1e-7 eV/A + 1e-7 |F| per component.  A missing reference file fails when CI == "true",
else skips.
"""

import os
import sys

import numpy as np
import pytest

import openmm_helpers as H
from openmm_helpers import app, openmm, unit

from nnpops import openmm as nom
from nnpops import openmmml as nml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from shared_data import tensornet_reference  # noqa: E402

EV = H.EV_IN_KJ_PER_MOL
EV_A = H.EV_PER_A_IN_KJ_PER_MOL_NM


def _system(ref, name):
    """(atomic numbers, positions nm, box nm or None) of a reference system."""
    s = ref["systems"][name]
    numbers = [app.Element.getBySymbol(x).atomic_number for x in s["symbols"]]
    pos = np.array(s["positions_A"], dtype=np.float64).reshape(-1, 3) / 10.0
    cell = s.get("cell_A")
    box = None if cell is None else np.array(cell, dtype=np.float64).reshape(3, 3) / 10.0
    return numbers, pos, box


def _evaluate(numbers, pos, box, **kw):
    """(energy kJ/mol, forces kJ/mol/nm) of a System holding only the nnpops force."""
    system = H.system_of(numbers, box_nm=box)
    nom.create_force(numbers, system=system, periodic=box is not None, **kw)
    return H.energy_forces(H.context(system, pos, box=box))


def _check(e, f, n, e_ref_ev, f_ref_ev):
    assert abs(e / EV - e_ref_ev) / n <= 1e-8, (e / EV, e_ref_ev)
    fref = np.asarray(f_ref_ev, dtype=np.float64).reshape(-1, 3)
    d = np.abs(f / EV_A - fref)
    assert np.all(d <= 1e-7 + 1e-7 * np.abs(fref)), d.max()


@pytest.mark.parametrize("model", ["tn_a", "tn_b_oldlayout_so3"])
def test_force_matches_reference(model):
    ref = tensornet_reference()
    mref = ref["models"][model]["systems"]
    for name in ("mol_mol_CH3SH", "mol_13_f0", "water_triclinic_240"):
        numbers, pos, box = _system(ref, name)
        e, f = _evaluate(numbers, pos, box, model=model)
        _check(e, f, len(numbers), mref[name]["energy_eV"], mref[name]["forces_eV_per_A"])


def test_charge():
    """Each member of the reference batch (charges 0, 1, -1) with create_force(charge=q); the
    charge reaches the model (a charged molecule's energy differs from the neutral one's)."""
    ref = tensornet_reference()
    batch = ref["models"]["tn_a"]["systems"]["batch_q0_q1_qm1"]
    for name, q, e_ref in zip(batch["members"], batch["charges"], batch["energies_eV"]):
        numbers, pos, box = _system(ref, name)
        e, _ = _evaluate(numbers, pos, box, model="tn_a", charge=q)
        assert abs(e / EV - e_ref) / len(numbers) <= 1e-8, (name, q, e / EV, e_ref)
        if q:
            e0, _ = _evaluate(numbers, pos, box, model="tn_a")
            assert abs(e0 - e) > 1e-6


def test_ensemble():
    """tn_a_ens (tn_a and tn_a_member2): the force is the members' mean; ensemble_member=k is
    member k."""
    ref = tensornet_reference()
    members = ref["ensembles"]["tn_a+tn_a_member2"]["members"]
    for name in ("mol_13_f0", "water_pbc_192"):
        numbers, pos, box = _system(ref, name)
        r = [ref["models"][m]["systems"][name] for m in members]
        e, f = _evaluate(numbers, pos, box, model="tn_a_ens")
        _check(e, f, len(numbers), 0.5 * (r[0]["energy_eV"] + r[1]["energy_eV"]),
               0.5 * (np.asarray(r[0]["forces_eV_per_A"]) + np.asarray(r[1]["forces_eV_per_A"])))
        for k in range(2):
            e, f = _evaluate(numbers, pos, box, model="tn_a_ens", ensemble_member=k)
            _check(e, f, len(numbers), r[k]["energy_eV"], r[k]["forces_eV_per_A"])


def _topology(numbers, box=None):
    top = app.Topology()
    chain = top.addChain()
    res = top.addResidue("MOL", chain)
    for i, z in enumerate(numbers):
        el = app.Element.getByAtomicNumber(int(z))
        top.addAtom("%s%d" % (el.symbol, i), el, res)
    if box is not None:
        top.setPeriodicBoxVectors([openmm.Vec3(*row) for row in box] * unit.nanometer)
    return top


def test_openmmml_model_file():
    """openmm-ml: MLPotential("nnpops-tensornet", modelPath=...) with createSystem(charge=), as
    openmm-ml's own torchmdnet potential takes them; periodic from the Topology's box."""
    mlp = pytest.importorskip("openmmml.mlpotential")
    nml.register()
    assert "nnpops-tensornet" in nml.ENTRY_POINTS
    ref = tensornet_reference()
    path = H.model("tn_a").path
    potential = mlp.MLPotential("nnpops-tensornet", modelPath=path)
    batch = ref["models"]["tn_a"]["systems"]["batch_q0_q1_qm1"]
    name, q, e_ref = batch["members"][1], batch["charges"][1], batch["energies_eV"][1]
    numbers, pos, _ = _system(ref, name)
    system = potential.createSystem(_topology(numbers), charge=q)
    e, _ = H.energy_forces(H.context(system, pos))
    assert abs(e / EV - e_ref) / len(numbers) <= 1e-8
    name = "water_triclinic_240"
    numbers, pos, box = _system(ref, name)
    system = potential.createSystem(_topology(numbers, box))
    py = [f for f in system.getForces() if isinstance(f, openmm.PythonForce)]
    assert len(py) == 1 and py[0].usesPeriodicBoundaryConditions()
    e, f = H.energy_forces(H.context(system, pos, box=box))
    r = ref["models"]["tn_a"]["systems"][name]
    _check(e, f, len(numbers), r["energy_eV"], r["forces_eV_per_A"])
    # one member of an ensemble file, the way openmm-ml's ANI potential takes it
    numbers, pos, _ = _system(ref, "mol_13_f0")
    system = mlp.MLPotential("nnpops-tensornet", modelPath="tn_a_ens").createSystem(
        _topology(numbers), modelIndex=1)
    e, _ = H.energy_forces(H.context(system, pos))
    r = ref["models"]["tn_a_member2"]["systems"]["mol_13_f0"]
    assert abs(e / EV - r["energy_eV"]) / len(numbers) <= 1e-8
    with pytest.raises(ValueError, match="pass modelPath="):
        mlp.MLPotential("nnpops-tensornet")
