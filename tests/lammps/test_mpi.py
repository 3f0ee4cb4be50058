"""Domain decomposition: mpirun -np 1, 2, 4 give the same energies at every step (<= 1e-10
relative) and the same forces, over a short NVE run of a 192-atom ANI-2x water box in which atoms
cross sub-domain boundaries (the run re-neighbours, hence migrates atoms, every step; planes of
oxygens start next to the boundaries).  And the pair style's threads keyword (option threads):
one rank on 2 threads gives the same bits as on one.  Rank 0 logs the device of every rank."""
import re

import numpy as np
import pytest

import lammps_support as ls

STEPS = 20


def run_md(tmp_path, np_, pair_args=""):
    d = tmp_path / (f"np{np_}" + pair_args.replace(" ", "_"))
    d.mkdir()
    symbols, pos, cell = ls.water_box(4)    # 192 atoms, 12.4 A
    # put planes of oxygens 0.01 A from the sub-domain boundaries (at multiples of L/4), so that
    # thermal motion carries atoms across them within a few femtoseconds
    pos = ls.wrap_positions(pos + (0.5 * 3.104 + 0.01), cell)
    elements = ls.write_data(d / "data.lmp", symbols, pos, cell)
    script = f"""units metal
atom_style atomic
atom_modify map array sort 0 0.0
boundary p p p
read_data data.lmp
pair_style nnpops {pair_args}
pair_coeff * * ani2x {' '.join(elements)}
neighbor 1.0 bin
neigh_modify every 1 delay 0 check no
velocity all create 400.0 4928459 dist gaussian
timestep 0.0005
fix nve all nve
thermo 1
thermo_style custom step pe ke etotal press
thermo_modify format float %.17g norm no
write_dump all custom start.dump id x y z modify sort id format float %.17g
run {STEPS}
write_dump all custom end.dump id x y z fx fy fz modify sort id format float %.17g
"""
    return ls.run_lammps(d, script, np_=np_), cell


def test_mpi_ranks_agree(tmp_path):
    ls.require_model("ani2x")
    runs = {n: run_md(tmp_path, n) for n in (1, 2, 4)}
    for n in (2, 4):
        run, cell = runs[n]
        ls.check_ranks_agree(run, runs[1][0], n, STEPS, run.read_dump("start.dump"), cell)
        # rank 0 logs every rank's device (device cpu: each one cpu)
        devices = re.findall(r"nnpops: device per rank: (.*)", run.log)
        assert devices and devices[-1].split() == ["cpu"] * n, run.log


def test_threads_same_bits(tmp_path):
    ls.require_model("ani2x")
    one, _ = run_md(tmp_path, 1)
    two, _ = run_md(tmp_path, 1, "threads 2")
    assert re.search(r"nnpops: model ani2x .*options: threads 2", two.log), two.log
    t1, t2 = one.thermo()[-1], two.thermo()[-1]
    assert len(t2["Step"]) == STEPS + 1
    for key in ("PotEng", "TotEng", "Press"):
        assert np.array_equal(t1[key], t2[key]), key
    d1, d2 = one.read_dump("end.dump"), two.read_dump("end.dump")
    for key in ("x", "y", "z", "fx", "fy", "fz"):
        assert np.array_equal(d1[key], d2[key]), key
