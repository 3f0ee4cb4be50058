"""Energy conservation: NVE of a 192-atom ANI-2x water box at 0.5 fs in float64.

The drift is the slope of a linear fit of the total energy (every 5 steps) after a short
minimization of the lattice start, velocities at 300 K and a few unmeasured steps in which
velocity Verlet's total energy settles.
  test_nve_long  (label lammps;slow): 1,000 steps (0.5 ps), drift <= 1e-4 eV/atom/ps.
  test_nve_short (label lammps): 200 steps (0.1 ps).  Over 0.1 ps the integrator's own
    fluctuations of the total energy (about +-2e-5 eV/atom at 0.5 fs) alone give fitted slopes of
    a few 1e-4 eV/atom/ps, so this check uses 1e-3 eV/atom/ps: it catches broken forces
    (missing ghosts, wrong cutoffs give drifts of 1e-2 and more), not the last digit."""
import numpy as np

import lammps_support as ls

DT_PS = 0.0005


def nve(tmp_path, steps, max_drift, warmup, minsteps):
    ls.require_model("ani2x")
    symbols, pos, cell = ls.water_box(4)    # 192 atoms
    elements = ls.write_data(tmp_path / "data.lmp", symbols, pos, cell)
    script = f"""units metal
atom_style atomic
boundary p p p
read_data data.lmp
pair_style nnpops precision float64
pair_coeff * * ani2x {' '.join(elements)}
neighbor 1.0 bin
minimize 0.0 1.0e-3 {minsteps} {10 * minsteps}
reset_timestep 0
velocity all create 300.0 90211 dist gaussian
timestep {DT_PS}
fix nve all nve
thermo 5
thermo_style custom step time pe ke etotal temp
thermo_modify format float %.17g norm no
run {warmup}
run {steps}
"""
    run = ls.run_lammps(tmp_path, script, timeout=3000)
    t = run.thermo()[-1]
    assert len(t["Step"]) == steps // 5 + 1
    n = len(symbols)
    slope = np.polyfit(t["Time"], t["TotEng"], 1)[0] / n
    spread = (t["TotEng"].max() - t["TotEng"].min()) / n
    print(f"{steps} steps: drift {slope:.3g} eV/atom/ps (limit {max_drift:g}), "
          f"spread {spread:.3g} eV/atom, mean T {t['Temp'].mean():.1f} K")
    assert abs(slope) <= max_drift


def test_nve_short(tmp_path):
    nve(tmp_path, 200, max_drift=1e-3, warmup=20, minsteps=10)


def test_nve_long(tmp_path):
    nve(tmp_path, 1000, max_drift=1e-4, warmup=40, minsteps=20)
