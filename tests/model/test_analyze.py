"""`nnpops analyze`: the roundings on hand-worked values, the analysis on models whose stage scales
and rounding errors are known by construction (Lennard-Jones, a tiny ANI network with fixed
weights), its check against the library, byte-identical output run to run and thread count to
thread count, and ANI-2x / TensorNet on a small molecule."""

import hashlib
import math
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "wrappers"))

from nnpops import analyze, analyze_models  # noqa: E402
from nnpops.analyze_round import max_finite, min_normal, round_to  # noqa: E402
from nnpops.convert import safetensors_chunks  # noqa: E402

ase = pytest.importorskip("ase")
from ase import Atoms  # noqa: E402

# ---- roundings -----------------------------------------------------------------------------------

E = math.ldexp
F32_MAX = (2 - 2 ** -23) * 2.0 ** 127
BF16_MAX = (2 - 2 ** -7) * 2.0 ** 127
# (value, format, expected): worked by hand from the formats' mantissa widths and exponent ranges.
HAND = [
    # float32: 23 mantissa bits, spacing 2^-23 at 1
    (1 + 2 ** -24, "float32", 1.0),                       # tie, 1 is even
    (1 + 3 * 2 ** -24, "float32", 1 + 2 ** -22),          # tie, 1 + 2^-23 is odd: up
    (1 + 2 ** -24 + 2 ** -40, "float32", 1 + 2 ** -23),   # above the tie: up
    (-(1 + 2 ** -24 + 2 ** -40), "float32", -(1 + 2 ** -23)),
    (F32_MAX, "float32", F32_MAX),
    (F32_MAX + 2.0 ** 102, "float32", F32_MAX),           # below max + half spacing
    (F32_MAX + 2.0 ** 103, "float32", math.inf),          # the tie at max + half spacing: inf
    (-F32_MAX - 2.0 ** 104, "float32", -math.inf),
    (2.0 ** -149, "float32", 2.0 ** -149),                # smallest subnormal
    (2.0 ** -150, "float32", 0.0),                        # tie between 0 and 2^-149: 0 is even
    (1.5 * 2.0 ** -150, "float32", 2.0 ** -149),
    (2.5 * 2.0 ** -149, "float32", 2.0 * 2.0 ** -149),    # tie, 2 is even
    (2.0 ** -126 - 2.0 ** -150, "float32", 2.0 ** -126),  # top subnormal tie rounds to normal
    (1e-300, "float32", 0.0),
    (1.0 / 3.0, "float32", 11184811 * 2.0 ** -25),        # 0x3EAAAAAB
    # tf32: 10 mantissa bits
    (1 + 2 ** -11, "tf32", 1.0),
    (1 + 3 * 2 ** -11, "tf32", 1 + 2 ** -9),
    (1 + 2 ** -10, "tf32", 1 + 2 ** -10),
    (1.0 / 3.0, "tf32", 1365.0 / 4096.0),                 # 1.0101010101b x 2^-2, rest < half
    (0.5 + 2 ** -12, "tf32", 0.5),                        # tie at 0.5 (spacing 2^-11): even
    (2.0 ** -136, "tf32", 2.0 ** -136),                   # smallest tf32 subnormal
    (2.0 ** -137, "tf32", 0.0),
    # bfloat16: 7 mantissa bits
    (1 + 2 ** -8, "bfloat16", 1.0),
    (1 + 3 * 2 ** -8, "bfloat16", 1 + 2 ** -6),
    (math.pi, "bfloat16", 3.140625),                      # 1.1001001|0000111...b x 2
    (1.0 / 3.0, "bfloat16", 171.0 / 512.0),               # 1.0101010|1010...b: up
    (0.0104, "bfloat16", 0.0103759765625),                # 1.3312 x 2^-7 -> 1 + 42/128
    (BF16_MAX, "bfloat16", BF16_MAX),
    (BF16_MAX + 2.0 ** 119, "bfloat16", math.inf),
    (2.0 ** -133, "bfloat16", 2.0 ** -133),               # smallest bfloat16 subnormal
    (2.0 ** -134, "bfloat16", 0.0),
    (3 * 2.0 ** -134, "bfloat16", 2.0 ** -132),
    (65504.0, "bfloat16", 65536.0),                       # 1.1111111111b x 2^15: up, carries
]


