# Model tests (label "model"): one CTest entry per case.  Included by tests/CMakeLists.txt.
# The ANI cases load the converted models by name from NNPOPS_MODEL_PATH (fixture model.convert)
# and read the torchani reference values from ${NNPOPS_SHARED_DIR}/reference (a missing file
# fails under CI=true and skips elsewhere).

# ---- ANI against torchani (float64 tight, float32 loose) ------------------------------------------
foreach(model ani2x ani1x ani1ccx)
  foreach(precision f64 f32)
    nnpops_c_test(ani.reference.${model}.${precision} model ${CMAKE_CURRENT_LIST_DIR}/test_ani.c
      reference ${model} ${precision})
  endforeach()
endforeach()

# ---- ANI properties: finite differences, invariances, batching, ghosts, ensemble members ---------
foreach(case fd_forces fd_stress invariance batch triclinic ghosts member species_set
    unknown_element)
  nnpops_c_test(ani.${case} model ${CMAKE_CURRENT_LIST_DIR}/test_ani.c ${case})
endforeach()

# ---- Lennard-Jones against direct sums -------------------------------------------------------------
foreach(case two_atoms cluster ghosts periodic bad_files)
  nnpops_c_test(lj.${case} model ${CMAKE_CURRENT_LIST_DIR}/test_lj.c ${case})
endforeach()

# ---- the converter (pytest) ------------------------------------------------------------------------
if(NOT TEST model.converter)
  nnpops_py_test(converter model tests/model/test_convert.py)
endif()
# --download, offline: a release-shaped zip served from 127.0.0.1 and as file://
if(NOT TEST model.download)
  nnpops_py_test(download model tests/model/test_download.py)
endif()

# ---- TensorNet: the torchmd-net converter and the converted weights against torchmd-net (pytest) --
if(NOT TEST model.tensornet_convert)
  nnpops_py_test(tensornet_convert model tests/model/test_tensornet_convert.py)
  nnpops_py_test(tensornet_reference model tests/model/test_tensornet_reference.py)
endif()

# ---- nnpops analyze: roundings, models with known stage scales, determinism, ANI-2x and TensorNet
# smoke runs (pytest; needs the ANI and TensorNet fixtures) ---------------------------------------
if(NOT TEST model.analyze)
  nnpops_py_test(analyze model tests/model/test_analyze.py)
  set_tests_properties(model.analyze PROPERTIES FIXTURES_REQUIRED "models;tensornet_models")
endif()

# ---- TensorNet: the CPU functions (potentials/tensornet/cpu) against torchmd-net's values, finite
# differences and a periodic replica; the models converted once by the fixture below -------------
if(NOT TEST model.convert_tensornet)
  add_test(NAME model.convert_tensornet
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/convert_tensornet_models.py
      ${NNPOPS_TEST_MODEL_DIR})
  set_tests_properties(model.convert_tensornet PROPERTIES FIXTURES_SETUP tensornet_models
    LABELS model SKIP_RETURN_CODE 77 ENVIRONMENT "${NNPOPS_TEST_ENV}")
  foreach(m tn_a tn_a_member2 tn_b_oldlayout_so3 tn_c_gauss_lower_zbl tn_d_lightning_f32)
    foreach(precision f64 f32)
      nnpops_internal_test(tensornet_cpu.reference.${m}.${precision} model
        ${CMAKE_CURRENT_LIST_DIR}/test_tensornet_cpu.c reference ${m} ${precision})
      set_tests_properties(model.tensornet_cpu.reference.${m}.${precision} PROPERTIES
        FIXTURES_REQUIRED "models;tensornet_models")
    endforeach()
  endforeach()
  foreach(m tn_a tn_b_oldlayout_so3 tn_c_gauss_lower_zbl)
    nnpops_internal_test(tensornet_cpu.fd.${m} model ${CMAKE_CURRENT_LIST_DIR}/test_tensornet_cpu.c
      fd ${m})
    set_tests_properties(model.tensornet_cpu.fd.${m} PROPERTIES
      FIXTURES_REQUIRED "models;tensornet_models")
  endforeach()
  nnpops_internal_test(tensornet_cpu.replica.tn_a model ${CMAKE_CURRENT_LIST_DIR}/test_tensornet_cpu.c
    replica tn_a)
  set_tests_properties(model.tensornet_cpu.replica.tn_a PROPERTIES
    FIXTURES_REQUIRED "models;tensornet_models")
  foreach(m tn_a tn_c_gauss_lower_zbl)
    nnpops_internal_test(tensornet_cpu.variants.${m} model
      ${CMAKE_CURRENT_LIST_DIR}/test_tensornet_cpu.c variants ${m})
    set_tests_properties(model.tensornet_cpu.variants.${m} PROPERTIES
      FIXTURES_REQUIRED "models;tensornet_models")
  endforeach()
  foreach(m tn_a tn_b_oldlayout_so3)
    nnpops_internal_test(tensornet_cpu.invariance.${m} model
      ${CMAKE_CURRENT_LIST_DIR}/test_tensornet_cpu.c invariance ${m})
    set_tests_properties(model.tensornet_cpu.invariance.${m} PROPERTIES
      FIXTURES_REQUIRED "models;tensornet_models")
  endforeach()
