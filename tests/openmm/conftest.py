"""Shared setup of the OpenMM tests (label ``openmm``).

Under CTest the environment names the library (NNPOPS_LIBRARY), the converted models
(NNPOPS_MODEL_PATH) and the Python package (PYTHONPATH=wrappers).  Run by hand, the defaults are
the source tree's wrappers/ and build/:

    PYTHONPATH=wrappers python3 -m pytest -q tests/openmm

Every test needs OpenMM >= 8.6 (PythonForce with setParticles); without it they are skipped and
the session exits with 77, which CTest reports as skipped (SKIP_RETURN_CODE).
"""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

sys.path.insert(0, HERE)
if os.path.join(ROOT, "wrappers") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "wrappers"))
_build = os.environ.get("NNPOPS_BUILD_DIR", os.path.join(ROOT, "build"))
if not os.environ.get("NNPOPS_LIBRARY") and os.path.exists(os.path.join(_build, "libnnpops.so")):
    os.environ["NNPOPS_LIBRARY"] = os.path.join(_build, "libnnpops.so")
if not os.environ.get("NNPOPS_MODEL_PATH") and os.path.isdir(os.path.join(_build, "models")):
    os.environ["NNPOPS_MODEL_PATH"] = os.path.join(_build, "models")

_outcomes = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _outcomes[report.outcome] = _outcomes.get(report.outcome, 0) + 1


def pytest_collectreport(report):
    if report.outcome == "skipped":
        _outcomes["skipped"] += 1
    elif report.outcome == "failed":
        _outcomes["failed"] += 1


def pytest_sessionfinish(session, exitstatus):
    # Everything skipped (no OpenMM 8.6, no openmm-ml): tell CTest with its skip code.
    if exitstatus == 0 and _outcomes["skipped"] and not _outcomes["passed"] \
            and not _outcomes["failed"]:
        session.exitstatus = 77


def pytest_collection_modifyitems(config, items):
    try:
        import openmm
    except ImportError:
        reason = "OpenMM is not installed"
    else:
        if hasattr(openmm, "PythonForce") and hasattr(openmm.PythonForce, "setParticles"):
            return
        reason = "OpenMM %s has no PythonForce.setParticles (needs >= 8.6)" % openmm.__version__
    for item in items:
        item.add_marker(pytest.mark.skip(reason=reason))
