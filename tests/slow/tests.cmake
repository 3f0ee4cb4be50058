# Slow tests (label "slow"; not in CI: `ctest -L slow`).  Included by tests/CMakeLists.txt.
#
#  slow.soak.small   10^5 steps of a 24-atom water cluster (ANI-1x): RSS flat within 5 %
#  slow.soak.large   10^3 steps of a ~10^4-atom periodic water box whose atom count changes
#                    every step: RSS flat within 5 %
# A run's log (stdout) is summarised in docs/reliability.md, not committed.
# GPU runs (test_slow_soak KIND STEPS MODEL cuda [graphs], by hand or by tests/bench/device_run.sh
# soak) also require the GPU memory in use not to grow after the warm-up.
if(NOT TARGET test_slow_soak)
  add_executable(test_slow_soak ${CMAKE_CURRENT_LIST_DIR}/soak.c)
  target_include_directories(test_slow_soak PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  target_link_libraries(test_slow_soak PRIVATE nnpops::nnpops m)
  if(NNPOPS_ENABLE_CUDA)
    # GPU soak runs (soak KIND STEPS MODEL cuda [graphs]) read the GPU memory in use
    target_compile_definitions(test_slow_soak PRIVATE NNPOPS_SOAK_CUDA=1)
    target_link_libraries(test_slow_soak PRIVATE CUDA::cudart)
  endif()
endif()
foreach(kind small large)
  if(kind STREQUAL "small")
    set(_steps 100000)
  else()
    set(_steps 1000)
  endif()
  add_test(NAME slow.soak.${kind} COMMAND test_slow_soak ${kind} ${_steps})
  set_tests_properties(slow.soak.${kind} PROPERTIES LABELS slow SKIP_RETURN_CODE 77
    TIMEOUT 7200 FIXTURES_REQUIRED models ENVIRONMENT "${NNPOPS_TEST_ENV}")
endforeach()
