"""units real (kcal/mol) equals units metal (eV) after conversion, 1 eV = 23.060547830619
kcal/mol: energy, forces and virial to 1e-12 relative (ANI-2x water, 30 atoms, periodic)."""
import numpy as np

import lammps_support as ls
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