@pytest.mark.parametrize("x,fmt,want", HAND)
def test_round_hand_worked(x, fmt, want):
    got = float(round_to(x, fmt))
    assert got == want, (x, fmt, got, want)
    assert math.copysign(1.0, got) == math.copysign(1.0, want)


def test_round_special_values():
    for fmt in ("float32", "tf32", "bfloat16"):
        r = round_to([math.inf, -math.inf, -0.0, 0.0, math.nan, -5e-320], fmt)
        assert r[0] == math.inf and r[1] == -math.inf
        assert r[2] == 0.0 and math.copysign(1.0, r[2]) == -1.0
        assert r[3] == 0.0 and math.copysign(1.0, r[3]) == 1.0
        assert math.isnan(r[4])
        assert r[5] == 0.0 and math.copysign(1.0, r[5]) == -1.0
    assert max_finite("float32") == F32_MAX and max_finite("bfloat16") == BF16_MAX
    assert min_normal("tf32") == 2.0 ** -126


def _wide_values(n=200000, seed=7):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n) * 2.0 ** rng.integers(-160, 130, n).astype(np.float64)


def test_round_float32_matches_numpy_conversion():
    x = _wide_values()
    with np.errstate(over="ignore"):
        ref = x.astype(np.float32).astype(np.float64)
    got = round_to(x, "float32")
    assert np.array_equal(got.view(np.uint64), ref.view(np.uint64))


def test_round_tf32_bfloat16_nest_in_float32():
    # Rounding to fewer bits of the same exponent range: the result has the format's mantissa
    # width, and is within half a spacing of x (relative, in the normal range).
    x = _wide_values(50000, 3)
    x = x[(np.abs(x) > 2.0 ** -120) & (np.abs(x) < 2.0 ** 120)]
    for fmt, m in (("tf32", 10), ("bfloat16", 7)):
        r = round_to(x, fmt)
        bits = r.view(np.uint64)
        assert not np.any(bits & np.uint64((1 << (52 - m)) - 1))
        spacing = np.ldexp(1.0, np.frexp(np.abs(x))[1] - 1 - m)
        assert np.all(np.abs(r - x) <= 0.5 * spacing)


def test_round_against_ml_dtypes():
    ml = pytest.importorskip("ml_dtypes")
    x = _wide_values(200000, 11)
    with np.errstate(over="ignore"):
        direct = x.astype(ml.bfloat16).astype(np.float64)  # one rounding from float64
    got = round_to(x, "bfloat16")
    assert np.array_equal(got.view(np.uint64), direct.view(np.uint64))


# ---- models known by construction ----------------------------------------------------------------

def _library_or_skip():
    try:
        from nnpops import _lib

        _lib.version_number()
    except Exception as exc:  # no library built: the analysis cannot be checked against it
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("nnpops library not found: %s" % exc)


LJ_EPS = 0.0104
LJ_SIGMA = 3.4


def _lj_model(tmp_path):
    path = tmp_path / "lj_ar.yaml"
    path.write_text(
        "format: nnpops-model\nformat_version: 1\nname: lj_ar\ntype: lj\n"
        "units: {length: angstrom, energy: eV}\nspecies: [Ar]\n"
        "lj:\n  pairs:\n    - {elements: [Ar, Ar], epsilon: %r, sigma: %r, cutoff: 8.5}\n"
        % (LJ_EPS, LJ_SIGMA))
    return str(path)


