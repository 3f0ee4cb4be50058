"""units real (kcal/mol) equals units metal (eV) after conversion, 1 eV = 23.060547830619
kcal/mol: energy, forces and virial to 1e-12 relative (ANI-2x water, 30 atoms, periodic); and so
do electron, si, cgs, micro and nano (energy, length, force, pressure); units lj is refused
(test_errors.py)."""
import re

import numpy as np
import pytest

import lammps_support as ls
import nnpops_ctypes
from test_reference import prepare, reference


def test_real_equals_metal(tmp_path):
    ls.require_model("ani2x")
    symbols, pos, cell, _ = prepare(reference("ani2x")["water8_pbc"])
    out = {}
    for units in ("metal", "real"):
        d = tmp_path / units
        d.mkdir()
        elements = ls.write_data(d / "data.lmp", symbols, pos, cell)
        script = f"""units {units}
atom_style atomic
boundary p p p
read_data data.lmp
pair_style nnpops
pair_coeff * * ani2x {' '.join(elements)}
{ls.VIRIAL_SETUP}
run 0
write_dump all custom forces.dump id fx fy fz modify sort id format float %.17g
"""
        run = ls.run_lammps(d, script)
        row = ls.last_row(run.thermo()[-1])
        dump = run.read_dump("forces.dump")
        out[units] = (row["PotEng"], np.stack([dump["fx"], dump["fy"], dump["fz"]], axis=1),
                      ls.virial_from_thermo(row, units))
    c = ls.EV_TO_KCAL_PER_MOL
    (em, fm, wm), (er, fr, wr) = out["metal"], out["real"]
    assert ls.rel_err(er, em * c) <= 1e-12, (er, em * c)
    assert ls.rel_err(fr, fm * c) <= 1e-12
    assert ls.rel_err(wr, wm * c) <= 1e-12


# The other unit styles against metal.  Angstrom per length unit, eV in the energy unit (CODATA
# 2018 / SI 2019: e = 1.602176634e-19 C exactly), pascal per pressure unit; electron's hartree
# and bohr as CODATA 2018 gives them (the library's hartree is torchani's 27.211386024367243 eV,
# 8e-9 relative below CODATA's: hence electron's looser bound).
EV_J = 1.602176634e-19
HARTREE_EV = 27.211386245988
BOHR_A = 0.529177210903
STYLES = {
    # style: (angstrom per length unit, eV in energy units, pascal per pressure unit, bound)
    "electron": (BOHR_A, 1.0 / HARTREE_EV, 1.0, 2e-8),
    "si": (1e10, EV_J, 1.0, 1e-12),
    "cgs": (1e8, EV_J / 1e-7, 0.1, 1e-12),
    "micro": (1e4, EV_J / 1e-15, 1e3, 1e-12),
    "nano": (10.0, EV_J / 1e-21, 1e6, 1e-12),
}
BAR_PA = 1e5


def run_units(tmp_path, units, symbols, pos, cell, angstrom):
    d = tmp_path / units
    d.mkdir()
    elements = ls.write_data(d / "data.lmp", symbols, pos / angstrom, cell / angstrom)
    script = f"""units {units}
atom_style atomic
boundary p p p
read_data data.lmp
neighbor {0.5 / angstrom!r} bin
pair_style nnpops
pair_coeff * * ani2x {' '.join(elements)}
compute pv all pressure NULL virial
thermo_style custom step pe press vol c_pv[1] c_pv[2] c_pv[3] c_pv[4] c_pv[5] c_pv[6]
thermo_modify format float %.17g norm no
run 0
write_dump all custom forces.dump id fx fy fz modify sort id format float %.17g
info communication out log
"""
    run = ls.run_lammps(d, script)
    row = ls.last_row(run.thermo()[-1])
    dump = run.read_dump("forces.dump")
    pressure = np.array([row["c_pv[%d]" % k] for k in range(1, 7)])
    return row["PotEng"], np.stack([dump["fx"], dump["fy"], dump["fz"]], axis=1), pressure, run


@pytest.mark.parametrize("units", sorted(STYLES))
def test_unit_style_equals_metal(tmp_path, units):
    """Energy, forces and the virial pressure tensor in `units` equal metal's after conversion;
    the ghost shell is the model's cutoff in the style's length unit."""
    ls.require_model("ani2x")
    angstrom, ev, pascal, bound = STYLES[units]
    symbols, pos, cell, _ = prepare(reference("ani2x")["water8_pbc"])
    em, fm, pm, _ = run_units(tmp_path, "metal", symbols, pos, cell, 1.0)
    eu, fu, pu, run = run_units(tmp_path, units, symbols, pos, cell, angstrom)
    assert ls.rel_err(eu, em * ev) <= bound, (eu, em * ev)
    assert ls.rel_err(fu, fm * ev * angstrom) <= bound
    # pressures through LAMMPS's own constants: metal's bar carries e = 1.6021765e-19 C
    # (force->nktv2p), 8e-8 relative off SI 2019's
    assert ls.rel_err(pu * pascal, pm * BAR_PA) <= 1e-6, (pu * pascal, pm * BAR_PA)
    # the ghost shell: the model's cutoff plus the 0.5 A skin, in the style's length unit
    cut = re.search(r"Communication cutoff = ([0-9.eE+-]+)", run.log)
    assert cut, ls.tail(run.log)
    expected = nnpops_ctypes.Model("ani2x").cutoff + 0.5
    assert abs(float(cut.group(1)) * angstrom - expected) <= 1e-9 * expected

