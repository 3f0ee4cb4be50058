"""The bundled structures (nnpops.structures): composition, bond lengths, angles, chirality and
the water box's density, spacing and determinism.  No library needed."""

import itertools

import numpy as np
import pytest

from nnpops import structures as S


def _bonds(atoms, cutoff=1.6):
    d = atoms.get_all_distances()
    return {(i, j): d[i, j] for i, j in itertools.combinations(range(len(atoms)), 2)
            if d[i, j] < cutoff}


def test_zmatrix_places_atoms():
    rows = [("C",), ("C", 0, 1.5), ("C", 1, 1.5, 0, 110.0), ("H", 2, 1.1, 1, 109.0, 0, -65.0)]
    _, x = S.zmatrix_to_cartesian(rows)
    assert np.linalg.norm(x[3] - x[2]) == pytest.approx(1.1)
    v1, v2 = x[3] - x[2], x[1] - x[2]
    ang = np.degrees(np.arccos(v1 @ v2 / np.linalg.norm(v1) / np.linalg.norm(v2)))
    assert ang == pytest.approx(109.0)
    assert S.dihedral(x[3], x[2], x[1], x[0]) == pytest.approx(-65.0)


def test_alanine():
    a = S.alanine()
    assert len(a) == 13 and a.get_chemical_formula() == "C3H7NO2"
    assert not a.pbc.any()
    bonds = _bonds(a)
    assert len(bonds) == 12  # a tree: 13 atoms, 12 bonds
    sym = a.get_chemical_symbols()
    lengths = {}
    for (i, j), d in bonds.items():
        lengths.setdefault("".join(sorted(sym[i] + sym[j])), []).append(d)
    assert np.allclose(lengths["CH"], S.R_CH) and len(lengths["CH"]) == 4
    assert np.allclose(lengths["HN"], S.R_NH) and len(lengths["HN"]) == 2
    assert np.allclose(lengths["HO"], S.R_OH)
    assert np.allclose(lengths["CN"], S.R_CN)
    assert np.allclose(sorted(lengths["CO"]), [S.R_C_DOUBLE_O, S.R_C_OH_ACID])
    assert np.allclose(lengths["CC"], S.R_CC)
    # tetrahedral alpha carbon, planar carboxyl
    for i, j in itertools.combinations([0, 2, 3, 4], 2):
        assert a.get_angle(i, 1, j) == pytest.approx(109.4712, abs=1e-3)
    assert a.get_angle(5, 2, 6) == pytest.approx(120.0)
    # L-alanine: (S) at the alpha carbon
    x = a.positions
    assert np.dot(x[0] - x[1], np.cross(x[2] - x[1], x[3] - x[1])) > 0
    # no clashes between atoms that are not bonded
    d = a.get_all_distances()
    far = [d[i, j] for i, j in itertools.combinations(range(13), 2) if (i, j) not in bonds]
    assert min(far) > 1.6


def test_water_and_ethanol():
    w = S.water()
    assert w.get_chemical_formula() == "H2O"
    assert w.get_distance(0, 1) == pytest.approx(0.9572)
    assert w.get_angle(1, 0, 2) == pytest.approx(104.52)
    e = S.ethanol()
    assert e.get_chemical_formula() == "C2H6O" and len(e) == 9
    assert len(_bonds(e)) == 8


def test_water_box():
    box = S.water_box(3, seed=0)
    assert len(box) == 81 and box.pbc.all()
    assert box.cell.lengths() == pytest.approx([9.312] * 3)
    density = 27 * 18.01528 / 6.02214076e23 / (box.get_volume() * 1e-24)
    assert density == pytest.approx(1.0, abs=0.01)
    # rigid molecules
    for m in range(27):
        o, h1, h2 = 3 * m, 3 * m + 1, 3 * m + 2
        assert box.get_distance(o, h1) == pytest.approx(0.9572)
        assert box.get_angle(h1, o, h2) == pytest.approx(104.52)
    # no intermolecular contacts closer than 1.6 A (minimum image)
    from ase.neighborlist import neighbor_list
    i, j, d = neighbor_list("ijd", box, 1.6)
    assert np.all(i // 3 == j // 3)
    # deterministic for a seed, different for another
    assert np.array_equal(S.water_box(3, seed=0).positions, box.positions)
    assert not np.allclose(S.water_box(3, seed=1).positions, box.positions)


def test_get():
    assert len(S.get("water_box", n_per_side=1)) == 3
    with pytest.raises(ValueError):
        S.get("unobtainium")
