"""Tests of ``nnpops convert --download`` (wrappers/nnpops/download.py), offline.

The published release archive cannot be reached from the test machines, so a test builds a zip
laid out like it (``ani-model-zoo-ani-2x/resources/<archive>.info`` and ``<archive>/``) from the
local copy of the published ANI-1x files and serves it from 127.0.0.1 (or as ``file://``).  The
digests it is checked against are the package's own list (neurochem.sha256), not recomputed here.

Run:  PYTHONPATH=wrappers python3 -m pytest -q tests/model/test_download.py
"""

import hashlib
import http.server
import json
import os
import sys
import tarfile
import threading
import zipfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "wrappers"))

from nnpops import convert, download  # noqa: E402

ARCHIVE = "ani-1x_8x"
ROOT = "ani-model-zoo-ani-2x/resources/"


def _published_files():
    directory, looked = convert.find_source(ARCHIVE)
    if directory is None or not os.path.isfile(os.path.join(directory, ARCHIVE + ".tar.xz")):
        pytest.skip("NeuroChem files %s.* not found (looked in %s)" % (ARCHIVE, looked))
    files = {}
    with tarfile.open(os.path.join(directory, ARCHIVE + ".tar.xz"), "r:xz") as tar:
        for member in tar:
            if member.isreg():
                files[member.name] = tar.extractfile(member).read()
    with open(os.path.join(directory, ARCHIVE + ".info"), "rb") as f:
        files[ARCHIVE + ".info"] = f.read()
    return directory, files


def _write_zip(path, files):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for name in sorted(files):
            zf.writestr(ROOT + name, files[name])
    return path


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    directory, files = _published_files()
    base = tmp_path_factory.mktemp("release")
    good = _write_zip(base / "ani-2x.zip", files)
    bad_files = dict(files)
    name = ARCHIVE + "/sae_linfit.dat"
    bad_files[name] = bad_files[name].replace(b"-0.", b"-1.", 1)
    assert bad_files[name] != files[name]
    bad = _write_zip(base / "altered.zip", bad_files)
    # the reference: the same model converted from the local .tar.xz
    out = tmp_path_factory.mktemp("local")
    assert convert.main(["--source", directory, "--output", str(out), "ani1x"]) == 0
    return {"dir": directory, "zip": str(good), "bad": str(bad), "base": str(base),
            "weights": _sha256(out / "ani1x.safetensors"),
            "yaml": (out / "ani1x.yaml").read_bytes()}


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class _Server:
    """An HTTP server on 127.0.0.1 serving one folder, counting the requests."""

    def __init__(self, folder):
        self.requests = []
        outer = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kw):
                super().__init__(*args, directory=folder, **kw)

            def do_GET(self):
                outer.requests.append(self.path)
                super().do_GET()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name):
        return "http://127.0.0.1:%d/%s" % (self.httpd.server_address[1], name)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(published):
    s = _Server(published["base"])
    yield s
    s.close()


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("NNPOPS_OFFLINE", raising=False)
    monkeypatch.delenv("NNPOPS_NEUROCHEM_URL", raising=False)
    monkeypatch.setenv("NNPOPS_NEUROCHEM_PATH", str(tmp_path / "empty"))
    return tmp_path


def run(argv, capsys):
    rc = convert.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def cache_listing():
    top = download.cache_dir()
    if not os.path.isdir(top):
        return []
    return sorted(os.listdir(top))


def test_manifest_lists_the_published_files():
    for archive in ("ani-2x_8x", "ani-1x_8x", "ani-1ccx_8x"):
        m = download.manifest(archive)
        assert archive + ".info" in m
        assert any(n.endswith("sae_linfit.dat") for n in m)
        assert sum(n.endswith(".nnf") for n in m) == 8 * (7 if archive == "ani-2x_8x" else 4)
        assert all(len(d) == 64 for d in m.values())


def test_download_from_local_server(published, server, env, capsys, monkeypatch):
    monkeypatch.setenv("NNPOPS_NEUROCHEM_URL", server.url("ani-2x.zip"))
    rc, out, err = run(["--download", "--output", str(env / "out"), "ani1x"], capsys)
    assert rc == 0, err
    assert len(server.requests) == 1
    assert _sha256(env / "out" / "ani1x.safetensors") == published["weights"]
    assert (env / "out" / "ani1x.yaml").read_bytes() == published["yaml"]
    assert cache_listing() == [".lock", ARCHIVE, ARCHIVE + ".info", "ani-model-zoo-ani-2x.zip"]
    # A second run uses the cache: no request, also when the network is forbidden.
    monkeypatch.setenv("NNPOPS_OFFLINE", "1")
    rc, out, err = run(["--download", "--force", "--output", str(env / "out2"), "ani1x"], capsys)
    assert rc == 0, err
    assert len(server.requests) == 1
    assert _sha256(env / "out2" / "ani1x.safetensors") == published["weights"]
    # Without --download the converter finds the cached files on its search path (and verifies
    # them, since they come from the cache).
    rc, out, err = run(["--force", "--output", str(env / "out3"), "ani1x"], capsys)
    assert rc == 0, err
    assert _sha256(env / "out3" / "ani1x.safetensors") == published["weights"]


