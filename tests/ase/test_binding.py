"""The cffi binding (nnpops._lib): loading, errors, zero atoms, no-copy passing, options,
ensemble members, model lifetime, neighbor pairs.

Environment (set by CTest): NNPOPS_LIBRARY, NNPOPS_MODEL_PATH (converted ani2x / ani1x),
PYTHONPATH=wrappers.
"""

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nnpops
from nnpops import _lib

# A small molecule: water (O H H), ANI elements only.
WATER_Z = np.array([8, 1, 1], dtype=np.int32)
WATER_X = np.array([[0.0, 0.0, 0.1173], [0.0, 0.7572, -0.4692], [0.0, -0.7572, -0.4692]])


@pytest.fixture(scope="module")
def model():
    return nnpops.Model("ani1x")


@pytest.fixture()
def ctx(model):
    c = nnpops.Context(model)
    yield c
    c.close()


def _last_error():
    ffi, lib = _lib._load()
    return ffi.string(lib.nnpops_last_error()).decode()


def _run_python(code, **env):
    e = dict(os.environ)
    e.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e,
                          capture_output=True, text=True, timeout=120)


# ---- loading -------------------------------------------------------------------------------

def test_import_does_not_load_the_library():
    r = _run_python("""
        import sys
        import nnpops, nnpops.cli, nnpops.structures
        assert "cffi" not in sys.modules, "import nnpops imported cffi"
        import nnpops.ase
        from nnpops import _lib
        assert not _lib.is_loaded(), "the C library was opened at import"
        print("lazy ok")
    """)
    assert r.returncode == 0, r.stderr
    assert "lazy ok" in r.stdout


def test_missing_library_is_an_import_error():
    r = _run_python("""
        import nnpops
        try:
            nnpops.Model("ani1x")
        except ImportError as e:
            assert isinstance(e, nnpops.NNPOPSError), type(e)
            assert isinstance(e, nnpops.LibraryNotFoundError), type(e)
            print("MESSAGE:", e)
        else:
            raise SystemExit("no error")
    """, NNPOPS_LIBRARY="/nonexistent/dir/libnnpops.so")
    assert r.returncode == 0, r.stderr
    assert "/nonexistent/dir/libnnpops.so" in r.stdout  # says where it looked


