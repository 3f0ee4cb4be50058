"""Test fixture: convert every torchmd-net checkpoint of the TensorNet reference set
($NNPOPS_SHARED_DIR/reference/tensornet/*.ckpt) into the directory given, with the converter of
this tree (python3 -m nnpops convert --from-torchmdnet), and the ensemble tn_a_ens of tn_a and
tn_a_member2 (one architecture, two trainings).  A missing reference directory fails
under CI=true and skips (exit 77) elsewhere."""

import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "wrappers"))

from nnpops import convert  # noqa: E402


def main(out_dir):
    shared = os.environ.get("NNPOPS_SHARED_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared")
    ckpts = sorted(glob.glob(os.path.join(shared, "reference", "tensornet", "*.ckpt")))
    if not ckpts:
        print("no checkpoints in %s/reference/tensornet" % shared, file=sys.stderr)
        return 1 if os.environ.get("CI") == "true" else 77
    status = 0
    for path in ckpts:
        status |= convert.main(["--from-torchmdnet", path, "--output", out_dir])
    pair = [os.path.join(shared, "reference", "tensornet", m + ".ckpt")
            for m in ("tn_a", "tn_a_member2")]
    status |= convert.main(["--from-torchmdnet"] + pair + ["--name", "tn_a_ens", "--output",
                                                          out_dir])
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
