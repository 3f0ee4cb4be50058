"""Tests of the NeuroChem -> nnpops model converter (wrappers/nnpops/convert.py).

Run:  PYTHONPATH=wrappers python3 -m pytest -q tests/model/test_convert.py

The tests that need the published ANI files look for them the way the converter does
(NNPOPS_NEUROCHEM_PATH, ../shared/models/neurochem, next to the repository) and are skipped when
they are absent.  PyYAML is optional: the structure is checked with regular expressions, and once
more with PyYAML when it is installed.
"""

import bz2
import hashlib
import io
import json
import os
import re
import struct
import sys
import tarfile
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "wrappers"))

from nnpops import convert, modelpath  # noqa: E402

ANI1X_ARCHIVE = "ani-1x_8x"


# ------------------------------------------------------------------------------------------------
# helpers



def f32(x):
    """x rounded to float32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]

def read_safetensors(path):
    """(header dict, data offset, file size) of a safetensors file, checking its framing."""
    with open(path, "rb") as f:
        raw = f.read(8)
        assert len(raw) == 8
        (n,) = struct.unpack("<Q", raw)
        header_bytes = f.read(n)
    assert len(header_bytes) == n
    assert (8 + n) % 8 == 0, "header not padded to a multiple of 8"
    assert header_bytes.startswith(b"{")
    assert header_bytes.rstrip(b" ").endswith(b"}")
    header = json.loads(header_bytes.decode("ascii"))
    return header, 8 + n, os.path.getsize(path)


def tensor_bytes(path, header, data_start, name):
    begin, end = header[name]["data_offsets"]
    with open(path, "rb") as f:
        f.seek(data_start + begin)
        return f.read(end - begin)


def yaml_value(text, key, indent=0):
    """The text after 'key:' on a line with exactly `indent` spaces (first match)."""
    m = re.search(r"^%s%s: (.*)$" % (" " * indent, re.escape(key)), text, re.M)
    assert m, "no %r at indent %d" % (key, indent)
    return m.group(1).strip()


def flow_list(value):
    assert value.startswith("[") and value.endswith("]"), value
    return [x.strip().strip('"') for x in value[1:-1].split(",") if x.strip()]


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(argv, capsys):
    rc = convert.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def source_dir():
    directory, looked = convert.find_source(ANI1X_ARCHIVE)
    if directory is None:
        pytest.skip("NeuroChem files %s.* not found (looked in %s)" % (ANI1X_ARCHIVE, looked))
    return directory


@pytest.fixture(scope="module")
def ani1x_dir(source_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    rc = convert.main(["--source", source_dir, "--output", str(out), "ani1x"])
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def archive_members(source_dir):
    """Raw bytes of a few archive members, read independently of the converter."""
    want = {
        "ani-1x_8x/train3/networks/ANN-H.nnf-l1.wparam",
        "ani-1x_8x/train3/networks/ANN-H.nnf-l1.bparam",
        "ani-1x_8x/train0/networks/ANN-N.nnf-l4.wparam",
    }
    found = {}
    with tarfile.open(os.path.join(source_dir, ANI1X_ARCHIVE + ".tar.xz"), "r:xz") as tar:
        for member in tar:
            name = member.name[2:] if member.name.startswith("./") else member.name
            if name in want:
                found[name] = tar.extractfile(member).read()
    assert set(found) == want
    return found


# ------------------------------------------------------------------------------------------------
# ANI-1x from the published files


def test_yaml_structure(ani1x_dir):
    text = (ani1x_dir / "ani1x.yaml").read_text(encoding="ascii")
    assert yaml_value(text, "format") == "nnpops-model"
    assert yaml_value(text, "format_version") == "1"
    assert yaml_value(text, "name") == "ani1x"
    assert yaml_value(text, "type") == "ani"
    assert "8-member" in yaml_value(text, "description")
    assert yaml_value(text, "units") == "{length: angstrom, energy: hartree}"
    species = flow_list(yaml_value(text, "species"))
    assert species == ["H", "C", "N", "O"]
    assert yaml_value(text, "file", 2) == "ani1x.safetensors"
    assert yaml_value(text, "ensemble_size", 2) == "8"
    assert yaml_value(text, "activation", 2) == "{type: celu, alpha: 0.1}"
    assert yaml_value(text, "tensors", 2) == '"m{member}.{element}.l{layer}.{kind}"'

    # descriptor constants: float32 values, printed so that they read back exactly
    radial_cut = float(re.search(r"^  radial:\n    cutoff: (\S+)$", text, re.M).group(1))
    angular_cut = float(re.search(r"^  angular:\n    cutoff: (\S+)$", text, re.M).group(1))
    assert radial_cut == f32(5.2) and angular_cut == 3.5
    shifts = [float(x) for x in flow_list(re.search(r"^  radial:\n.*\n.*\n    shifts: (.*)$",
                                                    text, re.M).group(1))]
    assert len(shifts) == 16 and shifts[0] == f32(0.9) and all(f32(x) == x for x in shifts)
    sae = [float(x) for x in flow_list(yaml_value(text, "self_energies", 2))]
    # float32-rounded, as torchani holds them
    assert sae == [f32(x) for x in (-0.600952980000, -38.08316124000, -54.70775770000, -75.19446356000)]

    # AEV length 384 = 4*1*16 + 10*1*1*4*8, and the network widths
    nets = {}
    for sym in species:
        key = '"N"' if sym == "N" else sym
        nets[sym] = [int(x) for x in flow_list(yaml_value(text, key, 4))]
    assert nets["H"] == [384, 160, 128, 96, 1]
    assert all(w[0] == 384 and w[-1] == 1 for w in nets.values())


def test_yaml_with_pyyaml(ani1x_dir):
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load((ani1x_dir / "ani1x.yaml").read_text(encoding="ascii"))
    assert doc["format"] == "nnpops-model" and doc["format_version"] == 1
    assert doc["species"] == ["H", "C", "N", "O"]
    assert list(doc["ani"]["networks"]) == ["H", "C", "N", "O"]
    section0 = struct.unpack("<f", struct.pack("<f", 0.19634954))[0]
    assert doc["ani"]["angular"]["sections"][0] == section0
    assert isinstance(doc["weights"]["sha256"], str) and len(doc["weights"]["sha256"]) == 64
    assert doc["ani"]["tensors"] == "m{member}.{element}.l{layer}.{kind}"


def test_safetensors_layout(ani1x_dir):
    path = ani1x_dir / "ani1x.safetensors"
    header, data_start, size = read_safetensors(path)
    meta = header.pop("__metadata__")
    assert meta["format"] == "nnpops" and all(isinstance(v, str) for v in meta.values())
    names = sorted(header)
    # contiguous, in sorted name order, no gaps, ending at the end of the file
    offset = 0
    for name in names:
        t = header[name]
        assert t["dtype"] == "F32"
        begin, end = t["data_offsets"]
        assert begin == offset
        count = 1
        for n in t["shape"]:
            count *= n
        assert end - begin == 4 * count
        offset = end
    assert data_start + offset == size
    assert len(names) == 8 * 4 * 4 * 2
    # sha256 in the YAML covers the whole file
    text = (ani1x_dir / "ani1x.yaml").read_text(encoding="ascii")
    assert yaml_value(text, "sha256", 2) == '"%s"' % sha256_file(path)


def test_tensor_shapes_and_data(ani1x_dir, archive_members):
    path = ani1x_dir / "ani1x.safetensors"
    header, data_start, _ = read_safetensors(path)
    shapes = [header["m%d.H.l%d.weight" % (m, l)]["shape"] for m in (0, 7) for l in range(4)]
    assert shapes == [[160, 384], [128, 160], [96, 128], [1, 96]] * 2
    assert [header["m5.H.l%d.bias" % l]["shape"] for l in range(4)] == [[160], [128], [96], [1]]
    assert "m8.H.l0.weight" not in header and "m0.H.l4.weight" not in header
    assert (tensor_bytes(path, header, data_start, "m3.H.l0.weight")
            == archive_members["ani-1x_8x/train3/networks/ANN-H.nnf-l1.wparam"])
    assert (tensor_bytes(path, header, data_start, "m3.H.l0.bias")
            == archive_members["ani-1x_8x/train3/networks/ANN-H.nnf-l1.bparam"])
    assert (tensor_bytes(path, header, data_start, "m0.N.l3.weight")
            == archive_members["ani-1x_8x/train0/networks/ANN-N.nnf-l4.wparam"])


def test_member_model(source_dir, ani1x_dir, tmp_path, capsys):
    rc, out, err = run(["--source", source_dir, "--output", str(tmp_path), "--member", "3",
                        "ani1x"], capsys)
    assert rc == 0, err
    yaml_path = tmp_path / "ani1x-m3.yaml"
    assert str(yaml_path) in out
    text = yaml_path.read_text(encoding="ascii")
    assert yaml_value(text, "name") == "ani1x-m3"
    assert yaml_value(text, "ensemble_size", 2) == "1"
    assert "member 3" in yaml_value(text, "description")
    assert yaml_value(text, "file", 2) == "ani1x-m3.safetensors"
    one_path = tmp_path / "ani1x-m3.safetensors"
    assert yaml_value(text, "sha256", 2) == '"%s"' % sha256_file(one_path)
    one, one_start, _ = read_safetensors(one_path)
    full, full_start, _ = read_safetensors(ani1x_dir / "ani1x.safetensors")
    one.pop("__metadata__")
    assert {n.split(".")[0] for n in one} == {"m0"}
    assert len(one) == 4 * 4 * 2
    for name in one:
        twin = "m3" + name[2:]
        assert one[name]["shape"] == full[twin]["shape"]
        assert (tensor_bytes(one_path, one, one_start, name)
                == tensor_bytes(ani1x_dir / "ani1x.safetensors", full, full_start, twin))
    # the YAML apart from name, description, weights and ensemble size equals the full model's
    full_text = (ani1x_dir / "ani1x.yaml").read_text(encoding="ascii")
    drop = re.compile(r"^(name|description|  file|  sha256|  ensemble_size):.*$", re.M)
    assert drop.sub("", text) == drop.sub("", full_text)


def test_member_out_of_range(source_dir, tmp_path, capsys):
    rc, out, err = run(["--source", source_dir, "--output", str(tmp_path), "--member", "8",
                        "ani1x"], capsys)
    assert rc == 2
    assert err.startswith("nnpops convert: error:") and "member" in err


def test_second_run_is_up_to_date(source_dir, tmp_path, capsys):
    argv = ["--source", source_dir, "--output", str(tmp_path), "ani1x"]
    rc, out, err = run(argv, capsys)
    assert rc == 0 and "wrote" in out
    mtime = os.stat(tmp_path / "ani1x.safetensors").st_mtime_ns
    start = time.monotonic()
    rc, out, err = run(argv, capsys)
    elapsed = time.monotonic() - start
    assert rc == 0, err
    assert "up to date" in out
    assert elapsed < 1.0
    assert os.stat(tmp_path / "ani1x.safetensors").st_mtime_ns == mtime
    # --force rewrites
    rc, out, err = run(argv + ["--force"], capsys)
    assert rc == 0 and "wrote" in out
    # a changed weights file (size/mtime no longer match the stamp) is rewritten too
    with open(tmp_path / "ani1x.safetensors", "r+b") as f:
        f.truncate(1000)
    rc, out, err = run(argv, capsys)
    assert rc == 0 and "wrote" in out
    yaml_text = (tmp_path / "ani1x.yaml").read_text(encoding="ascii")
    digest = sha256_file(tmp_path / "ani1x.safetensors")
    assert yaml_value(yaml_text, "sha256", 2) == '"%s"' % digest
    # and so is a hand-edited YAML
    (tmp_path / "ani1x.yaml").write_text(yaml_text.replace("ensemble_size: 8", "ensemble_size: 2"))
    rc, out, err = run(argv, capsys)
    assert rc == 0 and "wrote" in out
    assert "ensemble_size: 8" in (tmp_path / "ani1x.yaml").read_text(encoding="ascii")
    # no temporary files are left behind
    assert sorted(os.listdir(tmp_path)) == ["ani1x.safetensors", "ani1x.stamp", "ani1x.yaml"]


def test_up_to_date_without_source(source_dir, tmp_path, capsys):
    argv = ["--output", str(tmp_path), "ani1x"]
    rc, _, err = run(argv + ["--source", source_dir], capsys)
    assert rc == 0, err
    rc, out, err = run(argv + ["--source", str(tmp_path / "nowhere")], capsys)
    assert rc == 0 and "up to date" in out


def test_corrupt_archive(source_dir, tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    with open(os.path.join(source_dir, ANI1X_ARCHIVE + ".info"), "rb") as f:
        (src / (ANI1X_ARCHIVE + ".info")).write_bytes(f.read())
    archive = src / (ANI1X_ARCHIVE + ".tar.xz")
    # not xz at all
    archive.write_bytes(b"this is not an xz archive\n" * 100)
    rc, out, err = run(["--source", str(src), "--output", str(tmp_path / "out"), "ani1x"], capsys)
    assert rc == 2
    assert err.startswith("nnpops convert: error:") and str(archive) in err
    assert not (tmp_path / "out" / "ani1x.yaml").exists()
    # a truncated copy of the real archive
    with open(os.path.join(source_dir, ANI1X_ARCHIVE + ".tar.xz"), "rb") as f:
        archive.write_bytes(f.read(1 << 20))
    rc, out, err = run(["--source", str(src), "--output", str(tmp_path / "out"), "ani1x"], capsys)
    assert rc == 2
    assert err.startswith("nnpops convert: error:") and ANI1X_ARCHIVE in err


# ------------------------------------------------------------------------------------------------
# Small synthetic NeuroChem archives (no published files needed)

TINY_PARAMS = """TM = 1
Rcr = 5.2000e+00
Rca = 3.5000e+00
EtaR = [1.6000000e+01]
ShfR = [9.0000000e-01,1.5000000e+00]
Zeta = [3.2000000e+01]
ShfZ = [1.9634954e-01]
EtaA = [8.0000000e+00]
ShfA = [9.0000000e-01]
Atyp = [H,N]
"""
# AEV length: 2*1*2 + 3*1*1*1*1 = 7
TINY_SAE = "H,0=-0.600952980000\nN,1=-54.70775770000\n"


def _nnf(el, layers, inputsize=7):
    text = "inputsize=%d;\natom_net %s $\n" % (inputsize, el)
    for i, (nodes, act, block) in enumerate(layers, 1):
        text += ("layer [\nnodes=%d;\nactivation=%d;\ntype=0;\nblocksize=%d;\ndropout=0;\n"
                 "weights=FILE:ANN-%s.nnf-l%d.wparam[%d];\n"
                 "biases=FILE:ANN-%s.nnf-l%d.bparam[%d];\n]\n"
                 % (nodes, act, block, el, i, nodes * block, el, i, nodes))
    text += "\n $ \n"
    raw = text.encode("ascii")
    return b"%d=\n" % len(raw) + bz2.compress(raw)


def make_tiny_source(directory, mutate=None):
    """A 2-member, 2-element NeuroChem archive named ani-1x_8x; mutate(files) may alter it."""
    directory.mkdir(parents=True, exist_ok=True)
    root = ANI1X_ARCHIVE
    files = {
        root + "/tiny.params": TINY_PARAMS.encode(),
        root + "/sae_linfit.dat": TINY_SAE.encode(),
    }
    layers = [(4, 9, 7), (3, 9, 4), (1, 6, 3)]
    value = 0
    for k in range(2):
        net = "%s/train%d/networks/" % (root, k)
        for el in ("H", "N"):
            files[net + "ANN-%s.nnf" % el] = _nnf(el, layers)
            for i, (nodes, _, block) in enumerate(layers, 1):
                w = [float(value + j) for j in range(nodes * block)]
                value += len(w)
                files[net + "ANN-%s.nnf-l%d.wparam" % (el, i)] = struct.pack("<%df" % len(w), *w)
                files[net + "ANN-%s.nnf-l%d.bparam" % (el, i)] = struct.pack("<%df" % nodes,
                                                                             *([-1.5] * nodes))
    if mutate:
        mutate(files)
    with tarfile.open(directory / (root + ".tar.xz"), "w:xz", preset=0) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (directory / (root + ".info")).write_text(
        "%s/tiny.params\n%s/sae_linfit.dat\n%s/train\n2\n" % (root, root, root))
    return files


def test_tiny_model(tmp_path, capsys):
    files = make_tiny_source(tmp_path / "src")
    rc, out, err = run(["--source", str(tmp_path / "src"), "--output", str(tmp_path / "out"),
                        "ani1x"], capsys)
    assert rc == 0, err
    text = (tmp_path / "out" / "ani1x.yaml").read_text(encoding="ascii")
    assert yaml_value(text, "species") == '[H, "N"]'
    assert yaml_value(text, "shifts", 4).startswith("[0.8999999761581421, 1.5]")
    assert yaml_value(text, "sections", 4) == "[0.19634954631328583]"
    assert yaml_value(text, "self_energies", 2) == "[%r, %r]" % (f32(-0.60095298), f32(-54.7077577))
    assert yaml_value(text, "H", 4) == "[7, 4, 3, 1]"
    assert yaml_value(text, '"N"', 4) == "[7, 4, 3, 1]"
    assert yaml_value(text, "ensemble_size", 2) == "2"
    path = tmp_path / "out" / "ani1x.safetensors"
    header, start, size = read_safetensors(path)
    meta = header.pop("__metadata__")
    assert meta["members"] == "0,1"
    assert len(header) == 2 * 2 * 3 * 2
    for k in range(2):
        for el in ("H", "N"):
            for li in range(3):
                net = "%s/train%d/networks/ANN-%s.nnf-l%d." % (ANI1X_ARCHIVE, k, el, li + 1)
                base = "m%d.%s.l%d." % (k, el, li)
                assert tensor_bytes(path, header, start, base + "weight") == files[net + "wparam"]
                assert tensor_bytes(path, header, start, base + "bias") == files[net + "bparam"]
    assert header["m1.N.l1.weight"]["shape"] == [3, 4]


def _set(name, data):
    def mutate(files):
        files["%s/train1/networks/%s" % (ANI1X_ARCHIVE, name)] = data
    return mutate


def _drop(name):
    def mutate(files):
        del files["%s/train1/networks/%s" % (ANI1X_ARCHIVE, name)]
    return mutate


@pytest.mark.parametrize("mutate, needles", [
    (_set("ANN-N.nnf", _nnf("N", [(4, 5, 7), (3, 9, 4), (1, 6, 3)])), ["ANN-N.nnf", "activation"]),
    (_set("ANN-N.nnf", _nnf("N", [(4, 9, 7), (3, 6, 4), (1, 6, 3)])), ["ANN-N.nnf", "hidden"]),
    (_set("ANN-N.nnf", _nnf("N", [(4, 9, 7), (3, 9, 4), (1, 9, 3)])), ["ANN-N.nnf", "output"]),
    (_set("ANN-N.nnf", _nnf("N", [(4, 9, 7), (3, 9, 5), (1, 6, 3)])), ["ANN-N.nnf", "blocksize"]),
    (_set("ANN-N.nnf", _nnf("N", [(4, 9, 8), (3, 9, 4), (1, 6, 3)], 8)), ["ANN-N.nnf", "AEV"]),
    (_set("ANN-N.nnf", b"12=\nnot bz2"), ["ANN-N.nnf", "bz2"]),
    (_set("ANN-N.nnf-l2.wparam", b"\0" * 44), ["ANN-N.nnf-l2.wparam", "48"]),
    (_drop("ANN-N.nnf-l3.bparam"), ["ANN-N.nnf-l3.bparam", "missing"]),
    (_drop("ANN-H.nnf"), ["train1/networks/ANN-H.nnf", "missing"]),
])
def test_tiny_model_errors(tmp_path, capsys, mutate, needles):
    make_tiny_source(tmp_path / "src", mutate)
    rc, out, err = run(["--source", str(tmp_path / "src"), "--output", str(tmp_path / "out"),
                        "ani1x"], capsys)
    assert rc == 2
    assert err.startswith("nnpops convert: error:")
    for needle in needles:
        assert needle in err
    assert not (tmp_path / "out" / "ani1x.yaml").exists()


def test_source_not_found(tmp_path, capsys, monkeypatch):
    rc, out, err = run(["--source", str(tmp_path / "nowhere"), "--output", str(tmp_path), "ani1x"],
                       capsys)
    assert rc == 2
    assert err.startswith("nnpops convert: error:")
    assert "--source" in err and str(tmp_path / "nowhere") in err


def test_bad_arguments(tmp_path, capsys):
    rc, out, err = run(["--output", str(tmp_path), "ani3x"], capsys)
    assert rc == 2 and err.startswith("nnpops convert: error:") and "ani3x" in err
    rc, out, err = run(["--output", str(tmp_path), "--member", "-1", "ani1x"], capsys)
    assert rc == 2 and err.startswith("nnpops convert: error:")
    rc, out, err = run(["--no-such-option"], capsys)
    assert rc == 2 and err.startswith("nnpops convert: error:")


def test_env_source_and_output(tmp_path, capsys, monkeypatch):
    make_tiny_source(tmp_path / "src")
    monkeypatch.setenv("NNPOPS_NEUROCHEM_PATH", "%s%s%s" % (tmp_path / "empty", os.pathsep,
                                                           tmp_path / "src"))
    monkeypatch.setenv("NNPOPS_MODEL_PATH", "%s%s%s" % (tmp_path / "models", os.pathsep,
                                                       tmp_path / "other"))
    rc, out, err = run(["ani1x"], capsys)
    assert rc == 0, err
    assert (tmp_path / "models" / "ani1x.yaml").is_file()
    assert modelpath.find_model("ani1x") == str(tmp_path / "models" / "ani1x.yaml")


def test_yaml_scalars():
    assert convert.yaml_float(1e-05) == "1.0e-05"
    assert convert.yaml_float(1.5e300) == "1.5e+300"
    assert convert.yaml_float(3.0) == "3.0"
    assert convert.yaml_float(-0.5978583943827134) == "-0.5978583943827134"
    assert convert.yaml_str("Cl") == "Cl"
    assert convert.yaml_str("N") == '"N"'
    assert convert.yaml_str("m{member}") == '"m{member}"'


# ------------------------------------------------------------------------------------------------
# modelpath


def test_modelpath(tmp_path, monkeypatch):
    a, b, cache = tmp_path / "a", tmp_path / "b", tmp_path / "xdg"
    for d in (a, b, cache / "nnpops" / "models"):
        d.mkdir(parents=True)
    monkeypatch.setenv("NNPOPS_MODEL_PATH", "%s%s%s%s" % (a, os.pathsep, os.pathsep, b))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    assert modelpath.model_search_dirs() == [str(a), str(b), str(cache / "nnpops" / "models")]
    assert modelpath.default_output_dir() == str(a)
    (b / "m.yaml").write_text("x")
    (cache / "nnpops" / "models" / "c.yaml").write_text("x")
    assert modelpath.find_model("m") == str(b / "m.yaml")
    assert modelpath.find_model("c") == str(cache / "nnpops" / "models" / "c.yaml")
    (a / "m.yaml").write_text("x")
    assert modelpath.find_model("m") == str(a / "m.yaml")
    assert modelpath.find_model("nothing") is None
    assert modelpath.find_model(str(b / "m.yaml")) == str(b / "m.yaml")
    assert modelpath.find_model(str(b / "missing.yml")) is None
    monkeypatch.delenv("NNPOPS_MODEL_PATH")
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    home_cache = str(tmp_path / "home" / ".cache" / "nnpops" / "models")
    assert modelpath.model_search_dirs() == [home_cache]
    assert modelpath.default_output_dir() == home_cache
