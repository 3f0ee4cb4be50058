# Fuzzing of the model reader (tests/fuzz; docs/reliability.md).  Included by
# tests/unit/reliability.cmake.
#
#  unit.fuzz.corpus            writes the seed corpus (gen_corpus.py) into <build>/fuzz-corpus
#                              (fixture fuzz_corpus; also the tiny weights of the YAML target)
#  unit.fuzz.replay.yaml       the fuzz targets, built with the project's compiler and
#  unit.fuzz.replay.safetensors  replay_main.c, over the seed corpus and tests/fuzz/regressions/
#  unit.hostile.CASE           hostile model files through nnpops_model_load (test_hostile.c)
#  fuzz.yaml, fuzz.safetensors with -DNNPOPS_FUZZ=ON (clang only): libFuzzer with ASan+UBSan for
#                              NNPOPS_FUZZ_SECONDS each (label fuzz; .ci/sanitize.sh runs them)

option(NNPOPS_FUZZ "Build the libFuzzer targets (clang; label fuzz)" OFF)
set(NNPOPS_FUZZ_SECONDS 60 CACHE STRING "Seconds each libFuzzer target runs in its CTest entry")

set(NNPOPS_FUZZ_CORPUS ${CMAKE_BINARY_DIR}/fuzz-corpus)
set(_nnpops_fuzz_dir ${CMAKE_CURRENT_LIST_DIR})
set(_nnpops_fuzz_env ${NNPOPS_TEST_ENV} "NNPOPS_FUZZ_WEIGHTS=${NNPOPS_FUZZ_CORPUS}/tiny.safetensors")

if(NOT TEST unit.fuzz.corpus)
  add_test(NAME unit.fuzz.corpus
    COMMAND ${Python3_EXECUTABLE} ${_nnpops_fuzz_dir}/gen_corpus.py ${NNPOPS_FUZZ_CORPUS})
  set_tests_properties(unit.fuzz.corpus PROPERTIES FIXTURES_SETUP fuzz_corpus LABELS "unit;fuzz")

  # ---- replay of the corpus and the regression inputs (any compiler) ----
  foreach(target yaml safetensors)
    add_executable(fuzz_replay_${target} ${_nnpops_fuzz_dir}/fuzz_${target}.c
      ${_nnpops_fuzz_dir}/replay_main.c)
    target_link_libraries(fuzz_replay_${target} PRIVATE nnpops_internal)
    add_test(NAME unit.fuzz.replay.${target}
      COMMAND fuzz_replay_${target} ${NNPOPS_FUZZ_CORPUS}/${target}
              ${_nnpops_fuzz_dir}/regressions/${target})
    set_tests_properties(unit.fuzz.replay.${target} PROPERTIES LABELS unit
      FIXTURES_REQUIRED fuzz_corpus ENVIRONMENT "${_nnpops_fuzz_env}")
  endforeach()

  # ---- hostile model files through the loader ----
  add_executable(test_unit_hostile ${_nnpops_fuzz_dir}/test_hostile.c)
  target_include_directories(test_unit_hostile PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  target_link_libraries(test_unit_hostile PRIVATE nnpops_internal)
  foreach(case tiny_ok weights_directory weights_fifo weights_device st_wrong_dtype
               st_unknown_dtype st_past_end st_offset_huge st_overlap st_huge_shape st_non_utf8
               st_nonfinite st_extra_tensor st_header_cut yaml_deep yaml_aliases
               yaml_huge_numbers network_larger_than_weights)
    add_test(NAME unit.hostile.${case} COMMAND test_unit_hostile ${case})
    set_tests_properties(unit.hostile.${case} PROPERTIES LABELS unit SKIP_RETURN_CODE 77
      TIMEOUT 60 FIXTURES_REQUIRED fuzz_corpus ENVIRONMENT "${_nnpops_fuzz_env}")
  endforeach()

  # ---- libFuzzer targets ----
  if(NNPOPS_FUZZ)
    if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
      message(FATAL_ERROR "NNPOPS_FUZZ needs clang (libFuzzer): configure with CC=clang")
    endif()
    # -O1 after the build type's flags (libFuzzer's usual level); UBSan does not recover, so a
    # report is a crash (the "cov" counts are about 4x lower than with recoverable UBSan checks,
    # whose extra branches count as edges without being more code)
    set(_nnpops_fuzz_flags -O1 -fsanitize=fuzzer-no-link,address,undefined
        -fno-sanitize-recover=all -fno-omit-frame-pointer -g)
    set(_nnpops_fuzz_lib ${NNPOPS_CORE_SOURCES} ${NNPOPS_CPU_KERNEL_SOURCES}
        ${NNPOPS_POTENTIAL_SOURCES})
    list(TRANSFORM _nnpops_fuzz_lib PREPEND ${PROJECT_SOURCE_DIR}/)
    # the library compiled once with coverage instrumentation, shared by both targets
    add_library(nnpops_fuzz_objects OBJECT ${_nnpops_fuzz_lib})
    target_include_directories(nnpops_fuzz_objects PUBLIC ${PROJECT_SOURCE_DIR}/core/include ${NNPOPS_GENERATED_INCLUDE_DIR}
      ${PROJECT_SOURCE_DIR}/core/src ${PROJECT_SOURCE_DIR})
    target_compile_options(nnpops_fuzz_objects PRIVATE ${_nnpops_fuzz_flags})
    target_link_libraries(nnpops_fuzz_objects PRIVATE PkgConfig::YAML)
    foreach(target yaml safetensors)
      add_executable(fuzz_${target} ${_nnpops_fuzz_dir}/fuzz_${target}.c
        $<TARGET_OBJECTS:nnpops_fuzz_objects>)
      target_include_directories(fuzz_${target} PRIVATE ${PROJECT_SOURCE_DIR}/core/include ${NNPOPS_GENERATED_INCLUDE_DIR}
        ${PROJECT_SOURCE_DIR}/core/src ${PROJECT_SOURCE_DIR})
      target_compile_options(fuzz_${target} PRIVATE ${_nnpops_fuzz_flags} -fsanitize=fuzzer)
      target_link_options(fuzz_${target} PRIVATE -fsanitize=fuzzer,address,undefined)
      target_link_libraries(fuzz_${target} PRIVATE PkgConfig::YAML Threads::Threads m)
      add_test(NAME fuzz.${target}
        COMMAND bash ${_nnpops_fuzz_dir}/run_fuzz.sh $<TARGET_FILE:fuzz_${target}> ${target}
                ${NNPOPS_FUZZ_SECONDS} ${CMAKE_BINARY_DIR}/fuzz-work/${target}
                ${NNPOPS_FUZZ_CORPUS}/${target} ${_nnpops_fuzz_dir}/regressions/${target})
      set_tests_properties(fuzz.${target} PROPERTIES LABELS fuzz
        FIXTURES_REQUIRED fuzz_corpus ENVIRONMENT "${_nnpops_fuzz_env}")
    endforeach()
  endif()
endif()
