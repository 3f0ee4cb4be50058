"""Errors reach LAMMPS with a clear message (the library's own where it comes from the library),
and a failure on one MPI rank stops the whole run instead of hanging it."""
import re

import numpy as np
import pytest

import lammps_support as ls
import nnpops_ctypes

WATER = """units metal
atom_style atomic
boundary p p p
region box block 0 6 0 6 0 6
create_box 2 box
create_atoms 1 single 1.0 1.0 1.0
create_atoms 2 single 1.9572 1.0 1.0
create_atoms 2 single 0.76 1.93 1.0
mass 1 15.999
mass 2 1.008
"""


@pytest.fixture(autouse=True)
def prerequisites():
    ls.require_model()


def expect_error(tmp_path, script, np_=1, timeout=120):
    run = ls.run_lammps(tmp_path, script, np_=np_, expect_error=True, timeout=timeout)
    errors = run.errors()
    assert errors, "LAMMPS did not report an error:\n" + ls.tail(run.text)
    return "\n".join(errors), run


def test_newton_off_refused(tmp_path):
    msg, _ = expect_error(tmp_path, "newton off\n" + WATER +
                          "pair_style nnpops\npair_coeff * * ani2x O H\nrun 0\n")
    assert "Pair style nnpops requires newton pair on" in msg


def test_element_not_in_model(tmp_path):
    """Sulfur is not an ANI-1x element: the library's message."""
    ls.require_model("ani1x")
    lib_err = nnpops_ctypes.compute_error("ani1x", [16], [[0.0, 0.0, 0.0]])
    assert lib_err is not None and lib_err.status_name == "NNPOPS_ERROR_UNKNOWN_ELEMENT"
    msg, _ = expect_error(tmp_path, WATER + "pair_style nnpops\npair_coeff * * ani1x O S\n")
    assert "NNPOPS_ERROR_UNKNOWN_ELEMENT" in msg
    assert lib_err.detail in msg, (lib_err.detail, msg)


def test_not_an_element_symbol(tmp_path):
    msg, _ = expect_error(tmp_path, WATER + "pair_style nnpops\npair_coeff * * ani2x O Xx\n")
    assert "'Xx' (atom type 2) is not an element symbol" in msg


def test_model_not_found(tmp_path):
    lib_err = nnpops_ctypes.load_error("no_such_model_xyz")
    assert lib_err is not None and lib_err.status_name == "NNPOPS_ERROR_MODEL_NOT_FOUND"
    msg, _ = expect_error(tmp_path, WATER +
                          "pair_style nnpops\npair_coeff * * no_such_model_xyz O H\n")
    assert "cannot load model 'no_such_model_xyz'" in msg
    assert lib_err.detail in msg, (lib_err.detail, msg)


def test_units_lj_refused(tmp_path):
    msg, _ = expect_error(tmp_path, WATER.replace("units metal", "units lj") +
                          "pair_style nnpops\npair_coeff * * ani2x O H\n")
    assert "Pair style nnpops does not support units lj" in msg


def test_spread_warning_value(tmp_path):
    msg, _ = expect_error(tmp_path, WATER + "pair_style nnpops spread_warning -1\n")
    assert "spread_warning must be a number >= 0" in msg


def test_unknown_keyword(tmp_path):
    msg, _ = expect_error(tmp_path, WATER + "pair_style nnpops colour blue\n")
    assert "unknown keyword 'colour'" in msg and "min_distance" in msg


def test_energy_unit_keyword_refused(tmp_path):
    msg, _ = expect_error(tmp_path, WATER + "pair_style nnpops energy_unit hartree\n")
    assert "set from the LAMMPS units command" in msg


def test_bad_option_value(tmp_path):
    ls.require_model("ani2x")
    msg, _ = expect_error(tmp_path, WATER + "pair_style nnpops cuda_graphs maybe\n"
                          "pair_coeff * * ani2x O H\n")
    assert "option cuda_graphs maybe" in msg and "NNPOPS_ERROR_INVALID_ARGUMENT" in msg


def test_cuda_without_cuda(tmp_path):
    ls.require_model("ani2x")
    lib = nnpops_ctypes.lib()
    if lib.nnpops_cuda_device_count() > 0:
        pytest.skip("a GPU is usable here")
    lib_err = nnpops_ctypes.load_error("ani2x", device="cuda")
    assert lib_err is not None
    msg, _ = expect_error(tmp_path, WATER + "pair_style nnpops device cuda\n"
                          "pair_coeff * * ani2x O H\n")
    assert lib_err.status_name in msg and lib_err.detail in msg, (lib_err, msg)


def test_compute_error_on_one_rank_stops_the_run(tmp_path):
    """Two atoms closer than min_distance, on one of two ranks: error->one, no hang."""
    ls.require_model("ani2x")
    script = WATER + """create_atoms 2 single 5.0 5.0 5.0
create_atoms 2 single 5.02 5.0 5.0
pair_style nnpops
pair_coeff * * ani2x O H
run 0
"""
    msg, run = expect_error(tmp_path, script, np_=2, timeout=120)
    assert run.returncode != 0
    assert "NNPOPS_ERROR_ATOMS_TOO_CLOSE" in msg and "compute failed on rank" in msg
    # the library's packed indices come with the LAMMPS atom IDs of the pair (the 4th and 5th atoms)
    ids = re.search(r"LAMMPS atom IDs (\d+) and (\d+)", msg)
    assert ids and {int(ids.group(1)), int(ids.group(2))} == {4, 5}, msg


def test_charge_refused_by_ani(tmp_path):
    """ANI does not use a total charge: a nonzero `charge` is the library's named error at
    pair_coeff, a malformed one LAMMPS's."""
    msg, _ = expect_error(tmp_path, WATER + "pair_style nnpops charge 1\n"
                          "pair_coeff * * ani2x O H\nrun 0\n")
    assert "NNPOPS_ERROR_UNSUPPORTED" in msg and "does not use a charge" in msg, msg
    msg, _ = expect_error(tmp_path, WATER + "pair_style nnpops charge one\n")
    assert "charge must be a number" in msg


def test_charge_zero_accepted(tmp_path):
    """charge 0 is the neutral system: the same energy as without the keyword."""
    energies = []
    for style in ("pair_style nnpops", "pair_style nnpops charge 0"):
        script = (WATER + style + "\npair_coeff * * ani2x O H\n"
                  "thermo_style custom step pe\nthermo_modify format float %.17g\nrun 0\n")
        run = ls.run_lammps(tmp_path, script)
        energies.append(float(run.thermo()[-1]["PotEng"][-1]))
    assert energies[0] == energies[1]


def test_periodic_keyword(tmp_path):
    """periodic takes auto, cell or ghosts; cell on several ranks is the plugin's error."""
    msg, _ = expect_error(tmp_path, WATER + "pair_style nnpops periodic images\n")
    assert "periodic must be auto, cell or ghosts, not 'images'" in msg, msg
    msg, _ = expect_error(tmp_path, WATER + "pair_style nnpops periodic cell\n"
                          "pair_coeff * * ani2x O H\nrun 0\n", np_=2)
    assert "periodic cell needs the whole box on one rank (this run has 2 ranks)" in msg, msg
