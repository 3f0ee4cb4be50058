"""The inputs of examples/lammps run (few steps, a small water box): data generators, NVT, NPT,
the molecule in real units."""
import os
import subprocess
import sys

import pytest

import lammps_support as ls

EXAMPLES = os.path.join(os.environ.get("NNPOPS_SOURCE_DIR",
                                       os.path.join(os.path.dirname(__file__), "..", "..")),
                        "examples", "lammps")


def generate(tmp_path, script, *args):
    subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args], cwd=tmp_path,
                   check=True)


@pytest.mark.parametrize("name", ["in.water_nvt", "in.water_npt"])
def test_water_example(tmp_path, name):
    ls.require_model("ani2x")
    generate(tmp_path, "make_water.py", "--n", "3", "--output", "water.data")
    with open(os.path.join(EXAMPLES, name)) as f:
        script = f.read()
    run = ls.run_lammps(tmp_path, script,
                        variables={"data": "water.data", "steps": 20, "minsteps": 5})
    t = run.thermo()[-1]
    assert t["Step"][-1] == 20


def test_molecule_example(tmp_path):
    ls.require_model("ani2x")
    generate(tmp_path, "make_molecule.py", "--output", "ethanol.data")
    with open(os.path.join(EXAMPLES, "in.molecule")) as f:
        script = f.read()
    run = ls.run_lammps(tmp_path, script, variables={"steps": 100})
    t = run.thermo()[-1]
    assert t["Step"][-1] == 100
