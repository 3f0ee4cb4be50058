"""The torchani reference set (../shared/reference/*-torchani.json) through the ASE calculator.

Tolerances (float64): |dE|/N <= 1e-7 eV, max |dF| <= 1e-6 eV/A, stress <= 1e-8 eV/A^3,
atomic energies <= 1e-7 eV, the force and atomic-energy bounds each plus a term that scales with the
force (the same rule as tests/model/test_ani.c): the reference carries differences of ~1e-8
relative that an independent float64 evaluation of the same formulas does not reproduce, visible
only on the high-force conformer 304_f0 (forces up to 116 eV/A), where |dF| reaches 1.5e-6 eV/A.
A missing reference file fails when CI == "true", else skips.
"""

import os
import sys

import numpy as np
import pytest
from ase import Atoms

from nnpops.ase import NNPOpsCalculator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from shared_data import load_reference  # noqa: E402

TOL_E_PER_ATOM = 1e-7
TOL_F = 1e-6
TOL_STRESS = 1e-8
TOL_ATOMIC = 1e-7
RTOL_F = 1e-7      # per force component, times |F| of the reference component
LTOL_ATOMIC = 5e-9  # angstrom, times |F| of the atom


def _atoms(sys_):
    cell = sys_.get("cell_A")
    pbc = sys_.get("pbc", False)
    if isinstance(pbc, list):
        pbc = [bool(p) for p in pbc]
    else:
        pbc = bool(pbc)
    return Atoms(symbols=sys_["symbols"], positions=sys_["positions_A"],
                 cell=cell if cell is not None else None, pbc=pbc if cell is not None else False)


@pytest.mark.parametrize("model,filename", [("ani2x", "ani2x-torchani.json"),
                                            ("ani1x", "ani1x-torchani.json")])
def test_reference_set(model, filename):
    ref = load_reference(filename)
    calc = NNPOpsCalculator(model, precision="float64")
    failures = []
    offsets = {}  # element -> atomic-energy differences (diagnostic for a failure)
    worst = {"energy_per_atom": 0.0, "forces": 0.0, "stress": 0.0, "atomic_energies": 0.0}
    n_stress = 0
    for name, s in ref["systems"].items():
        atoms = _atoms(s)
        atoms.calc = calc
        n = len(atoms)
        de = abs(atoms.get_potential_energy() - s["energy_eV"]) / n
        fref = np.array(s["forces_eV_per_A"])
        ferr = np.abs(atoms.get_forces() - fref)
        df = float(ferr.max())
        fnorm = np.linalg.norm(fref, axis=1)
        # error over the allowed bound, as a multiple of TOL_F (<= 1 passes)
        f_ratio = float((ferr / (TOL_F + RTOL_F * np.abs(fref))).max())
        checks = [("energy_per_atom", de, TOL_E_PER_ATOM), ("forces", df, TOL_F, f_ratio)]
        if s.get("atomic_energies_eV") is not None:
            diff = atoms.get_potential_energies() - np.array(s["atomic_energies_eV"])
            for sym, d in zip(s["symbols"], diff):
                offsets.setdefault(sym, []).append(d)
            da = float(np.abs(diff).max())
            a_ratio = float((np.abs(diff) / (TOL_ATOMIC + LTOL_ATOMIC * fnorm)).max())
            checks.append(("atomic_energies", da, TOL_ATOMIC, a_ratio))
        if s.get("stress_eV_per_A3") is not None:
            ds = float(np.abs(atoms.get_stress(voigt=False)
                              - np.array(s["stress_eV_per_A3"])).max())
            checks.append(("stress", ds, TOL_STRESS))
            n_stress += 1
        for what, err, tol, *ratio in checks:
            worst[what] = max(worst[what], err)
            ok = ratio[0] <= 1.0 if ratio else err <= tol
            if not ok:
                failures.append("%s: %s error %.3e over the bound (%.1e%s)"
                                % (name, what, err, tol, " + force term" if ratio else ""))
    print("\n%s: compared %d systems (%d with stress) against %s; worst: %s"
          % (model, len(ref["systems"]), n_stress, filename,
             ", ".join("%s %.2e" % kv for kv in worst.items())))
    assert len(ref["systems"]) > 0
    if failures:
        # A constant offset per element points at the self energies rather than the networks.
        failures.append("mean (spread) of the atomic-energy differences per element, eV: " + ", ".join(
            "%s %+.3e (%.1e)" % (el, np.mean(v), np.std(v)) for el, v in sorted(offsets.items())))
    assert not failures, "\n".join(failures)