def test_lj_known_scales(tmp_path):
    _library_or_skip()
    path = _lj_model(tmp_path)
    r0 = 2.0 ** (1.0 / 6.0) * LJ_SIGMA  # the minimum: pair energy -eps, no force
    atoms = Atoms("Ar2", positions=[[0, 0, 0], [r0, 0, 0]])
    m = analyze_models.load(path)
    rep = analyze.analyze_frames(m, [atoms], model_path=path)
    st = {s["name"]: s for s in rep["stages"]}
    assert list(st) == ["distances", "lj.inverse6", "lj.pair_energy"]
    d = st["distances"]["forward"]
    assert d["count"] == 2 and d["rms"] == pytest.approx(r0, rel=1e-5)
    assert d["max_abs"] == pytest.approx(r0, rel=1e-5)
    assert st["distances"]["adjoint"]["max_abs"] < 1e-12  # dE/dr = 0 at the minimum
    assert st["lj.inverse6"]["forward"]["rms"] == pytest.approx(0.5, rel=1e-5)
    pe = st["lj.pair_energy"]
    assert pe["forward"]["rms"] == pytest.approx(LJ_EPS, rel=1e-5)
    assert pe["adjoint"]["rms"] == 0.5 and pe["adjoint"]["max_abs"] == 0.5  # E = 1/2 sum
    # Rounding the pair energies: two ordered pairs of -eps, each halved: dE = |eps - rnd(eps)|.
    # bfloat16(0.0104) = (1 + 42/128) 2^-7; tf32(0.0104) = (1 + 339/1024) 2^-7.
    errs = pe["rounded"]
    assert errs["bfloat16"]["energy_error_eV"] == pytest.approx(0.0104 - 0.0103759765625, rel=1e-5)
    assert errs["tf32"]["energy_error_eV"] == pytest.approx(0.0104 - (1 + 339 / 1024) / 128,
                                                            rel=1e-5)
    assert errs["float32"]["energy_error_eV"] == pytest.approx(
        abs(0.0104 - float(np.float32(0.0104))), rel=1e-5)
    for fmt in ("float32", "tf32", "bfloat16"):  # the adjoint 0.5 is exact: forces unchanged
        assert errs[fmt]["max_force_error_eV_per_A"] == 0.0
        assert errs[fmt]["within_force_bound"]
    assert rep["verified_against_library"]["checked"]


B0 = (1 + 2 ** -10, 0.5 + 2 ** -12)  # layer 0 biases (its weights are zero)
W1 = (1.0, 2.0)                       # layer 1 weights
B1 = 0.25


def _tiny_ani(tmp_path, self_energy=-0.5):
    """One species (H), AEV length 2, networks [2, 2, 1], one member; layer 0's weights are zero,
    so its output is celu(b0) = b0 whatever the geometry and every force is zero."""
    t = {
        "m0.H.l0.weight": ((2, 2), np.zeros((2, 2), "<f4").tobytes()),
        "m0.H.l0.bias": ((2,), np.array(B0, "<f4").tobytes()),
        "m0.H.l1.weight": ((1, 2), np.array([W1], "<f4").tobytes()),
        "m0.H.l1.bias": ((1,), np.array([B1], "<f4").tobytes()),
    }
    blob = b"".join(safetensors_chunks(t, {"format": "nnpops"}))
    (tmp_path / "tiny.safetensors").write_bytes(blob)
    sha = hashlib.sha256(blob).hexdigest()
    (tmp_path / "tiny.yaml").write_text(
        "format: nnpops-model\nformat_version: 1\nname: tiny\ntype: ani\n"
        "units: {length: angstrom, energy: eV}\nspecies: [H]\n"
        "weights: {file: tiny.safetensors, sha256: \"%s\"}\n"
        "ani:\n"
        "  radial: {cutoff: 5.0, eta: [1.0], shifts: [1.0]}\n"
        "  angular: {cutoff: 3.5, eta: [1.0], zeta: [2.0], shifts: [1.0], sections: [0.0]}\n"
        "  self_energies: [%r]\n  ensemble_size: 1\n  activation: {type: celu, alpha: 0.1}\n"
        "  networks: {H: [2, 2, 1]}\n  tensors: \"m{member}.{element}.l{layer}.{kind}\"\n"
        % (sha, self_energy))
    return str(tmp_path / "tiny.yaml")


