"""The command line: ``python3 -m nnpops eval`` against the ASE calculator, ``info``, errors."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from ase.io import read, write

from nnpops import structures
from nnpops.ase import NNPOpsCalculator


def _nnpops(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "nnpops"] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.fixture()
def two_frames(tmp_path):
    mol = structures.alanine()
    box = structures.water_box(2, seed=4)
    path = tmp_path / "frames.extxyz"
    write(str(path), [mol, box], format="extxyz")
    return path


def test_eval_matches_calculator(two_frames, tmp_path):
    out = tmp_path / "out.json"
    xyz = tmp_path / "out.extxyz"
    r = _nnpops("eval", "--model", "ani2x", "--json", out, "--xyz", xyz, two_frames)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""  # results go to the files; a summary to standard error
    assert "2 frames evaluated with ani2x" in r.stderr
    doc = json.loads(out.read_text())
    assert len(doc["frames"]) == 2
    assert doc["model"] == "ani2x" and doc["units"] == {"energy": "eV", "length": "angstrom"}
    frames = read(str(two_frames), index=":")
    written = read(str(xyz), index=":")
    assert len(written) == 2
    assert not frames[0].pbc.any() and frames[1].pbc.all()
    calc = NNPOpsCalculator("ani2x")
    r = _nnpops("eval", "--model", "ani2x", two_frames)  # no output file: one line per frame
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stdout.splitlines() if l.startswith("frame ")]
    assert len(lines) == 2
    assert lines[0].startswith("frame 0: energy ") and "eV, max |F| " in lines[0]
    assert lines[0].endswith(" eV/A")
    for k, (atoms, f, w) in enumerate(zip(frames, doc["frames"], written)):
        # ANI-2x is an ensemble of 8: each frame also has its members' energies and spread
        assert set(f) == {"energy_eV", "forces_eV_per_A", "stress_eV_per_A3",
                          "atomic_energies_eV", "member_energies_eV", "energy_std_eV"}
        assert len(f["member_energies_eV"]) == 8
        assert f["energy_eV"] == pytest.approx(np.mean(f["member_energies_eV"]), rel=1e-12)
        assert f["energy_std_eV"] == pytest.approx(np.std(f["member_energies_eV"], ddof=1),
                                                   rel=1e-12)
        atoms.calc = calc
        e = atoms.get_potential_energy()
        assert f["energy_eV"] == pytest.approx(e, rel=1e-10)
        assert np.allclose(f["forces_eV_per_A"], atoms.get_forces(), rtol=0, atol=1e-9)
        assert np.allclose(f["atomic_energies_eV"], atoms.get_potential_energies(), atol=1e-9)
        # the extended XYZ copy: same structure, same results
        assert np.array_equal(w.numbers, atoms.numbers)
        assert np.allclose(w.positions, atoms.positions, rtol=0, atol=1e-8)
        assert w.get_potential_energy() == pytest.approx(e, rel=1e-10)
        assert np.allclose(w.get_forces(), atoms.get_forces(), rtol=0, atol=1e-6)
        assert np.allclose(w.get_potential_energies(), atoms.get_potential_energies(), atol=1e-6)
        fmax = float(np.sqrt((atoms.get_forces() ** 2).sum(axis=1)).max())
        assert "max |F| %.6f eV/A" % fmax in lines[k]
        if k == 0:
            assert f["stress_eV_per_A3"] is None
            assert "stress" not in w.calc.results
        else:
            s = np.array(f["stress_eV_per_A3"])
            assert s.shape == (3, 3)
            assert np.allclose(s, atoms.get_stress(voigt=False), rtol=0, atol=1e-12)
            assert np.allclose(w.get_stress(voigt=False), s, rtol=0, atol=1e-9)


def test_eval_batch_size_one_and_stdout_json(two_frames):
    r = _nnpops("eval", "--model", "ani1x", "--batch-size", "1", "--json", "-", two_frames)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # only JSON on stdout; the summary went to stderr
    assert "2 frames evaluated" in r.stderr
    r2 = _nnpops("eval", "--model", "ani1x", "--json", "-", two_frames)
    doc2 = json.loads(r2.stdout)
    for a, b in zip(doc["frames"], doc2["frames"]):
        assert a["energy_eV"] == pytest.approx(b["energy_eV"], rel=1e-12)
    r3 = _nnpops("eval", "--model", "ani1x", "--xyz", "-", "--quiet", two_frames)
    assert r3.returncode == 0 and r3.stderr == ""
    assert r3.stdout.startswith("%d\n" % len(read(str(two_frames), index=0)))
    assert _nnpops("eval", "--model", "ani1x", "--xyz", "-", "--json", "-",
                   two_frames).returncode == 1


def test_eval_streams_many_frames(tmp_path):
    # 150 frames in batches of 7 (the last one short): every frame comes out, in order.
    base = structures.water()
    frames = []
    for k in range(150):
        a = base.copy()
        a.positions[0, 0] += 0.001 * k
        frames.append(a)
    path = tmp_path / "many.extxyz"
    write(str(path), frames, format="extxyz")
    xyz = tmp_path / "out.extxyz"
    r = _nnpops("eval", "--model", "ani1x", "--batch-size", "7", "--xyz", xyz, path)
    assert r.returncode == 0, r.stderr
    out = read(str(xyz), index=":")
    assert len(out) == 150
    for k in (0, 6, 7, 149):
        assert out[k].positions[0, 0] == pytest.approx(base.positions[0, 0] + 0.001 * k)
    energies = [a.get_potential_energy() for a in out]
    assert energies[0] != energies[149]


def test_progress_on_a_terminal():
    import io

    from nnpops.cli import _Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    p = _Progress(tty)
    p.update(3, 30, force=True)
    p.update(2, 20)
    p.done()
    text = tty.getvalue()
    assert text.startswith("\r3 frames, 30 atoms, ") and "frames/s" in text
    assert "\r5 frames, 50 atoms" in text and text.endswith("\n")
    plain = io.StringIO()  # not a terminal: nothing drawn
    p = _Progress(plain)
    p.update(3, 30, force=True)
    p.done()
    assert plain.getvalue() == ""


def test_eval_plain_xyz_float32(tmp_path):
    path = tmp_path / "water.xyz"
    write(str(path), structures.water(), format="xyz")
    r = _nnpops("eval", "--model", "ani1x", "--precision", "float32", path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("frame ") == 1


def test_info():
    r = _nnpops("info", "ani2x")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "name: ani2x" in text
    assert "type: ani" in text
    elements = [l for l in text.splitlines() if l.startswith("elements:")][0].split()[1:]
    assert sorted(elements) == sorted(["H", "C", "N", "O", "S", "F", "Cl"])
    assert "cutoff: 5.1 A" in text
    assert "ensemble size: 8" in text
    path = [l for l in text.splitlines() if l.startswith("path:")][0].split(None, 1)[1]
    assert os.path.basename(path) == "ani2x.yaml" and os.path.isfile(path)


def test_info_without_ase():
    code = ("import sys; sys.modules['ase'] = None; from nnpops.cli import main; "
            "sys.exit(main(['info', 'ani1x']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "elements: H C N O" in r.stdout


def test_info_library():
    r = _nnpops("info")
    assert r.returncode == 0, r.stderr
    assert "version: " in r.stdout and "library: " in r.stdout


def test_errors(tmp_path, two_frames):
    r = _nnpops("eval", "--model", "ani1x", tmp_path / "missing.xyz")
    assert r.returncode == 1 and "error" in r.stderr and "missing.xyz" in r.stderr
    assert "Traceback" not in r.stderr
    r = _nnpops("eval", "--model", "no-such-model-xyz", two_frames)
    assert r.returncode == 1 and "no-such-model-xyz" in r.stderr
    r = _nnpops("info", "no-such-model-xyz")
    assert r.returncode == 1 and "no-such-model-xyz" in r.stderr
    # an element the model does not know (U)
    bad = tmp_path / "u.xyz"
    bad.write_text("2\n\nU 0 0 0\nH 0 0 2\n")
    r = _nnpops("eval", "--model", "ani1x", bad)
    assert r.returncode == 1 and r.stderr.strip()
    # usage errors
    assert _nnpops("eval").returncode == 2
    assert _nnpops("frobnicate").returncode == 2
    assert _nnpops().returncode == 2
    assert _nnpops("eval", "--batch-size", "x", two_frames).returncode == 2


def test_help_and_convert_delegation():
    r = _nnpops("--help")
    assert r.returncode == 0 and "eval" in r.stdout and "convert" in r.stdout
    r = _nnpops("convert", "--help")
    assert r.returncode == 0 and "--output" in r.stdout
