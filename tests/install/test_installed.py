"""The package as `pip install .` installs it, in a fresh virtual environment (.ci/wheel-smoke.sh).

Runs with the environment's own Python, outside the source tree and with no NNPOPS_LIBRARY,
NNPOPS_HEADER or PYTHONPATH: the library, its header and its CMake package must come from inside
the installed package.  Needs NNPOPS_MODEL_PATH (ani1x converted by the installed `nnpops convert`)
and NNPOPS_SHARED_DIR (the torchani reference values).
"""

import glob
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import nnpops
from nnpops import _lib

PKG = os.path.dirname(os.path.abspath(nnpops.__file__))


def test_imported_from_the_environment():
    assert os.path.realpath(PKG).startswith(os.path.realpath(sys.prefix))
    for var in ("NNPOPS_LIBRARY", "NNPOPS_HEADER", "PYTHONPATH"):
        assert var not in os.environ, var


def test_library_and_header_inside_the_package():
    info = nnpops.library_info()
    libs = glob.glob(os.path.join(PKG, "lib", "libnnpops*"))
    assert [os.path.basename(p) for p in libs] == ["libnnpops.so.0"]  # one file, its SONAME
    assert not os.path.islink(libs[0])
    assert os.path.realpath(info["path"]) == os.path.realpath(libs[0])
    header = [h for h in _lib._header_candidates() if os.path.isfile(h)][0]
    assert header == os.path.join(PKG, "include", "nnpops", "nnpops.h")
    assert os.path.isfile(os.path.join(nnpops.cmake_prefix_path, "lib", "cmake", "nnpops",
                                       "nnpopsConfig.cmake"))


def test_one_version():
    v = importlib.metadata.version("nnpops")
    assert nnpops.version_string().startswith(v)
    major, minor, patch = (int(x) for x in v.split("."))
    assert nnpops.version_number() == major * 10000 + minor * 100 + patch


def test_ani1x_against_torchani():
    shared = os.environ.get("NNPOPS_SHARED_DIR", "")
    path = os.path.join(shared, "reference", "ani1x-torchani.json")
    if not os.path.isfile(path):
        pytest.skip("no %s" % path)
    with open(path) as f:
        ref = json.load(f)
    symbols = {"H": 1, "C": 6, "N": 7, "O": 8}
    ctx = nnpops.Context(nnpops.Model("ani1x"))
    for name in ("13_f0", "water8_pbc"):
        s = ref["systems"][name]
        z = np.array([symbols[x] for x in s["symbols"]], dtype=np.int32)
        kw = {}
        if s["cell_A"] is not None:
            kw = {"cells": np.array(s["cell_A"]), "pbc": np.array(s["pbc"])}
        r = ctx.compute(z, np.array(s["positions_A"]), **kw)
        assert abs(r["energies"][0] - s["energy_eV"]) / len(z) < 1e-7
        assert np.abs(r["forces"] - np.array(s["forces_eV_per_A"])).max() < 1e-5


def test_command_line():
    exe = os.path.join(os.path.dirname(sys.executable), "nnpops")
    r = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "library: %s" % os.path.join(PKG, "lib") in r.stdout
    r = subprocess.run([exe, "info", "ani1x"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "elements: H C N O" in r.stdout


def test_find_package_from_pip_install(tmp_path):
    if shutil.which("cmake") is None or shutil.which("cc") is None:
        pytest.skip("cmake or a C compiler missing")
    (tmp_path / "main.c").write_text(
        "#include <stdio.h>\n#include <nnpops/nnpops.h>\n"
        "int main(void) {\n"
        "    if (nnpops_version_number() != NNPOPS_VERSION_NUMBER) return 1;\n"
        "    printf(\"nnpops %s\\n\", nnpops_version_string());\n    return 0;\n}\n")
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.22)\nproject(consumer C)\n"
        "find_package(nnpops REQUIRED)\nadd_executable(consumer main.c)\n"
        "target_link_libraries(consumer PRIVATE nnpops::nnpops)\n")
    build = tmp_path / "build"
    for cmd in (["cmake", "-S", str(tmp_path), "-B", str(build),
                 "-DCMAKE_PREFIX_PATH=%s" % nnpops.cmake_prefix_path],
                ["cmake", "--build", str(build)]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(build / "consumer")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("nnpops " + importlib.metadata.version("nnpops"))
