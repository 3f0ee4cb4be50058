"""Tests of the torchmd-net TensorNet converter (wrappers/nnpops/convert_tensornet.py) and of the
restricted checkpoint reader (wrappers/nnpops/torchzip.py).

The checkpoints of ../shared/reference/tensornet are converted and checked tensor by tensor; the
hostile and unsupported cases are checkpoints written here by a small pickle emitter (protocol 2
opcodes, the layout torch.save uses), so no PyTorch is needed.  A missing reference directory
fails when CI == "true", else skips the cases that need it.
"""

import hashlib
import json
import os
import pickle
import re
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WRAPPERS = os.path.join(HERE, "..", "..", "wrappers")
sys.path.insert(0, WRAPPERS)
sys.path.insert(0, os.path.join(HERE, "..", "common"))

from nnpops import convert, convert_tensornet, torchzip  # noqa: E402
from nnpops.convert import ConvertError  # noqa: E402
from shared_data import missing, shared_dir  # noqa: E402

CHECKPOINTS = ("tn_a", "tn_a_member2", "tn_b_oldlayout_so3", "tn_c_gauss_lower_zbl",
               "tn_d_lightning_f32")


def reference_dir():
    path = os.path.join(shared_dir(), "reference", "tensornet")
    if not os.path.isfile(os.path.join(path, "tn_a.ckpt")):
        missing("TensorNet checkpoints not found in %s" % path)
    return path


def ckpt_path(name):
    return os.path.join(reference_dir(), name + ".ckpt")


# ---- a minimal torch.save writer ----------------------------------------------------------------

class Tensor:
    """A tensor to emit: data written as its own storage, with optional hostile overrides."""

    def __init__(self, array, size=None, stride=None, offset=0, numel=None, storage="auto"):
        self.array = np.ascontiguousarray(array).reshape(np.shape(array))
        self.size = tuple(self.array.shape) if size is None else size
        if stride is None:
            stride, acc = [], 1
            for n in reversed(self.array.shape):
                stride.insert(0, acc)
                acc *= n
            stride = tuple(stride)
        self.stride = stride
        self.offset = offset
        self.numel = self.array.size if numel is None else numel
        if storage == "auto":
            storage = {np.dtype("float32"): "FloatStorage", np.dtype("float64"): "DoubleStorage",
                       np.dtype("int64"): "LongStorage"}[self.array.dtype]
        self.storage = storage


class Call:
    """GLOBAL module.name called with args (REDUCE): what a hostile pickle does."""

    def __init__(self, module, name, args=()):
        self.module, self.name, self.args = module, name, args


