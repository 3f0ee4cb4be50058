# Reliability tests (docs/reliability.md).  Included at the end of tests/CMakeLists.txt.
#
#  unit.bad_inputs.CASE        the bad-input matrix of the public API (test_bad_inputs.c): each
#                              error's status and message, then the same context recovers
#  unit.threads.CASE           one model shared by 8 threads (test_threads.c), bitwise equal to
#                              the serial results; concurrent loads; thread-local error messages;
#                              one context's step on several threads (option threads), its bits
#                              the same as on one thread, also in a forked child
#  tsan.threads.CASE           the same under ThreadSanitizer, with -DNNPOPS_TSAN=ON (its own
#                              build directory: .ci/sanitize.sh)
#  tests/fuzz/tests.cmake      fuzz targets, corpus replay, hostile model files
# The soak test is tests/slow/tests.cmake (label slow, included with the other folders).

include(${CMAKE_CURRENT_LIST_DIR}/../fuzz/tests.cmake)

# nnpops_reliability_cases(PROGRAM SOURCE LABEL CASES... [ARGS a b ...]): entries LABEL.PROGRAM.CASE
function(nnpops_reliability_cases program source label)
  cmake_parse_arguments(PARSE_ARGV 3 R "" "" "CASES;ARGS")
  set(target "test_${label}_${program}")
  if(NOT TARGET ${target})
    add_executable(${target} ${source})
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
    target_link_libraries(${target} PRIVATE nnpops::nnpops Threads::Threads m)
  endif()
  foreach(case ${R_CASES})
    if(NOT TEST ${label}.${program}.${case})
      add_test(NAME ${label}.${program}.${case} COMMAND ${target} ${case} ${R_ARGS})
      set_tests_properties(${label}.${program}.${case} PROPERTIES LABELS ${label}
        SKIP_RETURN_CODE 77 FIXTURES_REQUIRED models ENVIRONMENT "${NNPOPS_TEST_ENV}")
    endif()
  endforeach()
endfunction()

set(NNPOPS_BAD_INPUT_CASES
  struct_size charges null_pointers counts n_local batch_index unknown_element nonfinite_position
  atoms_too_close too_close_image singular_cell left_handed_cell nonfinite_cell too_many_images
  own_image neighbor_overflow model_truncated model_replaced options_range option_names
  load_arguments zero_atoms device_entry)
nnpops_reliability_cases(bad_inputs ${CMAKE_CURRENT_LIST_DIR}/test_bad_inputs.c unit
  CASES ${NNPOPS_BAD_INPUT_CASES})

# passes over each thread's systems: enough to interleave the threads, few enough for ASan (the
# suite runs under ASan in .ci/sanitize.sh) -- a model load (sha256 of 10 MB) per pass is slow there
# (under ThreadSanitizer; not step_threads_fork: ThreadSanitizer cannot start threads in a child
# forked from a process that has them)
set(NNPOPS_THREAD_CASES shared_model shared_model_f32 concurrent_load error_messages step_threads
  step_threads_f32)
nnpops_reliability_cases(threads ${CMAKE_CURRENT_LIST_DIR}/test_threads.c unit
  CASES shared_model shared_model_f32 error_messages ARGS 8)
nnpops_reliability_cases(threads ${CMAKE_CURRENT_LIST_DIR}/test_threads.c unit
  CASES step_threads step_threads_f32 step_threads_fork ARGS 3)
nnpops_reliability_cases(threads ${CMAKE_CURRENT_LIST_DIR}/test_threads.c unit
  CASES concurrent_load ARGS 2)

# ---- ThreadSanitizer: the library's sources and test_threads.c, all under -fsanitize=thread ----
option(NNPOPS_TSAN "Build test_threads under ThreadSanitizer (label tsan); not with NNPOPS_SANITIZE" OFF)
if(NNPOPS_TSAN AND NOT TARGET test_threads_tsan)
  if(NNPOPS_SANITIZE)
    message(FATAL_ERROR "NNPOPS_TSAN and NNPOPS_SANITIZE (ASan) cannot share a build directory")
  endif()
  set(_nnpops_tsan_sources ${NNPOPS_CORE_SOURCES} ${NNPOPS_CPU_KERNEL_SOURCES}
      ${NNPOPS_POTENTIAL_SOURCES})
  list(TRANSFORM _nnpops_tsan_sources PREPEND ${PROJECT_SOURCE_DIR}/)
  add_executable(test_threads_tsan ${CMAKE_CURRENT_LIST_DIR}/test_threads.c ${_nnpops_tsan_sources})
  target_include_directories(test_threads_tsan PRIVATE ${PROJECT_SOURCE_DIR}/tests/common
    ${PROJECT_SOURCE_DIR}/core/include ${NNPOPS_GENERATED_INCLUDE_DIR} ${PROJECT_SOURCE_DIR}/core/src
    ${PROJECT_SOURCE_DIR})
  target_compile_options(test_threads_tsan PRIVATE -fsanitize=thread -g -fno-omit-frame-pointer)
  target_link_options(test_threads_tsan PRIVATE -fsanitize=thread)
  target_link_libraries(test_threads_tsan PRIVATE PkgConfig::YAML Threads::Threads m)
  # fewer repetitions: ThreadSanitizer runs 5-15x slower
  foreach(case ${NNPOPS_THREAD_CASES})
    add_test(NAME tsan.threads.${case} COMMAND test_threads_tsan ${case} 2)
    set_tests_properties(tsan.threads.${case} PROPERTIES LABELS tsan SKIP_RETURN_CODE 77
      FIXTURES_REQUIRED models
      ENVIRONMENT "${NNPOPS_TEST_ENV};TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1")
  endforeach()
endif()
