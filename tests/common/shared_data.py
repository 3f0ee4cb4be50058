"""The third-party data of the Python tests: the folder ``shared`` beside the checkout (or
NNPOPS_SHARED_DIR) and its reference files, with the tests' rule for a missing one: the test fails
when CI == "true", else it is skipped.

A test file imports it after putting tests/common on its path:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    import shared_data
"""

import json
import os

import pytest


def shared_dir():
    """NNPOPS_SHARED_DIR, else ../shared beside the checkout."""
    return os.environ.get("NNPOPS_SHARED_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared")


def missing(message):
    """A test's data is not there: fail under CI == "true", else skip."""
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def load_reference(*parts):
    """The JSON file reference/PARTS of the shared folder, parsed."""
    path = os.path.join(shared_dir(), "reference", *parts)
    if not os.path.isfile(path):
        missing("reference file %s not found" % path)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def tensornet_reference():
    """torchmd-net's values of the TensorNet reference set (reference/tensornet/reference.json)."""
    return load_reference("tensornet", "reference.json")