class Emitter:
    def __init__(self):
        self.out = bytearray(b"\x80\x02")
        self.storages = {}

    def glob(self, module, name):
        self.out += b"c" + module.encode() + b"\n" + name.encode() + b"\n"

    def emit(self, obj):
        o = self.out
        if obj is None:
            o += b"N"
        elif obj is True:
            o += b"\x88"
        elif obj is False:
            o += b"\x89"
        elif isinstance(obj, int):
            if 0 <= obj < 256:
                o += b"K" + bytes([obj])
            elif -2 ** 31 <= obj < 2 ** 31:
                o += b"J" + struct.pack("<i", obj)
            else:
                raw = obj.to_bytes((obj.bit_length() + 8) // 8, "little", signed=True)
                o += b"\x8a" + bytes([len(raw)]) + raw
        elif isinstance(obj, float):
            o += b"G" + struct.pack(">d", obj)
        elif isinstance(obj, str):
            b = obj.encode("utf-8")
            o += b"X" + struct.pack("<I", len(b)) + b
        elif isinstance(obj, tuple):
            o += b"("
            for x in obj:
                self.emit(x)
            o += b"t"
        elif isinstance(obj, list):
            o += b"]"
            if obj:
                o += b"("
                for x in obj:
                    self.emit(x)
                o += b"e"
        elif isinstance(obj, dict):
            o += b"}"
            if obj:
                o += b"("
                for k, v in obj.items():
                    self.emit(k)
                    self.emit(v)
                o += b"u"
        elif isinstance(obj, np.ndarray):
            self.emit(Tensor(obj))
        elif isinstance(obj, Tensor):
            key = str(len(self.storages))
            self.storages[key] = obj.array.tobytes()
            self.glob("torch._utils", "_rebuild_tensor_v2")
            o += b"("
            o += b"("
            self.emit("storage")
            self.glob("torch", obj.storage)
            self.emit(key)
            self.emit("cpu")
            self.emit(obj.numel)
            o += b"tQ"
            self.emit(obj.offset)
            self.emit(tuple(obj.size))
            self.emit(tuple(obj.stride))
            o += b"\x89"
            self.glob("collections", "OrderedDict")
            o += b")R"
            o += b"tR"
        elif isinstance(obj, Call):
            self.glob(obj.module, obj.name)
            self.emit(tuple(obj.args))
            o += b"R"
        else:
            raise TypeError(type(obj))

    def finish(self):
        return bytes(self.out) + b"."


def write_ckpt(path, obj, prefix="archive"):
    e = Emitter()
    e.emit(obj)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(prefix + "/data.pkl", e.finish())
        z.writestr(prefix + "/byteorder", "little")
        for key, data in e.storages.items():
            z.writestr(prefix + "/data/" + key, data)
    return path


def load_parts(name):
    ck = torchzip.load_checkpoint(ckpt_path(name))
    return dict(ck["hyper_parameters"]), dict(ck["state_dict"])


def rewrite(tmp_path, name, hp_change=None, sd_change=None, extra=None, fname="x.ckpt"):
    hp, sd = load_parts(name)
    if hp_change:
        for k, v in hp_change.items():
            if v is KeyError:
                hp.pop(k, None)
            else:
                hp[k] = v
    if sd_change:
        for k, v in sd_change.items():
            if v is KeyError:
                sd.pop(k, None)
            else:
                sd[k] = v
    top = {"hyper_parameters": hp, "state_dict": sd}
    if extra:
        top.update(extra)
    return write_ckpt(str(tmp_path / fname), top)


def convert_err(path, tmp_path, **kw):
    with pytest.raises(ConvertError) as info:
        convert_tensornet.convert_tensornet(str(path), str(tmp_path / "out"), **kw)
    return str(info.value)


def read_weights(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        dt = {"F32": "<f4", "F64": "<f8"}[t["dtype"]]
        out[name] = np.frombuffer(blob[8 + n + b:8 + n + e], dtype=dt).reshape(t["shape"])
    return header, out, n


# ---- the reference checkpoints ------------------------------------------------------------------

@pytest.mark.parametrize("name", CHECKPOINTS)
def test_convert_checkpoint(tmp_path, name):
    status, yaml_path, detail = convert_tensornet.convert_tensornet(ckpt_path(name), str(tmp_path))
    assert status == "written"
    text = open(yaml_path, encoding="ascii").read()
    assert "\ntype: tensornet\n" in text
    assert "units: {length: angstrom, energy: eV}" in text
    sha = hashlib.sha256(open(ckpt_path(name), "rb").read()).hexdigest()
    assert 'source: {file: %s.ckpt, sha256: "%s"}' % (name, sha) in text
    wsha = hashlib.sha256(open(tmp_path / (name + ".safetensors"), "rb").read()).hexdigest()
    assert 'sha256: "%s"' % wsha in text
    assert "\n  dtype: %s\n" % ("float32" if name == "tn_d_lightning_f32" else "float64") in text
    assert ("old_layout_remapped: true" in text) == (name == "tn_b_oldlayout_so3")
    header, weights, n = read_weights(tmp_path / (name + ".safetensors"))
    assert (8 + n) % 8 == 0
    assert header["__metadata__"]["type"] == "tensornet"
    hp, sd = load_parts(name)
    # every hyperparameter is recorded
    for key in hp:
        assert re.search(r"^    %s: " % re.escape(key), text, re.M), key
    # tensors: the state dict minus 'model.', remapped for old layouts, in the stored dtype
    old = "check_errors" in hp
    skipped = ("model.mean", "model.std")
    for k, v in sd.items():
        if k in skipped or k.endswith("distance.box") or k.endswith("initial_atomref") \
                or k.endswith("atomic_number"):
            continue
        name_out = k[len("model."):]
        assert name_out in weights, name_out
        w = weights[name_out]
        assert w.dtype == v.dtype
        if old and (name_out.endswith("tensor_embedding.linears_scalar.1.weight")
                    or name_out.endswith("tensor_embedding.linears_scalar.1.bias")
                    or re.search(r"layers\.\d+\.linears_scalar\.2\.", name_out)):
            # rows (f, c) -> (c, f), written out here index by index
            F = v.shape[0] // 3
            expect = np.empty_like(v)
            for c in range(3):
                for f in range(F):
                    expect[c * F + f] = v[f * 3 + c]
            np.testing.assert_array_equal(w, expect)
        else:
            np.testing.assert_array_equal(w.reshape(v.shape), v)
    assert len(weights) == len([k for k in sd if not (k in skipped or k.endswith("distance.box")
                                                      or k.endswith("initial_atomref")
                                                      or k.endswith("atomic_number"))])
    mean = float(re.search(r"^  mean: (.*)$", text, re.M).group(1))
    assert mean == float(sd["model.mean"])
    # repeated run: up to date
    status, _, _ = convert_tensornet.convert_tensornet(ckpt_path(name), str(tmp_path))
    assert status == "up to date"


def test_zbl_prior_recorded(tmp_path):
    _, yaml_path, _ = convert_tensornet.convert_tensornet(ckpt_path("tn_c_gauss_lower_zbl"),
                                                          str(tmp_path))
    text = open(yaml_path).read()
    assert "{type: Atomref, enable: true, max_z: 128, tensor: prior_model.0.atomref.weight}" in text
    assert re.search(r"\{type: ZBL, cutoff_distance: 4\.0, distance_scale: 1\.0e-10, "
                     r"energy_scale: 1\.602176634e-19,\s+atomic_number: \[0, 1, 2,", text)
    assert "rbf_type: gauss" in text and "cutoff_lower: 0.5" in text


def test_cli(tmp_path):
    env = dict(os.environ, PYTHONPATH=WRAPPERS)
    cmd = [sys.executable, "-m", "nnpops", "convert", "--from-torchmdnet", ckpt_path("tn_a"),
           "--output", str(tmp_path), "--name", "my-model"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("wrote ") and (tmp_path / "my-model.yaml").is_file()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("up to date")
    r = subprocess.run(cmd + ["ani2x"], env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "--from-torchmdnet takes no MODEL" in r.stderr
    # units: a model without ZBL takes any; ZBL's scales must agree
    assert convert.main(["--from-torchmdnet", ckpt_path("tn_a"), "--output", str(tmp_path),
                         "--units", "kcal/mol,A", "--name", "kcal"]) == 0
    assert "units: {length: angstrom, energy: \"kcal/mol\"}" in open(tmp_path / "kcal.yaml").read()
    r = subprocess.run([sys.executable, "-m", "nnpops", "convert", "--from-torchmdnet",
                        ckpt_path("tn_c_gauss_lower_zbl"), "--output", str(tmp_path),
                        "--units", "kcal/mol,A"], env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "ZBL prior's energy_scale" in r.stderr
    r = subprocess.run([sys.executable, "-m", "nnpops", "convert", "--from-torchmdnet",
                        ckpt_path("tn_a"), "--output", str(tmp_path), "--units", "eV,furlong"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "unknown length unit" in r.stderr


def test_emitter_round_trip(tmp_path):
    """A checkpoint rewritten by this file's emitter converts to the same weights (so the
    hostile cases below differ from a good checkpoint only where they mean to)."""
    path = rewrite(tmp_path, "tn_a")
    a = convert_tensornet.read_tensornet(str(path))
    b = convert_tensornet.read_tensornet(ckpt_path("tn_a"))
    assert sorted(a.tensors) == sorted(b.tensors)
    for k in a.tensors:
        np.testing.assert_array_equal(a.tensors[k], b.tensors[k])


# ---- unsupported hyperparameters: each a named error --------------------------------------------

UNSUPPORTED = [
    ({"model": "tensornet2"}, "hyperparameter model = 'tensornet2'"),
    ({"model": "equivariant-transformer"}, "hyperparameter model = 'equivariant-transformer'"),
    ({"activation": "gelu"}, "hyperparameter activation = 'gelu'"),
    ({"rbf_type": "bessel"}, "hyperparameter rbf_type = 'bessel'"),
    ({"cutoff_lower": -0.5}, "hyperparameter cutoff_lower = -0.5"),
    ({"cutoff_upper": 0.0}, "hyperparameter cutoff_upper = 0.0"),
    ({"equivariance_invariance_group": "SE(3)"}, "hyperparameter equivariance_invariance_group"),
    ({"output_model": "EquivariantScalar"}, "hyperparameter output_model = 'EquivariantScalar'"),
    ({"output_model": "ScalarPlusWeightedCoulomb"}, "hyperparameter output_model"),
    ({"reduce_op": "mean"}, "hyperparameter reduce_op = 'mean'"),
    ({"prior_model": ["Atomref", "D2"]}, "prior 'D2' is not supported"),
    ({"prior_model": "Coulomb", "prior_args": {}}, "prior 'Coulomb' is not supported"),
    ({"atom_filter": 3}, "hyperparameter atom_filter = 3"),
    ({"precision": 16}, "hyperparameter precision = 16"),
    ({"embedding_dimension": 0}, "hyperparameter embedding_dimension = 0"),
    ({"num_layers": -1}, "hyperparameter num_layers = -1"),
    ({"trainable_rbf": "yes"}, "hyperparameter trainable_rbf = 'yes'"),
    ({"box_vecs": [[1.0, 0.0], [0.0, 1.0]]}, "hyperparameter box_vecs"),
    ({"output_mlp_num_layers": 2}, "hyperparameter output_mlp_num_layers = 2"),
    ({"repulsion": True}, "hyperparameter repulsion = True"),
    ({"coulomb_cutoff": 10.0}, "hyperparameter coulomb_cutoff = 10.0"),
    ({"some_new_option": 1}, "hyperparameter some_new_option = 1: unknown"),
    ({"num_rbf": KeyError}, "hyperparameter num_rbf is missing"),
]


@pytest.mark.parametrize("change,message", UNSUPPORTED,
                         ids=[next(iter(c)) + "-" + str(i) for i, (c, _) in enumerate(UNSUPPORTED)])
def test_unsupported(tmp_path, change, message):
    path = rewrite(tmp_path, "tn_a", hp_change=change)
    assert message in convert_err(path, tmp_path)
    assert not (tmp_path / "out").exists()


def test_supported_variants_accepted(tmp_path):
    """Options that change nothing the converter writes, or that it writes as given."""
    for change in ({"static_shapes": True}, {"max_num_neighbors": 7}, {"activation": "ssp"},
                   {"box_vecs": [[20.0, 0.0, 0.0], [0.0, 20.0, 0.0], [0.0, 0.0, 20.0]]},
                   {"prior_args": [{"max_z": 128, "enable": False}]}, {"standardize": True}):
        path = rewrite(tmp_path, "tn_a", hp_change=change)
        convert_tensornet.read_tensornet(str(path))
    path = rewrite(tmp_path, "tn_a", hp_change={"prior_args": [{"max_z": 128, "enable": False}]})
    convert_tensornet.convert_tensornet(str(path), str(tmp_path), name="noref")
    assert "{type: Atomref, enable: false" in open(tmp_path / "noref.yaml").read()


def test_state_dict_checks(tmp_path):
    hp, sd = load_parts("tn_a")
    w = "model.representation_model.layers.0.linears_tensor.3.weight"
    msg = convert_err(rewrite(tmp_path, "tn_a", sd_change={w: KeyError}), tmp_path)
    assert "state_dict has no representation_model.layers.0.linears_tensor.3.weight" in msg
    msg = convert_err(rewrite(tmp_path, "tn_a", sd_change={w: sd[w][:, :5]}), tmp_path)
    assert "has shape [64, 5], expected [64, 64]" in msg
    msg = convert_err(rewrite(tmp_path, "tn_a", sd_change={"model.extra.q_proj": sd[w]}),
                      tmp_path)
    assert "does not know" in msg and "extra.q_proj" in msg
    bad = sd[w].copy()
    bad[0, 0] = np.nan
    assert "non-finite" in convert_err(rewrite(tmp_path, "tn_a", sd_change={w: bad}), tmp_path)
    assert "mixes float32 and float64" in convert_err(
        rewrite(tmp_path, "tn_a", sd_change={w: sd[w].astype(np.float32)}), tmp_path)
    # old output-network names are renamed
    o = "model.output_model.output_network."
    ren = {o + "layers.0.weight": KeyError, o + "layers.0.bias": KeyError,
           o + "layers.2.weight": KeyError, o + "layers.2.bias": KeyError,
           o + "0.weight": sd[o + "layers.0.weight"], o + "0.bias": sd[o + "layers.0.bias"],
           o + "2.weight": sd[o + "layers.2.weight"], o + "2.bias": sd[o + "layers.2.bias"]}
    ck = convert_tensornet.read_tensornet(str(rewrite(tmp_path, "tn_a", sd_change=ren)))
    np.testing.assert_array_equal(ck.tensors["output_model.output_network.layers.2.weight"],
                                  sd[o + "layers.2.weight"])


# ---- hostile checkpoints: refused, nothing runs -------------------------------------------------

class _System:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


class _Eval:
    def __init__(self, code):
        self.code = code

    def __reduce__(self):
        import builtins
        return (builtins.eval, (self.code,))


def test_hostile_real_pickles(tmp_path):
    """Pickles made by Python's own pickler from objects whose __reduce__ names os.system or
    builtins.eval: the call is never made."""
    marker = tmp_path / "pwned"
    for payload, needle in ((_System("touch %s" % marker), "system"),
                            (_Eval("open(%r, 'w').write('x')" % str(marker)), "builtins.eval")):
        for where in ("top", "hp", "sd"):
            hp, sd = load_parts("tn_a")
            if where == "hp":
                hp["activation"] = payload
            elif where == "sd":
                sd["model.mean"] = payload
            top = {"hyper_parameters": hp, "state_dict": sd}
            if where == "top":
                top = payload
            # a real pickle of the structure, tensors replaced by plain lists
            data = pickle.dumps(_plain(top), protocol=4)
            path = tmp_path / ("h_%s.ckpt" % where)
            with zipfile.ZipFile(path, "w") as z:
                z.writestr("archive/data.pkl", data)
            msg = convert_err(path, tmp_path)
            assert needle in msg, msg
            assert not marker.exists()


def _plain(obj):
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


def test_hostile_globals(tmp_path):
    marker = tmp_path / "pwned"
    # os.system inside hyper_parameters: a named error
    path = rewrite(tmp_path, "tn_a",
                   hp_change={"prior_args": [Call("os", "system", ("touch %s" % marker,))]})
    msg = convert_err(path, tmp_path)
    assert "os.system" in msg and "hyper_parameters" in msg
    # a global inside state_dict
    path = rewrite(tmp_path, "tn_a", sd_change={"model.std": Call("builtins", "eval", ("1",))})
    assert "builtins.eval" in convert_err(path, tmp_path)
    # outside both (Lightning's callbacks, optimizer states): read as inert, never called
    path = rewrite(tmp_path, "tn_a", extra={"callbacks": Call("os", "system",
                                                              ("touch %s" % marker,))})
    convert_tensornet.convert_tensornet(str(path), str(tmp_path / "ok"))
    assert not marker.exists()
    # the whole checkpoint a call
    path = write_ckpt(str(tmp_path / "top.ckpt"), Call("subprocess", "getoutput",
                                                       ("touch %s" % marker,)))
    assert "subprocess.getoutput" in convert_err(path, tmp_path)
    assert not marker.exists()
    # an argparse Namespace or Lightning AttributeDict is read as the mapping it holds
    hp, sd = load_parts("tn_a")
    top_path = str(tmp_path / "attr.ckpt")
    e = Emitter()
    e.out += b"}("
    e.emit("hyper_parameters")
    e.glob("lightning.fabric.utilities.data", "AttributeDict")
    e.out += b")R"
    e.emit(hp)
    e.out += b"b"  # BUILD: state = the mapping
    e.emit("state_dict")
    e.emit(sd)
    e.out += b"u"
    with zipfile.ZipFile(top_path, "w") as z:
        z.writestr("archive/data.pkl", e.finish())
        for key, data in e.storages.items():
            z.writestr("archive/data/" + key, data)
    ck = convert_tensornet.read_tensornet(top_path)
    assert ck.cfg["num_layers"] == 2


def test_hostile_tensors(tmp_path):
    hp, sd = load_parts("tn_a")
    w = "model.representation_model.linear.weight"
    arr = sd[w]
    cases = [
        (Tensor(arr, numel=arr.size * 4), "shorter than"),                   # storage too short
        (Tensor(arr, size=(64, 10 ** 9)), "is too large"),                  # overflowing shape
        (Tensor(arr, stride=(2 ** 62, 1)), "reach element"),                # overflowing stride
        (Tensor(arr, stride=(-1, 1)), "not non-negative"),                  # negative stride
        (Tensor(arr, offset=10), "reach element"),                          # offset past the end
        (Tensor(arr, size=(64, 192, 1), stride=(192, 1)), "do not match"),  # rank mismatch
        (Tensor(arr, storage="UntypedStorageX"), "Opaque"),                 # unknown storage
    ]
    for t, needle in cases:
        path = rewrite(tmp_path, "tn_a", sd_change={w: t})
        msg = convert_err(path, tmp_path)
        assert needle in msg or "persistent id" in msg, (needle, msg)


def test_hostile_archives(tmp_path):
    good = open(ckpt_path("tn_a"), "rb").read()
    # truncated
    p = tmp_path / "trunc.ckpt"
    p.write_bytes(good[: len(good) // 2])
    assert "zip" in convert_err(p, tmp_path)
    # not a zip; a legacy torch file
    p.write_bytes(b"hello world")
    assert "not a zip archive" in convert_err(p, tmp_path)
    p.write_bytes(pickle.dumps({"a": 1}, protocol=2))
    assert "legacy" in convert_err(p, tmp_path)
    # oversized data.pkl (the limit lowered for the test)
    saved = torchzip.MAX_PICKLE_BYTES
    torchzip.MAX_PICKLE_BYTES = 1000
    try:
        assert "over the limit" in convert_err(ckpt_path("tn_a"), tmp_path)
    finally:
        torchzip.MAX_PICKLE_BYTES = saved
    # a storage entry missing, two data.pkl, a storage key with a path
    p = tmp_path / "nostorage.ckpt"
    with zipfile.ZipFile(ckpt_path("tn_a")) as zin, zipfile.ZipFile(p, "w") as zout:
        for info in zin.infolist():
            if info.filename != "tn_a/data/5":
                zout.writestr(info, zin.read(info))
    assert "missing entry tn_a/data/5" in convert_err(p, tmp_path)
    p = tmp_path / "two.ckpt"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("a/data.pkl", b"\x80\x02}.")
        z.writestr("b/data.pkl", b"\x80\x02}.")
    assert "exactly one" in convert_err(p, tmp_path)
    # a zip bomb: a compressed storage that expands past the limit
    p = tmp_path / "bomb.ckpt"
    hp, sd = load_parts("tn_a")
    write_ckpt(str(p), {"hyper_parameters": hp, "state_dict": sd})
    with zipfile.ZipFile(p) as zin:
        entries = [(i, zin.read(i)) for i in zin.infolist()]
    saved = torchzip.MAX_STORAGE_BYTES
    torchzip.MAX_STORAGE_BYTES = 100000
    try:
        with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
            for info, data in entries:
                if info.filename.endswith("/data/0"):
                    data = data + b"\0" * 10 ** 6
                z.writestr(info.filename, data)
        assert "bytes" in convert_err(p, tmp_path)
    finally:
        torchzip.MAX_STORAGE_BYTES = saved


# ---- ensembles ----------------------------------------------------------------------------------

def test_ensemble_of_checkpoints(tmp_path):
    """Two checkpoints of one architecture: one model, each member's tensors under m{k}., the
    members' mean and std as lists in member order; the same model from torchmd-net's zip of
    checkpoints (top-level *.ckpt files, name order) and from the command line."""
    pair = [ckpt_path("tn_a"), ckpt_path("tn_a_member2")]
    status, yaml_path, detail = convert_tensornet.convert_tensornet(pair, str(tmp_path),
                                                                    name="ens")
    assert status == "written" and "ensemble of 2" in detail
    text = open(yaml_path, encoding="ascii").read()
    assert "\n  ensemble_size: 2\n" in text
    shas = [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in pair]
    assert ('source: [{file: tn_a.ckpt, sha256: "%s"}, {file: tn_a_member2.ckpt, sha256: "%s"}]'
            % tuple(shas)) in text
    parts = [load_parts(n) for n in ("tn_a", "tn_a_member2")]
    means = [float(p[1]["model.mean"]) for p in parts]
    stds = [float(p[1]["model.std"]) for p in parts]
    assert re.search(r"^  mean: \[(.*)\]$", text, re.M).group(1).split(", ") == \
        [repr(m) for m in means]
    assert [float(x) for x in re.search(r"^  std: \[(.*)\]$", text, re.M).group(1)
            .split(", ")] == stds
    _, weights, _ = read_weights(tmp_path / "ens.safetensors")
    single = {}
    for k, n in enumerate(("tn_a", "tn_a_member2")):
        convert_tensornet.convert_tensornet(ckpt_path(n), str(tmp_path / "one"))
        _, w1, _ = read_weights(tmp_path / "one" / (n + ".safetensors"))
        for t, a in w1.items():
            np.testing.assert_array_equal(weights["m%d.%s" % (k, t)], a)
        single[k] = w1
    assert len(weights) == len(single[0]) + len(single[1])
    # torchmd-net's zip of checkpoints: names sorted, so b_... after a_...
    zpath = tmp_path / "ensemble.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.write(pair[1], "b_member2.ckpt")
        z.write(pair[0], "a_first.ckpt")
        z.writestr("README.txt", "not a member")
    status, zyaml, _ = convert_tensornet.convert_tensornet(str(zpath), str(tmp_path / "z"))
    assert status == "written" and zyaml.endswith("ensemble.yaml")
    _, zweights, _ = read_weights(tmp_path / "z" / "ensemble.safetensors")
    assert sorted(zweights) == sorted(weights)
    for t in weights:
        np.testing.assert_array_equal(zweights[t], weights[t])
    ztext = open(zyaml, encoding="ascii").read()
    assert "{file: a_first.ckpt, sha256: \"%s\"}" % shas[0] in ztext
    # the command line: several files after --from-torchmdnet
    env = dict(os.environ, PYTHONPATH=WRAPPERS)
    r = subprocess.run([sys.executable, "-m", "nnpops", "convert", "--from-torchmdnet"] + pair
                       + ["--output", str(tmp_path / "cli"), "--name", "ens"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert open(tmp_path / "cli" / "ens.yaml").read() == text
    r = subprocess.run([sys.executable, "-m", "nnpops", "convert", "--from-torchmdnet"] + pair
                       + ["--output", str(tmp_path / "cli"), "--name", "ens"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("up to date")


@pytest.mark.parametrize("other, setting", [
    ("tn_c_gauss_lower_zbl", "embedding_dimension"),
    ("tn_b_oldlayout_so3", "embedding_dimension"),
])
def test_ensemble_architectures_differ(tmp_path, other, setting):
    with pytest.raises(convert_tensornet.EnsembleMismatchError) as info:
        convert_tensornet.convert_tensornet([ckpt_path("tn_a"), ckpt_path(other)],
                                            str(tmp_path))
    msg = str(info.value)
    assert "ensemble members must share the architecture" in msg and setting in msg, msg
    assert not os.path.exists(tmp_path / "tn_a.yaml")


@pytest.mark.parametrize("hp_change, setting", [
    ({"activation": "tanh"}, "activation = silu, x.ckpt has tanh"),
    ({"cutoff_upper": 4.5}, "cutoff_upper = 5.0, x.ckpt has 4.5"),
    ({"num_rbf": 16}, None),  # the tensors' shapes then differ: the checkpoint itself is refused
    ({"equivariance_invariance_group": "SO(3)"}, "group"),
])
def test_ensemble_hyperparameters_differ(tmp_path, hp_change, setting):
    """A member whose hyperparameters differ (weights alike) is a named error; one that differs
    only in a training option (the seed, the learning rate) is a member like any other."""
    odd = rewrite(tmp_path, "tn_a_member2", hp_change=hp_change)
    with pytest.raises(ConvertError) as info:
        convert_tensornet.convert_tensornet([ckpt_path("tn_a"), odd], str(tmp_path / "out"))
    if setting is not None:
        assert isinstance(info.value, convert_tensornet.EnsembleMismatchError)
        assert setting in str(info.value), str(info.value)
    seeded = rewrite(tmp_path, "tn_a_member2", hp_change={"seed": 7, "lr": 1e-3},
                     fname="seeded.ckpt")
    status, _, detail = convert_tensornet.convert_tensornet([ckpt_path("tn_a"), seeded],
                                                            str(tmp_path / "ok"), name="ok")
    assert status == "written" and "ensemble of 2" in detail


def test_ensemble_zip_errors(tmp_path):
    zpath = tmp_path / "bad.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.write(ckpt_path("tn_a"), "a.ckpt")
        z.writestr("b.ckpt", b"not a checkpoint")
    msg = convert_err(zpath, tmp_path)
    assert "bad.zip:b.ckpt" in msg, msg
    with zipfile.ZipFile(tmp_path / "mixed.zip", "w") as z:
        z.write(ckpt_path("tn_a"), "a.ckpt")
        z.write(ckpt_path("tn_c_gauss_lower_zbl"), "c.ckpt")
    with pytest.raises(convert_tensornet.EnsembleMismatchError) as info:
        convert_tensornet.convert_tensornet(str(tmp_path / "mixed.zip"), str(tmp_path / "o"))
    assert "a.ckpt has embedding_dimension = 64, c.ckpt has" in str(info.value)