def test_version():
    n = nnpops.version_number()
    assert (n // 10000, (n // 100) % 100) == _lib.EXPECTED_VERSION
    assert nnpops.version_string()
    assert nnpops.__version__.startswith("%d.%d." % _lib.EXPECTED_VERSION)
    info = nnpops.library_info()
    assert os.path.exists(info["path"])


def test_missing_published_model_names_the_command(tmp_path):
    # A published model that was never converted: the error says how to get it.
    r = _run_python("""
        import nnpops
        try:
            nnpops.Model("ani1ccx")
        except nnpops.ModelNotFoundError as e:
            print("MESSAGE:", e)
        else:
            raise SystemExit("no error")
        try:
            nnpops.Model("no-such-model")
        except nnpops.ModelNotFoundError as e:
            assert "--download" not in str(e), str(e)
    """, NNPOPS_MODEL_PATH=str(tmp_path / "none"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert r.returncode == 0, r.stderr
    assert "nnpops convert --download ani1ccx" in r.stdout


def test_device_auto_is_the_default(model):
    expected = "cuda" if nnpops.cuda_built() and nnpops.cuda_device_count() > 0 else "cpu"
    assert _lib.resolve_device("auto") == expected
    assert _lib.resolve_device("cpu") == "cpu"
    assert nnpops.Model("ani1x").device.startswith(expected)


def test_cdef_from_header_drops_preprocessor_lines():
    text = "#define X 1\n/* cdef-begin */\n#if 0\nint f(void);\n#endif\n/* cdef-end */\n"
    assert _lib.cdef_from_header(text).split() == ["int", "f(void);"]


# ---- models --------------------------------------------------------------------------------

def test_model_properties(model):
    assert model.type == "ani"
    assert model.name == "ani1x"
    assert model.species == (1, 6, 7, 8)
    assert model.ensemble_size == 8
    assert model.cutoff == pytest.approx(5.2, abs=1e-6)
    assert model.device == "cpu"
    assert model.precision == "float64"
    assert os.path.basename(model.path) == "ani1x.yaml"
    m2 = nnpops.Model("ani2x", precision="float32")
    assert m2.precision == "float32"
    assert sorted(m2.species) == [1, 6, 7, 8, 9, 16, 17]
    assert m2.cutoff == pytest.approx(5.1, abs=1e-6)
    assert "ani2x" in repr(m2)
    # ANI: an atom's energy depends on its neighbors within the cutoff only; no total charge
    assert model.interaction_range == model.cutoff
    assert model.uses_charge is False


def test_charges(ctx):
    """A total charge per system: zero (a number or one per system) is the neutral call, a
    nonzero one is refused by ANI with the library's named error, a wrong shape by Python."""
    ref = ctx.compute(WATER_Z, WATER_X)
    for q in (0, 0.0, [0.0], np.zeros(1)):
        res = ctx.compute(WATER_Z, WATER_X, charges=q)
        assert res["energies"][0] == ref["energies"][0]
        assert np.array_equal(res["forces"], ref["forces"])
    with pytest.raises(nnpops.UnsupportedError, match="does not use a charge"):
        ctx.compute(WATER_Z, WATER_X, charges=1)
    z2 = np.concatenate([WATER_Z, WATER_Z])
    x2 = np.concatenate([WATER_X, WATER_X + 10.0])
    batch = np.array([0, 0, 0, 1, 1, 1], dtype=np.int32)
    with pytest.raises(nnpops.UnsupportedError, match="system 1 has total charge -1"):
        ctx.compute(z2, x2, batch=batch, charges=[0.0, -1.0])
    with pytest.raises(ValueError, match="charges must be"):
        ctx.compute(z2, x2, batch=batch, charges=[0.0, 0.0, 0.0])


def test_model_not_found():
    with pytest.raises(nnpops.ModelNotFoundError) as info:
        nnpops.Model("no-such-model-xyz")
    e = info.value
    assert isinstance(e, nnpops.NNPOPSError)
    assert e.code == 4
    assert e.status and "MODEL_NOT_FOUND" in e.status.upper()
    assert _last_error() in str(e)
    assert "no-such-model-xyz" in str(e)


def test_model_format_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: nnpops-model\nformat_version: 1\nname: bad\ntype: ani\n"
                   "units: {length: angstrom, energy: hartree}\nspecies: [H]\n")
    with pytest.raises(nnpops.ModelFormatError) as info:
        nnpops.Model(str(bad))
    assert isinstance(info.value, ValueError)
    assert info.value.code == 5
    assert _last_error() in str(info.value)


def test_bad_precision():
    with pytest.raises(ValueError):
        nnpops.Model("ani1x", precision="float16")


def test_cuda_on_cpu_only():
    if nnpops.cuda_device_count() > 0:
        pytest.skip("a GPU is present")
    expected = nnpops.NoDeviceError if nnpops.cuda_built() else nnpops.DeviceNotBuiltError
    with pytest.raises(expected) as info:
        nnpops.Model("ani1x", device="cuda")
    assert _last_error() in str(info.value)


def test_context_keeps_model_alive():
    m = nnpops.Model("ani1x")
    c = nnpops.Context(m)
    e_ref = c.compute(WATER_Z, WATER_X)["energies"][0]
    m.close()
    del m
    gc.collect()
    assert c.compute(WATER_Z, WATER_X)["energies"][0] == e_ref
    assert c.model.closed
    with pytest.raises(nnpops.NNPOPSError):
        nnpops.Context(c.model)
    c.close()
    with pytest.raises(nnpops.NNPOPSError):
        c.compute(WATER_Z, WATER_X)


def test_context_from_name():
    with nnpops.Context("ani1x") as c:
        assert c.model.name == "ani1x"
        assert np.isfinite(c.compute(WATER_Z, WATER_X)["energies"][0])


# ---- errors at compute time ----------------------------------------------------------------

def _expect(exc_class, code, fn):
    with pytest.raises(exc_class) as info:
        fn()
    e = info.value
    assert isinstance(e, nnpops.NNPOPSError)
    assert e.code == code, (e.code, e.status, str(e))
    assert str(e) == _last_error() or _last_error() in str(e)
    assert str(e)
    return e


def test_unknown_element(ctx):
    z = np.array([8, 1, 92], dtype=np.int32)
    e = _expect(nnpops.UnknownElementError, 7, lambda: ctx.compute(z, WATER_X))
    assert isinstance(e, ValueError)


def test_bad_position(ctx):
    x = WATER_X.copy()
    x[1, 2] = np.nan
    e = _expect(nnpops.BadPositionError, 8, lambda: ctx.compute(WATER_Z, x))
    assert isinstance(e, ValueError)


def test_atoms_too_close(ctx):
    x = WATER_X.copy()
    x[2] = x[1] + [0.0, 0.0, 0.01]
    e = _expect(nnpops.AtomsTooCloseError, 9, lambda: ctx.compute(WATER_Z, x))
    assert isinstance(e, ValueError)


def test_bad_cell(ctx):
    cell = np.array([[5.0, 0, 0], [10.0, 0, 0], [0, 0, 5.0]])  # singular
    e = _expect(nnpops.BadCellError, 10, lambda: ctx.compute(WATER_Z, WATER_X, cells=cell,
                                                              pbc=True))
    assert isinstance(e, ValueError)


def test_bad_option(ctx):
    e = _expect(nnpops.InvalidArgumentError, 1, lambda: ctx.set_option("no_such_option", 1))
    assert isinstance(e, ValueError)
    _expect(nnpops.InvalidArgumentError, 1, lambda: ctx.set_option("min_distance", "abc"))


def test_shape_errors(ctx):
    with pytest.raises(ValueError):
        ctx.compute(WATER_Z, WATER_X[:2])
    with pytest.raises(ValueError):
        ctx.compute(WATER_Z, WATER_X, pbc=True)  # periodic without a cell


# ---- compute -------------------------------------------------------------------------------

def test_zero_atoms(ctx):
    r = ctx.compute(np.zeros(0, np.int32), np.zeros((0, 3)), virial=True, atomic_energies=True,
                    member_energies=True)
    assert r["energies"].shape == (1,) and r["energies"][0] == 0.0
    assert r["forces"].shape == (0, 3)
    assert r["atomic_energies"].shape == (0,)
    assert np.all(r["virials"] == 0.0)
    # zero atoms in a batch of two systems, one of them periodic
    r = ctx.compute(np.zeros(0, np.int32), np.zeros((0, 3)), batch=np.zeros(0, np.int32),
                    n_systems=2, cells=np.stack([np.eye(3) * 10] * 2), pbc=[[1, 1, 1], [0, 0, 0]])
    assert np.all(r["energies"] == 0.0) and r["energies"].shape == (2,)


def test_inputs_are_passed_without_copies():
    ffi, _ = _lib._load()
    x = np.ascontiguousarray(WATER_X)
    z = np.ascontiguousarray(WATER_Z)
    assert _lib._as_array(x, np.float64) is x
    assert _lib._as_array(z, np.int32) is z
    assert int(ffi.cast("uintptr_t", _lib._ptr(ffi, x))) == x.ctypes.data
    assert int(ffi.cast("uintptr_t", _lib._ptr(ffi, z))) == z.ctypes.data
    # read-only arrays are fine as inputs
    x.flags.writeable = False
    assert int(ffi.cast("uintptr_t", _lib._ptr(ffi, x))) == x.ctypes.data
    # other layouts or dtypes are converted
    assert _lib._as_array(np.asfortranarray(np.ones((4, 3))), np.float64).flags.c_contiguous
    assert _lib._as_array(z.astype(np.int64), np.int32).dtype == np.int32


def test_outputs_are_filled_in_place(ctx):
    out = {"forces": np.full((3, 3), np.nan), "energies": np.full(1, np.nan),
           "atomic_energies": np.full(3, np.nan)}
    addr = out["forces"].ctypes.data
    r = ctx.compute(WATER_Z, WATER_X, atomic_energies=True, out=out)
    assert r["forces"] is out["forces"] and r["forces"].ctypes.data == addr
    assert r["energies"] is out["energies"]
    assert r["atomic_energies"] is out["atomic_energies"]
    assert np.all(np.isfinite(out["forces"])) and np.isfinite(out["energies"][0])
    ref = ctx.compute(WATER_Z, WATER_X)
    assert np.array_equal(ref["forces"], out["forces"])
    with pytest.raises(ValueError):
        ctx.compute(WATER_Z, WATER_X, out={"forces": np.zeros((3, 3), np.float32)})


def test_converted_inputs_give_the_same_result(ctx):
    ref = ctx.compute(WATER_Z, WATER_X)
    r = ctx.compute(WATER_Z.astype(np.int64), np.asfortranarray(WATER_X))
    assert r["energies"][0] == ref["energies"][0]
    assert np.array_equal(r["forces"], ref["forces"])
    r = ctx.compute(list(WATER_Z), WATER_X.tolist())
    assert r["energies"][0] == ref["energies"][0]


def test_outputs_consistent(ctx):
    r = ctx.compute(WATER_Z, WATER_X, virial=True, atomic_energies=True, atomic_virials=True,
                    member_energies=True)
    assert r["atomic_energies"].sum() == pytest.approx(r["energies"][0], abs=1e-9)
    assert np.allclose(r["atomic_virials"].sum(axis=0), r["virials"][0], atol=1e-10)
    assert r["member_energies"].shape == (1, 8)
    assert r["member_energies"][0].mean() == pytest.approx(r["energies"][0], abs=1e-9)
    assert np.allclose(r["forces"].sum(axis=0), 0.0, atol=1e-10)


def test_ensemble_member_option(model):
    with nnpops.Context(model) as c:
        members = c.compute(WATER_Z, WATER_X, member_energies=True)["member_energies"][0]
    for k in (0, 5):
        with nnpops.Context(model, ensemble_member=k) as c:
            assert c.get_option("ensemble_member") == k
            e = c.compute(WATER_Z, WATER_X)["energies"][0]
            assert e == pytest.approx(members[k], abs=1e-9)


def test_options_and_stats(ctx):
    ctx.set_option("min_distance", 0.05)
    assert ctx.get_option("min_distance") == pytest.approx(0.05)
    ctx.set_option("deterministic", True)
    assert ctx.get_option("deterministic") == 1.0
    ctx.set_option("deterministic", False)
    assert ctx.get_option("deterministic") == 0.0
    before = ctx.stats()
    assert set(before) >= {"steps", "neighbor_rebuilds", "graph_captures", "graph_replays",
                           "eager_fallbacks", "pair_capacity", "n_pairs"}
    ctx.compute(WATER_Z, WATER_X)
    after = ctx.stats()
    assert after["steps"] == before["steps"] + 1
    assert after["n_pairs"] == 3


def test_units_option(model):
    with nnpops.Context(model) as ev, nnpops.Context(model, length_unit="nm",
                                                    energy_unit="kJ/mol") as kj:
        a = ev.compute(WATER_Z, WATER_X)
        b = kj.compute(WATER_Z, WATER_X / 10.0)
    ev_to_kj = 96.48533212331002
    assert b["energies"][0] == pytest.approx(a["energies"][0] * ev_to_kj, rel=1e-12)
    assert np.allclose(b["forces"], a["forces"] * ev_to_kj * 10.0, rtol=1e-10, atol=1e-9)


def test_batch_matches_single(ctx):
    x2 = WATER_X + [3.0, 0.5, 0.0]
    z = np.concatenate([WATER_Z, WATER_Z[::-1]])
    x = np.concatenate([WATER_X, x2[::-1]])
    r = ctx.compute(z, x, batch=[0, 0, 0, 1, 1, 1])
    a = ctx.compute(WATER_Z, WATER_X)
    b = ctx.compute(WATER_Z[::-1], x2[::-1])
    assert r["energies"] == pytest.approx([a["energies"][0], b["energies"][0]], abs=1e-10)
    assert np.allclose(r["forces"], np.concatenate([a["forces"], b["forces"]]), atol=1e-10)


# ---- neighbor pairs ------------------------------------------------------------------------

def _brute_pairs(x, cutoff, cell=None, pbc=(False, False, False)):
    from ase.neighborlist import primitive_neighbor_list
    c = np.zeros((3, 3)) if cell is None else np.asarray(cell)
    i, j, d = primitive_neighbor_list("ijd", pbc, c, x, cutoff, self_interaction=False)
    return np.sort(d)


@pytest.mark.parametrize("periodic", [False, True])
def test_neighbor_pairs(periodic):
    rng = np.random.default_rng(3)
    cell = np.array([[6.0, 0.0, 0.0], [1.0, 5.5, 0.0], [0.5, -0.7, 6.5]])
    x = rng.uniform(0, 1, size=(40, 3)) @ cell
    cutoff = 5.2 if periodic else 3.0  # periodic: cutoff larger than half the cell
    if periodic:
        pairs, shifts, dist = nnpops.neighbor_pairs(x, cutoff, cell=cell, pbc=True, capacity=1)
        ref = _brute_pairs(x, cutoff, cell, (True, True, True))
    else:
        pairs, shifts, dist = nnpops.neighbor_pairs(x, cutoff, capacity=1)
        ref = _brute_pairs(x, cutoff)
    # ASE gives a full list (each pair twice); nnpops a half list
    assert len(dist) * 2 == len(ref)
    assert np.allclose(np.sort(np.repeat(dist, 2)), ref, atol=1e-12)
    r = x[pairs[:, 1]] - x[pairs[:, 0]] + shifts @ cell
    assert np.allclose(np.linalg.norm(r, axis=1), dist, atol=1e-12)
    assert pairs.dtype == np.int64 and shifts.dtype == np.int32


def test_neighbor_pairs_empty():
    pairs, shifts, dist = nnpops.neighbor_pairs(np.zeros((0, 3)), 3.0)
    assert pairs.shape == (0, 2) and shifts.shape == (0, 3) and dist.shape == (0,)
