"""The examples run: examples/ase_md.py (a few steps) and examples/ase_optimize.py."""

import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def _run(script, *args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "examples", script)] + list(args),
                          capture_output=True, text=True, timeout=600)


def test_ase_md_example():
    r = _run("ase_md.py", "--steps", "20", "--model", "ani1x")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"energy: -?\d+\.\d+ eV", out)
    assert "forces (eV/A):" in out
    assert re.search(r"step +20/20 .* ms/step", out)
    assert re.search(r"time per step: \d+\.\d+ ms", out)
    assert re.search(r"total energy drift: -?\d\.\d+e[-+]\d+ eV/atom/ps", out)


def test_ase_optimize_example(tmp_path):
    out = tmp_path / "opt.xyz"
    r = _run("ase_optimize.py", "--molecule", "water", "--model", "ani1x", "--fmax", "0.02",
             "--output", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "converged after" in r.stdout
    assert out.exists()
