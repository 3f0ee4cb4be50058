"""Per-atom terms: the sum of compute pe/atom equals the energy and the sums of compute stress/atom
and compute centroid/stress/atom (virial part) equal the virial, in serial and on 2 ranks (ghost
terms reverse-communicated); per atom they equal the library's atomic energies and virials of the
periodic system, the centroid one with all nine components (xx yy zz xy xz yz yx zx zy; first
index position, second force)."""
import numpy as np
import pytest

import lammps_support as ls
import nnpops_ctypes
from test_reference import prepare, reference


@pytest.mark.parametrize("name,np_", [("water8_pbc", 1), ("water16_triclinic", 2)])
def test_per_atom_sums(tmp_path, name, np_):
    ls.require_model("ani2x")
    symbols, pos, cell, _ = prepare(reference("ani2x")[name])
    elements = ls.write_data(tmp_path / "data.lmp", symbols, pos, cell)
    script = f"""units metal
atom_style atomic
boundary p p p
read_data data.lmp
pair_style nnpops
pair_coeff * * ani2x {' '.join(elements)}
compute pea all pe/atom
compute sa all stress/atom NULL virial
compute spe all reduce sum c_pea
compute ss all reduce sum c_sa[1] c_sa[2] c_sa[3] c_sa[4] c_sa[5] c_sa[6]
compute ca all centroid/stress/atom NULL virial
compute cs all reduce sum c_ca[1] c_ca[2] c_ca[3] c_ca[4] c_ca[5] c_ca[6] c_ca[7] c_ca[8] c_ca[9]
compute pv all pressure NULL virial
thermo_style custom step pe c_spe vol c_pv[1] c_pv[2] c_pv[3] c_pv[4] c_pv[5] c_pv[6] &
  c_ss[1] c_ss[2] c_ss[3] c_ss[4] c_ss[5] c_ss[6] &
  c_cs[1] c_cs[2] c_cs[3] c_cs[4] c_cs[5] c_cs[6] c_cs[7] c_cs[8] c_cs[9]
thermo_modify format float %.17g norm no
run 0
write_dump all custom peratom.dump id c_pea c_sa[1] c_sa[2] c_sa[3] c_sa[4] c_sa[5] c_sa[6] &
  c_ca[1] c_ca[2] c_ca[3] c_ca[4] c_ca[5] c_ca[6] c_ca[7] c_ca[8] c_ca[9] &
  modify sort id format float %.17g
"""
    run = ls.run_lammps(tmp_path, script, np_=np_)
    row = ls.last_row(run.thermo()[-1])
    nk = ls.NKTV2P["metal"]
    assert ls.rel_err(row["c_spe"], row["PotEng"]) <= 1e-12
    w = ls.virial_from_thermo(row)
    w6 = np.array([w[0, 0], w[1, 1], w[2, 2], w[0, 1], w[0, 2], w[1, 2]])
    # stress/atom is -(per-atom virial) in pressure*volume units
    s6 = -np.array([row["c_ss[%d]" % k] for k in range(1, 7)]) / nk
    assert ls.rel_err(s6, w6) <= 1e-10, (s6, w6)
    # the centroid sums: the same six, and yx zx zy equal xy xz yz (the virial is symmetric)
    c9 = -np.array([row["c_cs[%d]" % k] for k in range(1, 10)]) / nk
    w9 = np.array([w[0, 0], w[1, 1], w[2, 2], w[0, 1], w[0, 2], w[1, 2], w[1, 0], w[2, 0],
                   w[2, 1]])
    assert ls.rel_err(c9, w9) <= 1e-10, (c9, w9)

    lib = nnpops_ctypes.Model("ani2x")
    ref = lib.compute([ls.ATOMIC_NUMBERS[s] for s in symbols], pos, cell)
    d = run.read_dump("peratom.dump")
    assert ls.rel_err(d["c_pea"], ref["atomic_energies"]) <= 1e-9
    av = ref["atomic_virials"]
    ref6 = np.stack([av[:, 0, 0], av[:, 1, 1], av[:, 2, 2], av[:, 0, 1], av[:, 0, 2],
                     av[:, 1, 2]], axis=1)
    lmp6 = -np.stack([d["c_sa[%d]" % k] for k in range(1, 7)], axis=1) / nk
    assert ls.rel_err(lmp6, ref6) <= 1e-9
    ref9 = np.stack([av[:, 0, 0], av[:, 1, 1], av[:, 2, 2], av[:, 0, 1], av[:, 0, 2],
                     av[:, 1, 2], av[:, 1, 0], av[:, 2, 0], av[:, 2, 1]], axis=1)
    lmp9 = -np.stack([d["c_ca[%d]" % k] for k in range(1, 10)], axis=1) / nk
    assert ls.rel_err(lmp9, ref9) <= 1e-9
    # per atom the virial is not symmetric: the centroid form keeps what stress/atom cannot
    assert np.abs(ref9[:, 3:6] - ref9[:, 6:9]).max() > 1e-6 * np.abs(ref9).max()
