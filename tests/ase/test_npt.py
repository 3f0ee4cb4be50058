"""A short NPT run (ase.md.nptberendsen.NPTBerendsen) of a small periodic ANI-1x water box: the
volume follows the pressure, so the run at 50 kbar ends with a smaller box than the run at 1 bar
started from the same state.  This uses the calculator's stress at every step (a stale or
wrong-signed stress would break it)."""

import numpy as np
from ase import units
from ase.md.nptberendsen import NPTBerendsen

from nnpops import structures
from nnpops.ase import NNPOpsCalculator

try:
    from ase.md.velocitydistribution import thermalize_momenta
except ImportError:  # ASE < 3.29
    from ase.md.velocitydistribution import MaxwellBoltzmannDistribution

    def thermalize_momenta(atoms, temperature_K, rng=None):
        MaxwellBoltzmannDistribution(atoms, temperature_K=temperature_K, rng=rng)

STEPS = 100
WATER_COMPRESSIBILITY = 4.57e-5 / units.bar  # liquid water, 1/bar -> ASE units


def _run(pressure_bar, calc):
    atoms = structures.water_box(2, seed=1)  # 8 waters, 6.2 A cell (cutoff > half the cell)
    atoms.calc = calc
    thermalize_momenta(atoms, 300.0, rng=np.random.default_rng(5))
    v0 = atoms.get_volume()
    dyn = NPTBerendsen(atoms, timestep=0.5 * units.fs, temperature_K=300.0,
                       pressure_au=pressure_bar * units.bar, taut=20 * units.fs,
                       taup=50 * units.fs, compressibility_au=WATER_COMPRESSIBILITY)
    dyn.run(STEPS)
    assert np.all(np.isfinite(atoms.positions))
    return atoms.get_volume() / v0, atoms.get_temperature()


def test_volume_responds_to_pressure():
    calc = NNPOpsCalculator("ani1x", precision="float64")
    v_low, t_low = _run(1.0, calc)
    v_high, t_high = _run(5.0e4, calc)
    print("\nNPT water box, %d steps: V/V0 = %.4f at 1 bar, %.4f at 50 kbar (T %.0f K, %.0f K)"
          % (STEPS, v_low, v_high, t_low, t_high))
    assert v_high < v_low - 0.02
    assert v_high < 1.0
    assert 0.5 < v_low < 1.5