def test_tiny_network_known_scales(tmp_path):
    _library_or_skip()
    path = _tiny_ani(tmp_path)
    atoms = Atoms("H2", positions=[[0, 0, 0], [1.0, 0, 0]])
    m = analyze_models.load(path)
    rep = analyze.analyze_frames(m, [atoms], model_path=path)
    st = {s["name"]: s for s in rep["stages"]}
    assert list(st) == ["distances", "aev.radial", "aev.angular", "H.layer0", "H.layer1"]
    # radial AEV of each atom: 0.25 exp(-(1 - 1)^2) fc(1) with fc(r) = cos(pi r / 5) / 2 + 1/2
    fc = 0.5 * math.cos(math.pi / 5.0) + 0.5
    assert st["aev.radial"]["forward"]["rms"] == pytest.approx(0.25 * fc, rel=1e-5)
    assert st["aev.angular"]["forward"]["max_abs"] == 0.0  # two atoms: no angle
    assert st["aev.radial"]["adjoint"]["max_abs"] == 0.0   # layer 0 weights are zero
    l0 = st["H.layer0"]
    assert l0["forward"]["rms"] == pytest.approx(math.sqrt((B0[0] ** 2 + B0[1] ** 2) / 2), rel=1e-5)
    assert l0["forward"]["max_abs"] == pytest.approx(B0[0], rel=1e-5)
    assert l0["adjoint"]["rms"] == pytest.approx(math.sqrt((W1[0] ** 2 + W1[1] ** 2) / 2),
                                                 rel=1e-5)
    assert l0["adjoint"]["max_abs"] == 2.0
    out = B0[0] * W1[0] + B0[1] * W1[1] + B1  # 2.25 + 2^-10 + 2^-11
    l1 = st["H.layer1"]
    assert l1["forward"]["rms"] == pytest.approx(out, rel=1e-5)
    assert l1["adjoint"]["rms"] == 1.0
    # Rounding layer 0 (per atom): bfloat16 drops 2^-10 and 2^-12 (weighted 1 and 2): 3 2^-11;
    # tf32 keeps 1 + 2^-10 and rounds the tie 0.5 + 2^-12 to 0.5: 2 2^-12; float32 is exact.
    r0 = l0["rounded"]
    assert r0["bfloat16"]["energy_error_eV"] == pytest.approx(2 * 3 * 2.0 ** -11, rel=1e-5)
    assert r0["tf32"]["energy_error_eV"] == pytest.approx(2 * 2 * 2.0 ** -12, rel=1e-5)
    assert r0["float32"]["energy_error_eV"] == 0.0
    # Rounding layer 1: 2.25 + 3 2^-11 -> 2.25 in bfloat16 (spacing 2^-6: error 3 2^-11); in
    # tf32 (spacing 2^-9) it is 2.25 + 0.75 2^-9 -> 2.25 + 2^-9 (error 2^-11).
    r1 = l1["rounded"]
    assert r1["bfloat16"]["energy_error_eV"] == pytest.approx(2 * 3 * 2.0 ** -11, rel=1e-5)
    assert r1["tf32"]["energy_error_eV"] == pytest.approx(2 * 2.0 ** -11, rel=1e-5)
    for s in st.values():
        for fmt in ("float32", "tf32", "bfloat16"):
            assert s["rounded"][fmt]["max_force_error_eV_per_A"] == 0.0


def test_mismatch_with_library_fails_loudly(tmp_path):
    _library_or_skip()
    path = _tiny_ani(tmp_path)
    m = analyze_models.load(path)
    m.self_energies = m.self_energies + 1e-6  # the analysis now describes another model
    atoms = Atoms("H2", positions=[[0, 0, 0], [1.0, 0, 0]])
    with pytest.raises(analyze_models.AnalyzeError, match="differs from the library"):
        analyze.analyze_frames(m, [atoms], model_path=path)


# ---- the command: determinism, outputs, errors ---------------------------------------------------

def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(HERE, "..", "..", "wrappers") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def _frames_file(tmp_path):
    import ase.io

    frames = [Atoms("H3", positions=[[0, 0, 0], [0.9, 0.1, 0], [0.2, 1.1, 0.3]]),
              Atoms("H4", positions=[[0, 0, 0], [1.0, 0, 0], [0, 1.2, 0], [0.8, 0.7, 0.9]],
                    cell=[4.0, 4.5, 5.0], pbc=True)]
    path = str(tmp_path / "frames.extxyz")
    ase.io.write(path, frames, format="extxyz")
    return path


