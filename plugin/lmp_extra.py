"""The optional dependencies of the nnpops package, for scikit-build-core's dynamic metadata.

``pip install .[lmp]`` must pull in the plugin package of this source tree (plugin/,
``nnpops-lammps``), which is on no index: the ``lmp`` extra names it by a direct reference to
this folder, an absolute ``file://`` URL that only the build can know.  The other extras come
as they are from ``[tool.scikit-build.metadata.optional-dependencies]`` in pyproject.toml.
"""

import os
import pathlib

__all__ = ["dynamic_metadata"]


def dynamic_metadata(field, settings=None):
    if field != "optional-dependencies":
        raise ValueError("lmp_extra provides only optional-dependencies, not %s" % field)
    extras = {}
    for name, requirements in (settings or {}).items():
        if name in ("provider", "provider-path"):
            continue
        extras[name] = list(requirements)
    plugin = pathlib.Path(os.path.dirname(os.path.abspath(__file__)))
    extras["lmp"] = ["nnpops-lammps @ %s" % plugin.as_uri()]
    return extras
