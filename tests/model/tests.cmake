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

# ---- benchmark (an executable, not a test): build/tests/bench_cpu [max_atoms [model]] ------------
if(NOT TARGET bench_cpu)
  add_executable(bench_cpu ${PROJECT_SOURCE_DIR}/tests/bench/bench_cpu.c)
  target_link_libraries(bench_cpu PRIVATE nnpops::nnpops m)
  target_include_directories(bench_cpu PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
endif()
