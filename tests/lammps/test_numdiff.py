"""fix numdiff (central differences of the energy LAMMPS gets from pair nnpops) agrees with the
forces, for ANI-1x on <= 30 atoms: a molecule and a small periodic water box whose atoms have
their own images among the ghosts (serial: fix numdiff moves the same-rank images too)."""
import numpy as np
import pytest

import lammps_support as ls
from test_reference import prepare, reference

DELTA = 3e-5     # angstrom: truncation and round-off errors both ~1e-7 eV/A here


@pytest.mark.parametrize("name", ["water8_pbc", "13_f0"])
def test_numdiff_matches_forces(tmp_path, name):
    ls.require_model("ani1x")
    symbols, pos, cell, _ = prepare(reference("ani1x")[name])
    assert len(symbols) <= 30
    elements = ls.write_data(tmp_path / "data.lmp", symbols, pos, cell)
    script = f"""units metal
atom_style atomic
atom_modify map yes
boundary {'p p p' if cell is not None else 'f f f'}
read_data data.lmp
pair_style nnpops
pair_coeff * * ani1x {' '.join(elements)}
fix nd all numdiff 1 {DELTA}
dump d all custom 1 nd.dump id fx fy fz f_nd[1] f_nd[2] f_nd[3]
dump_modify d sort id format float %.17g
run 0
"""
    run = ls.run_lammps(tmp_path, script)
    d = run.read_dump("nd.dump")
    f = np.stack([d["fx"], d["fy"], d["fz"]], axis=1)
    fd = np.stack([d["f_nd[1]"], d["f_nd[2]"], d["f_nd[3]"]], axis=1)
    err = np.abs(f - fd).max()
    print(f"{name}: max |F - F_numdiff| = {err:.3g} eV/A, max |F| = {np.abs(f).max():.3g}")
    assert err <= 3e-6
