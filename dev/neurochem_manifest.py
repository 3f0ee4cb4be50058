#!/usr/bin/env python3
"""Write wrappers/nnpops/neurochem.sha256: the sha256 of every file the converter reads from the
published NeuroChem files (each model's .info, descriptor constants, self energies, and the
networks of every ensemble member), in ``sha256sum`` format.

    python3 dev/neurochem_manifest.py DIR > wrappers/nnpops/neurochem.sha256

DIR holds <archive>.info and <archive>.tar.xz of ani-2x_8x, ani-1x_8x and ani-1ccx_8x (the files of
the ani-2x tag of aiqm/ani-model-zoo).
"""

import hashlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "wrappers"))

from nnpops import convert  # noqa: E402


def main(directory):
    print("# sha256 of the published NeuroChem ANI files (aiqm/ani-model-zoo, tag ani-2x, folder")
    print("# resources/), written by dev/neurochem_manifest.py; paths relative to resources/.")
    for archive in sorted(a for a, _ in convert.MODELS.values()):
        info_path = os.path.join(directory, archive + ".info")
        with open(info_path, "rb") as f:
            info = f.read()
        const_file, sae_file, prefix, size = convert.parse_info(info, info_path)
        members = tuple("%s%d/networks/ANN-" % (prefix, k) for k in range(size))
        files = convert.read_archive(
            os.path.join(directory, archive + ".tar.xz"),
            lambda n: n in (const_file, sae_file) or n.startswith(members))
        files[archive + ".info"] = info
        for name in sorted(files):
            print("%s  %s" % (hashlib.sha256(files[name]).hexdigest(), name))


if __name__ == "__main__":
    main(sys.argv[1])