endif()

# ---- benchmark (an executable, not a test): build/tests/bench_cpu [max_atoms [model]] ------------
if(NOT TARGET bench_cpu)
  add_executable(bench_cpu ${PROJECT_SOURCE_DIR}/tests/bench/bench_cpu.c)
  target_link_libraries(bench_cpu PRIVATE nnpops::nnpops m)
  target_include_directories(bench_cpu PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
endif()

# ---- TensorNet benchmark (an executable, not a test): build/tests/bench_tensornet_cpu ----------
if(NOT TARGET bench_tensornet_cpu)
  add_executable(bench_tensornet_cpu ${PROJECT_SOURCE_DIR}/tests/bench/bench_tensornet_cpu.c)
  target_link_libraries(bench_tensornet_cpu PRIVATE nnpops::nnpops m)
  target_include_directories(bench_tensornet_cpu PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
endif()

# ---- TensorNet through the public API: the converted models against torchmd-net's values, finite
# differences, the periodic replica, batches with charges, ghosts, broken model files (one program,
# one CTest entry per case) ------------------------------------------------------------------------
if(NOT TARGET test_model_tensornet)
  add_executable(test_model_tensornet ${CMAKE_CURRENT_LIST_DIR}/test_tensornet.c)
  target_include_directories(test_model_tensornet PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  target_link_libraries(test_model_tensornet PRIVATE nnpops::nnpops m)
  set(_tn_cases)
  foreach(m tn_a tn_a_member2 tn_b_oldlayout_so3 tn_c_gauss_lower_zbl tn_d_lightning_f32)
    list(APPEND _tn_cases reference.${m}.f64 reference.${m}.f32)
  endforeach()
  list(APPEND _tn_cases fd.tn_a fd.tn_b_oldlayout_so3 fd.tn_c_gauss_lower_zbl replica.tn_a
    replica.tn_d_lightning_f32 batch.tn_a batch.tn_a.f32 batch.tn_c_gauss_lower_zbl ghosts.tn_a
    ghosts.tn_c_gauss_lower_zbl bad_files.tn_a bad_files.tn_c_gauss_lower_zbl units.tn_a
    ensemble.tn_a_ens.f64 ensemble.tn_a_ens.f32)
  foreach(c ${_tn_cases})
    string(REPLACE "." ";" _args ${c})
    add_test(NAME model.tensornet.${c} COMMAND test_model_tensornet ${_args})
    set_tests_properties(model.tensornet.${c} PROPERTIES LABELS model SKIP_RETURN_CODE 77
      FIXTURES_REQUIRED "models;tensornet_models" ENVIRONMENT "${NNPOPS_TEST_ENV}")
  endforeach()
endif()
