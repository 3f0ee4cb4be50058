"""The examples run: examples/ase_md.py (a few steps) and examples/ase_optimize.py."""

import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def _run(script, *args, cwd=None):
    return subprocess.run([sys.executable, os.path.join(ROOT, "examples", script)] + list(args),
                          capture_output=True, text=True, timeout=600, cwd=cwd)


def test_ase_md_example(tmp_path):
    r = _run("ase_md.py", "--steps", "20", "--model", "ani1x", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"energy: -?\d+\.\d+ eV", out)
    assert "forces (eV/A):" in out
    # ASE's MDLogger: a header, then a line every 2 steps from t = 0 to t = 0.0100 ps
    assert re.search(r"Time\[ps\] +Etot\[eV\] +Epot\[eV\] +Ekin\[eV\] +T\[K\]", out)
    assert re.search(r"^ *0\.0100 +-?\d+\.\d+ +-?\d+\.\d+ +\d+\.\d+ +\d+\.\d", out, re.M)
    assert re.search(r"time per step: \d+\.\d+ ms", out)
    assert re.search(r"total energy drift: -?\d\.\d+e[-+]\d+ eV/atom/ps", out)
    from ase.io import read

    frames = read(str(tmp_path / "md.traj"), index=":")
    assert len(frames) == 11
    assert frames[-1].get_potential_energy() != frames[0].get_potential_energy()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in out
    else:
        png = (tmp_path / "md_drift.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000


def test_ase_optimize_example(tmp_path):
    out = tmp_path / "opt.xyz"
    r = _run("ase_optimize.py", "--molecule", "water", "--model", "ani1x", "--fmax", "0.02",
             "--output", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "converged after" in r.stdout
    assert out.exists()
