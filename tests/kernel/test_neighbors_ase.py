"""nnpops_neighbor_pairs (through a small ctypes binding) against ASE's neighbor_list.

ASE returns a full list (each pair twice, as (i, j, S) and (j, i, -S)); it is reduced to the half
list that nnpops documents: S == 0 -> i < j, otherwise S lexicographically positive.  The lists must
be equal as sets of (i, j, S), and nnpops's distances must equal |x_j - x_i + S . cell| (computed
here from the original positions) and ASE's distances.

The library comes from $NNPOPS_LIBRARY (set by CTest); without it the tests are skipped.
"""
import ctypes
import os

import pytest

np = pytest.importorskip("numpy")
ase = pytest.importorskip("ase")
from ase.neighborlist import neighbor_list  # noqa: E402

NNPOPS_OK = 0
NNPOPS_ERROR_NEIGHBOR_OVERFLOW = 12


def _library():
    path = os.environ.get("NNPOPS_LIBRARY")
    if not path or not os.path.exists(path):
        pytest.skip("NNPOPS_LIBRARY does not name the built libnnpops")
    lib = ctypes.CDLL(path)
    f = lib.nnpops_neighbor_pairs
    f.restype = ctypes.c_int
    f.argtypes = [
        ctypes.c_int64,                    # n_atoms
        ctypes.POINTER(ctypes.c_double),   # positions
        ctypes.POINTER(ctypes.c_double),   # cell
        ctypes.POINTER(ctypes.c_uint8),    # pbc
        ctypes.c_double,                   # cutoff
        ctypes.c_int64,                    # capacity
        ctypes.POINTER(ctypes.c_int64),    # n_pairs
        ctypes.POINTER(ctypes.c_int64),    # pairs
        ctypes.POINTER(ctypes.c_int32),    # shifts
        ctypes.POINTER(ctypes.c_double),   # distances
    ]
    lib.nnpops_last_error.restype = ctypes.c_char_p
    return lib


LIB = None


def nnpops_pairs(positions, cell, pbc, cutoff):
    """Half list from nnpops: (pairs [n, 2] int64, shifts [n, 3] int32, distances [n])."""
    global LIB
    if LIB is None:
        LIB = _library()
    x = np.ascontiguousarray(positions, dtype=np.float64)
    h = np.ascontiguousarray(cell, dtype=np.float64)
    p = np.ascontiguousarray(pbc, dtype=np.uint8)
    dp = ctypes.POINTER(ctypes.c_double)
    capacity = 16
    while True:
        pairs = np.zeros((capacity, 2), dtype=np.int64)
        shifts = np.zeros((capacity, 3), dtype=np.int32)
        dist = np.zeros(capacity, dtype=np.float64)
        n_pairs = ctypes.c_int64(-1)
        st = LIB.nnpops_neighbor_pairs(
            len(x), x.ctypes.data_as(dp), h.ctypes.data_as(dp),
            p.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), cutoff, capacity,
            ctypes.byref(n_pairs), pairs.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
            shifts.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), dist.ctypes.data_as(dp))
        if st == NNPOPS_ERROR_NEIGHBOR_OVERFLOW:
            assert n_pairs.value > capacity
            capacity = n_pairs.value
            continue
        assert st == NNPOPS_OK, LIB.nnpops_last_error().decode()
        n = n_pairs.value
        return pairs[:n], shifts[:n], dist[:n]


def ase_half(positions, cell, pbc, cutoff):
    """ASE's full list reduced to the half list: (pairs, shifts, distances)."""
    atoms = ase.Atoms("H%d" % len(positions), positions=positions, cell=cell, pbc=pbc)
    i, j, S, d = neighbor_list("ijSd", atoms, cutoff, self_interaction=False)
    positive = (S[:, 0] > 0) | ((S[:, 0] == 0) & (S[:, 1] > 0)) | \
        ((S[:, 0] == 0) & (S[:, 1] == 0) & (S[:, 2] > 0))
    zero = (S == 0).all(axis=1)
    keep = positive | (zero & (i < j))
    return np.stack([i[keep], j[keep]], axis=1), S[keep], d[keep]


