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
    run = ls.run_lammps(d, script, np_=np_)
    grid = None
    m = re.search(r"(\d+) by (\d+) by (\d+) MPI processor grid", run.log)
    if m:
        grid = tuple(int(g) for g in m.groups())
    return run, grid, cell


def subdomain(positions, cell, grid):
    """Index of the sub-domain of each (wrapped) position on a regular processor grid."""
    frac = positions / np.diag(cell)
    frac -= np.floor(frac)
    idx = np.floor(frac * np.array(grid)).astype(int)
    return idx[:, 0] * grid[1] * grid[2] + idx[:, 1] * grid[2] + idx[:, 2]


def test_mpi_ranks_agree(tmp_path):
    ls.require_model("ani2x")
    runs = {n: run_md(tmp_path, n) for n in (1, 2, 4)}
    base = runs[1][0].thermo()[-1]
    f1 = runs[1][0].read_dump("end.dump")
    for n in (2, 4):
        run, grid, cell = runs[n]
        table = run.thermo()[-1]
        assert len(table["Step"]) == STEPS + 1
        for key in ("PotEng", "TotEng"):
            err = np.abs(table[key] - base[key]).max() / np.abs(base[key]).max()
            print(f"np {n}: {key} max relative difference to np 1 over {STEPS} steps: {err:.2g}")
            assert err <= 1e-10, f"np {n}: {key} differs by {err:.3g} relative"
        dump = run.read_dump("end.dump")
        fn = np.stack([dump["fx"], dump["fy"], dump["fz"]], axis=1)
        fr = np.stack([f1["fx"], f1["fy"], f1["fz"]], axis=1)
        assert ls.rel_err(fn, fr) <= 1e-9
        # atoms did cross sub-domain boundaries during the run
        assert grid is not None and np.prod(grid) == n, run.log
        # rank 0 logs every rank's device (device cpu: each one cpu)
        devices = re.findall(r"nnpops: device per rank: (.*)", run.log)
        assert devices and devices[-1].split() == ["cpu"] * n, run.log
        start = run.read_dump("start.dump")
        p0 = np.stack([start["x"], start["y"], start["z"]], axis=1)
        p1 = np.stack([dump["x"], dump["y"], dump["z"]], axis=1)
        crossed = int(np.sum(subdomain(p0, cell, grid) != subdomain(p1, cell, grid)))
        assert crossed > 0, f"np {n}: no atom changed sub-domain in {STEPS} steps"
        print(f"np {n}: grid {grid}, {crossed} atoms changed sub-domain")


def test_threads_same_bits(tmp_path):
    ls.require_model("ani2x")
    one, _, _ = run_md(tmp_path, 1)
    two, _, _ = run_md(tmp_path, 1, "threads 2")
    assert re.search(r"nnpops: model ani2x .*options: threads 2", two.log), two.log
    t1, t2 = one.thermo()[-1], two.thermo()[-1]
    assert len(t2["Step"]) == STEPS + 1
    for key in ("PotEng", "TotEng", "Press"):
        assert np.array_equal(t1[key], t2[key]), key
    d1, d2 = one.read_dump("end.dump"), two.read_dump("end.dump")
    for key in ("x", "y", "z", "fx", "fy", "fz"):
        assert np.array_equal(d1[key], d2[key]), key
