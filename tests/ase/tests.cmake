# Python front end: the cffi binding, the ASE calculator, the command line, the examples.
# Each test file is one CTest entry (label "ase"); they need Python with numpy, cffi, ase, pytest.
if(NOT NNPOPS_BUILD_PYTHON)
  return()
endif()

nnpops_py_test(structures ase tests/ase/test_structures.py)
nnpops_py_test(binding ase tests/ase/test_binding.py)
# -s: print the number of reference systems compared and the worst errors.
nnpops_py_test(reference ase tests/ase/test_reference.py -s)
nnpops_py_test(finite_diff ase tests/ase/test_finite_diff.py -s)
nnpops_py_test(calculator ase tests/ase/test_calculator.py)
nnpops_py_test(cli ase tests/ase/test_cli.py)
nnpops_py_test(examples ase tests/ase/test_examples.py)
nnpops_py_test(npt ase tests/ase/test_npt.py -s)
# 1 ps of NVE (2000 steps of 13 atoms): about 35 s of CPU time here.
nnpops_py_test(md_1ps ase tests/ase/test_md.py -s)
# TensorNet: compute(charges=), the calculator and `nnpops info` against torchmd-net's values (the
# converted models of fixture model.convert_tensornet).
nnpops_py_test(tensornet ase tests/ase/test_tensornet.py)
set_tests_properties(ase.tensornet PROPERTIES FIXTURES_REQUIRED "models;tensornet_models")