def compare(positions, cell, pbc, cutoff):
    positions = np.asarray(positions, dtype=np.float64)
    cell = np.asarray(cell, dtype=np.float64)
    got_p, got_s, got_d = nnpops_pairs(positions, cell, pbc, cutoff)
    want_p, want_s, want_d = ase_half(positions, cell, pbc, cutoff)

    def keyed(p, s, d):
        return {(int(a), int(b), int(s0), int(s1), int(s2)): float(dd)
                for (a, b), (s0, s1, s2), dd in zip(p, s, d)}

    got = keyed(got_p, got_s, got_d)
    want = keyed(want_p, want_s, want_d)
    assert len(got) == len(got_p), "duplicate pairs from nnpops"
    missing = sorted(set(want) - set(got))[:10]
    extra = sorted(set(got) - set(want))[:10]
    assert not missing and not extra, f"missing {missing}, extra {extra}"
    # distances: against ASE, and exactly against the documented vector x_j - x_i + S . cell
    for k, d in got.items():
        assert abs(d - want[k]) <= 1e-10 * (1.0 + d)
    if len(got_p):
        vec = positions[got_p[:, 1]] - positions[got_p[:, 0]] + got_s.astype(np.float64) @ cell
        np.testing.assert_allclose(got_d, np.linalg.norm(vec, axis=1), rtol=1e-12, atol=1e-12)
    # shift 0 pairs have i < j; self-image pairs (i, i, S) have S != 0
    zero = (got_s == 0).all(axis=1)
    assert (got_p[zero, 0] < got_p[zero, 1]).all()
    assert (~zero[got_p[:, 0] == got_p[:, 1]]).all()
    return len(got)


def random_cell(rng, length, skew):
    cell = np.diag(length * rng.uniform(0.8, 1.2, 3))
    off = length * rng.uniform(-skew, skew, (3, 3))
    return cell + np.triu(off, 1) + np.tril(off, -1)


def random_positions(rng, n, cell, lo=0.0, hi=1.0):
    return rng.uniform(lo, hi, (n, 3)) @ cell


@pytest.mark.parametrize("seed", range(5))
def test_triclinic_periodic(seed):
    rng = np.random.default_rng(seed)
    cell = random_cell(rng, 12.0, 0.4)
    x = random_positions(rng, 200, cell)
    assert compare(x, cell, [True, True, True], 5.0) > 0


@pytest.mark.parametrize("seed", range(3))
def test_positions_outside_the_cell(seed):
    rng = np.random.default_rng(100 + seed)
    cell = random_cell(rng, 10.0, 0.3)
    x = random_positions(rng, 150, cell, -3.0, 4.0)
    assert compare(x, cell, [True, True, True], 4.5) > 0


@pytest.mark.parametrize("seed", range(3))
def test_small_cell_many_images(seed):
    # cutoff larger than the cell widths: several images of every atom, self-images included
    rng = np.random.default_rng(200 + seed)
    cell = random_cell(rng, 3.5, 0.3)
    x = random_positions(rng, 6, cell)
    assert compare(x, cell, [True, True, True], 6.0) > 0


def test_skewed_left_handed():
    rng = np.random.default_rng(7)
    L = 11.0
    cell = np.array([[L, 0, 0], [0.7 * L, 0.8 * L, 0], [-0.4 * L, 0.3 * L, -0.9 * L]])
    assert np.linalg.det(cell) < 0
    x = random_positions(rng, 200, cell)
    assert compare(x, cell, [True, True, True], 5.0) > 0


@pytest.mark.parametrize("pbc", [[True, False, True], [False, False, True], [True, True, False]])
def test_mixed_pbc(pbc):
    rng = np.random.default_rng(sum(2 ** k for k, p in enumerate(pbc) if p))
    cell = random_cell(rng, 11.0, 0.3)
    x = random_positions(rng, 200, cell, -0.5, 1.5)
    assert compare(x, cell, pbc, 5.0) > 0


@pytest.mark.parametrize("seed", range(3))
def test_non_periodic(seed):
    rng = np.random.default_rng(300 + seed)
    x = rng.uniform(-10.0, 10.0, (300, 3))
    assert compare(x, np.zeros((3, 3)), [False, False, False], 4.0) > 0