def _run_cli(model, frames, json_path, threads):
    env = _env(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    p = subprocess.run([sys.executable, "-m", "nnpops", "analyze", model, frames,
                        "--json", json_path], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    with open(json_path, "rb") as f:
        return p.stdout, f.read()


def test_byte_identical_runs_and_thread_counts(tmp_path):
    _library_or_skip()
    model = _tiny_ani(tmp_path)
    frames = _frames_file(tmp_path)
    a = _run_cli(model, frames, str(tmp_path / "a.json"), 1)
    b = _run_cli(model, frames, str(tmp_path / "b.json"), 1)
    c = _run_cli(model, frames, str(tmp_path / "c.json"), 2)
    assert a == b == c
    assert b"frames.extxyz" in a[1] and str(tmp_path).encode() not in a[1]
    assert "H.layer0" in a[0] and "bfloat16 within the force bound" in a[0]
    rep = __import__("json").loads(a[1])
    assert rep["frames"] == 2 and rep["atoms"] == 7


def test_plot_without_matplotlib_is_a_clear_error(tmp_path, monkeypatch, capsys):
    _library_or_skip()
    from nnpops import cli

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    status = cli.main(["analyze", _tiny_ani(tmp_path), _frames_file(tmp_path),
                       "--plot", str(tmp_path / "x.png")])
    err = capsys.readouterr().err
    assert status == 1
    assert "--plot needs matplotlib" in err and "pip install" in err
    assert not (tmp_path / "x.png").exists()


def test_plot_writes_a_png(tmp_path):
    _library_or_skip()
    pytest.importorskip("matplotlib")
    from nnpops import cli

    out = tmp_path / "x.png"
    assert cli.main(["analyze", _tiny_ani(tmp_path), _frames_file(tmp_path),
                     "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- ANI-2x and TensorNet on a small molecule ----------------------------------------------------

def _model_or_skip(name):
    from nnpops import modelpath

    path = modelpath.find_model(name)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("model %s not found (NNPOPS_MODEL_PATH)" % name)
        pytest.skip("model %s not found" % name)
    return path


def _ethanol():
    from nnpops import structures

    return structures.get("ethanol")


def test_ani2x_smoke():
    _library_or_skip()
    path = _model_or_skip("ani2x")
    rep = analyze.analyze_frames(analyze_models.load(path), [_ethanol()], model_path=path)
    names = [s["name"] for s in rep["stages"]]
    assert names == ["distances", "aev.radial", "aev.angular"] + [
        "%s.layer%d" % (el, k) for el in ("H", "C", "O") for k in range(4)]
    for s in rep["stages"]:
        assert s["rounded"]["float32"]["within_force_bound"]
    text = analyze.format_table(rep)
    assert "aev.angular" in text and "C.layer3" in text


def test_tensornet_smoke():
    _library_or_skip()
    path = _model_or_skip("tn_a")
    rep = analyze.analyze_frames(analyze_models.load(path), [_ethanol()], model_path=path)
    names = [s["name"] for s in rep["stages"]]
    for want in ("rbf", "embedding.X", "embedding.out", "layer0.edge_net", "layer0.messages",
                 "layer0.product", "layer0.product_normalised", "layer0.out",
                 "readout.features", "readout.atom_energy"):
        assert want in names
    assert rep["verified_against_library"]["frames"] == 1
    for s in rep["stages"]:
        assert s["rounded"]["float32"]["within_force_bound"]


@pytest.mark.parametrize("name", ["ani1x", "tn_a", "tn_b_oldlayout_so3", "tn_c_gauss_lower_zbl",
                                  "tn_d_lightning_f32"])
def test_float64_analysis_equals_the_library(name):
    """The analysis' own float64 model against the library on an open molecule, a charged one
    and a periodic water box (SO(3), gauss RBFs, a lower cutoff, ZBL, Atomref, float32 weights
    among the TensorNet models); the check itself raises on a difference above 1e-10."""
    _library_or_skip()
    from nnpops import structures

    path = _model_or_skip(name)
    m = analyze_models.load(path)
    charged = _ethanol()
    charged.info["charge"] = 1.0 if m.type == "tensornet" else 0.0
    frames = [_ethanol(), charged, structures.water_box(2)]
    rep = analyze.analyze_frames(m, frames, model_path=path, formats=())
    assert rep["verified_against_library"]["frames"] == 3
    assert all(s["rounded"] == {} for s in rep["stages"])
    if m.type == "tensornet" and m.zbl is not None:
        assert "zbl.pair_energy" in [s["name"] for s in rep["stages"]]