def test_download_file_url(published, env, capsys, monkeypatch):
    monkeypatch.setenv("NNPOPS_NEUROCHEM_URL", "file://" + published["zip"])
    rc, out, err = run(["--download", "--output", str(env / "out"), "ani1x"], capsys)
    assert rc == 0, err
    assert _sha256(env / "out" / "ani1x.safetensors") == published["weights"]


def test_checksum_mismatch_leaves_cache_clean(published, server, env, capsys, monkeypatch):
    monkeypatch.setenv("NNPOPS_NEUROCHEM_URL", server.url("altered.zip"))
    rc, out, err = run(["--download", "--output", str(env / "out"), "ani1x"], capsys)
    assert rc == 2
    assert "sha256" in err and "sae_linfit.dat" in err
    assert cache_listing() == [".lock"]
    assert not (env / "out" / "ani1x.yaml").exists()
    with pytest.raises(download.ChecksumError):
        download.fetch(ARCHIVE, log=None)
    assert cache_listing() == [".lock"]


def test_corrupt_cache_is_refused(published, server, env, capsys, monkeypatch):
    monkeypatch.setenv("NNPOPS_NEUROCHEM_URL", server.url("ani-2x.zip"))
    rc, out, err = run(["--download", "--output", str(env / "out"), "ani1x"], capsys)
    assert rc == 0, err
    victim = os.path.join(download.cache_dir(), ARCHIVE, "train5", "networks", "ANN-C.nnf-l2.wparam")
    with open(victim, "r+b") as f:
        f.write(b"\0\0\0\0")
    rc, out, err = run(["--download", "--force", "--output", str(env / "out"), "ani1x"], capsys)
    assert rc == 2
    assert "sha256" in err and "ANN-C.nnf-l2.wparam" in err


def test_offline_forbids_the_network(published, server, env, capsys, monkeypatch):
    monkeypatch.setenv("NNPOPS_NEUROCHEM_URL", server.url("ani-2x.zip"))
    monkeypatch.setenv("NNPOPS_OFFLINE", "1")
    rc, out, err = run(["--download", "--output", str(env / "out"), "ani1x"], capsys)
    assert rc == 2
    assert "NNPOPS_OFFLINE" in err
    assert server.requests == []
    assert ".download" not in "".join(cache_listing())


def test_unreachable_url_is_a_named_error(env, capsys, monkeypatch):
    monkeypatch.setenv("NNPOPS_NEUROCHEM_URL", "file://" + str(env / "no-such.zip"))
    rc, out, err = run(["--download", "--output", str(env / "out"), "ani1x"], capsys)
    assert rc == 2
    assert "cannot download" in err and "no-such.zip" in err
    assert cache_listing() == [".lock"]


def test_zip_and_unpacked_sources(published, env, capsys, tmp_path):
    # the release zip itself
    rc, out, err = run(["--source", published["zip"], "--verify", "--output", str(env / "z"),
                        "ani1x"], capsys)
    assert rc == 0, err
    assert _sha256(env / "z" / "ani1x.safetensors") == published["weights"]
    # the unpacked folder
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(published["zip"]) as zf:
        zf.extractall(unpacked)
    rc, out, err = run(["--source", str(unpacked / ROOT), "--verify", "--output", str(env / "d"),
                        "ani1x"], capsys)
    assert rc == 0, err
    assert _sha256(env / "d" / "ani1x.safetensors") == published["weights"]
    stamp = json.loads((env / "d" / "ani1x.stamp").read_text())
    assert stamp["source_archive"] == ARCHIVE
    # --verify on an altered copy
    rc, out, err = run(["--source", published["bad"], "--verify", "--output", str(env / "b"),
                        "ani1x"], capsys)
    assert rc == 2 and "sha256" in err
    assert not (env / "b" / "ani1x.yaml").exists()


def test_missing_files_name_the_download_command(env, capsys):
    rc, out, err = run(["--source", str(env / "empty"), "--output", str(env / "out"), "ani1ccx"],
                       capsys)
    assert rc == 2
    assert "nnpops convert --download ani1ccx" in err
