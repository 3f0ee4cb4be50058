# nnpops_lammps_version(SRC_DIR OUT_VAR): the yyyymmdd number of a LAMMPS source tree, read from
# the LAMMPS_VERSION string of SRC_DIR/version.h ("29 Sep 2021" -> 20210929).  LAMMPS's headers
# carry no numeric version macro, so the plugin is compiled with -DNNPOPS_LAMMPS_VERSION=<this>.
# Also usable in script mode:  cmake -DLAMMPS_SOURCE_DIR=<src> -P lammps_version.cmake
function(nnpops_lammps_version src out)
  if(NOT EXISTS "${src}/version.h")
    message(FATAL_ERROR "nnpops: ${src}/version.h not found (LAMMPS_SOURCE_DIR must be LAMMPS's src/ directory)")
  endif()
  file(STRINGS "${src}/version.h" _line REGEX "define[ \t]+LAMMPS_VERSION[ \t]+\"")
  string(REGEX MATCH "\"([0-9]+) ([A-Za-z]+) ([0-9][0-9][0-9][0-9])\"" _m "${_line}")
  if(NOT _m)
    message(FATAL_ERROR "nnpops: cannot read LAMMPS_VERSION from ${src}/version.h: '${_line}'")
  endif()
  set(_day "${CMAKE_MATCH_1}")
  string(SUBSTRING "${CMAKE_MATCH_2}" 0 3 _mon)
  set(_year "${CMAKE_MATCH_3}")
  set(_months Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec)
  list(FIND _months "${_mon}" _i)
  if(_i LESS 0)
    message(FATAL_ERROR "nnpops: unknown month '${CMAKE_MATCH_2}' in LAMMPS_VERSION of ${src}/version.h")
  endif()
  math(EXPR _num "${_year} * 10000 + (${_i} + 1) * 100 + ${_day}")
  set(${out} ${_num} PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND LAMMPS_SOURCE_DIR)
  nnpops_lammps_version("${LAMMPS_SOURCE_DIR}" _v)
  message("${_v}")
endif()
