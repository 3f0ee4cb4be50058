"""Analytic forces and stress against central finite differences of the energy (ANI-1x, float64,
small systems: ase.calculators.fd).

Step sizes: ANI's cosine cutoff has a continuous first derivative but a jump in the second one at
the cutoff, so a central difference whose step straddles the cutoff for some pair is only first
order accurate; with 24 atoms and their images some pair always lies close to the cutoff, hence
the small step (3e-5 A: the error is then dominated by round-off, a few 1e-7 eV/A).
"""

import numpy as np
import pytest
from ase import Atoms
from ase.calculators.fd import calculate_numerical_forces, calculate_numerical_stress

from nnpops import structures
from nnpops.ase import NNPOpsCalculator


@pytest.fixture(scope="module")
def calc():
    return NNPOpsCalculator("ani1x", precision="float64")


def _water_box_triclinic():
    """Eight waters in a small triclinic cell (cutoff 5.2 A > half the cell width)."""
    atoms = structures.water_box(2, seed=7)
    cell = atoms.cell.array.copy()
    new = cell + np.array([[0.0, 0.0, 0.0], [0.8, 0.0, 0.0], [-0.5, 0.6, 0.0]])
    atoms.set_cell(new, scale_atoms=True)
    return atoms


def test_forces_molecule(calc):
    atoms = structures.alanine()
    atoms.rattle(0.02, seed=1)
    atoms.calc = calc
    f = atoms.get_forces()
    fd = calculate_numerical_forces(atoms, eps=3e-5)
    err = np.abs(f - fd).max()
    print("alanine: max |F - F_fd| = %.2e eV/A (max |F| %.2f)" % (err, np.abs(f).max()))
    assert err < 5e-6


def test_forces_periodic(calc):
    atoms = _water_box_triclinic()
    atoms.calc = calc
    f = atoms.get_forces()
    fd = calculate_numerical_forces(atoms, eps=3e-5, iatoms=range(0, len(atoms), 3))
    err = np.abs(f[::3] - fd).max()
    print("triclinic water box: max |F - F_fd| = %.2e eV/A" % err)
    assert err < 5e-6


@pytest.mark.parametrize("kind", ["cubic", "triclinic", "partial_pbc", "no_pbc_with_cell"])
def test_stress(calc, kind):
    if kind == "cubic":
        atoms = structures.water_box(2, seed=3)
    elif kind == "triclinic":
        atoms = _water_box_triclinic()
    elif kind == "partial_pbc":  # a slab: periodic in x and y, cell still complete
        atoms = structures.water_box(2, seed=5)
        atoms.pbc = [True, True, False]
    else:  # a molecule in a box that is not periodic: stress from the virial and the cell volume
        atoms = structures.ethanol()
        atoms.set_cell([8.0, 9.0, 10.0])
        atoms.center()
        atoms.pbc = False
    atoms.calc = calc
    s = atoms.get_stress()
    fd = calculate_numerical_stress(atoms, eps=1e-5)
    err = np.abs(s - fd).max()
    print("%s: stress %s, max |s - s_fd| = %.2e eV/A^3" % (kind, np.array2string(s, precision=5),
                                                          err))
    assert err < 1e-7
    assert np.abs(s).max() > 1e-4  # not trivially zero


def test_stress_is_symmetric_voigt(calc):
    atoms = _water_box_triclinic()
    atoms.calc = calc
    full = atoms.get_stress(voigt=False)
    assert np.allclose(full, full.T, atol=1e-14)
    v = atoms.get_stress()
    assert np.allclose(v, [full[0, 0], full[1, 1], full[2, 2], full[1, 2], full[0, 2], full[0, 1]])


def test_small_molecule_forces_water(calc):
    atoms = Atoms("OH2", positions=[[0, 0, 0.12], [0, 0.76, -0.47], [0, -0.76, -0.47]])
    atoms.calc = calc
    fd = calculate_numerical_forces(atoms, eps=3e-5)
    assert np.abs(atoms.get_forces() - fd).max() < 5e-6
