# Unit tests (label "unit"): one CTest entry per case.  Included by tests/CMakeLists.txt.
#
# Each test program takes the case name as its only argument.  nnpops_internal_test() builds one
# executable per test NAME, so a program with many cases is built once, through its first case,
# and its other cases are registered against that same executable with the same properties.

# nnpops_unit_cases(PROGRAM SOURCE CASE...): CTest entries unit.PROGRAM.CASE, one per CASE.
function(nnpops_unit_cases program source)
  set(target "")
  foreach(case ${ARGN})
    if(target STREQUAL "")
      nnpops_internal_test(${program}.${case} unit ${source} ${case})
      set(target "test_unit_${program}.${case}") # the name nnpops_internal_test gives it
      string(REPLACE "." "_" target "${target}")
    else()
      add_test(NAME unit.${program}.${case} COMMAND ${target} ${case})
      set_tests_properties(unit.${program}.${case} PROPERTIES LABELS unit SKIP_RETURN_CODE 77
        FIXTURES_REQUIRED models ENVIRONMENT "${NNPOPS_TEST_ENV}")
    endif()
  endforeach()
  set(NNPOPS_UNIT_TARGET ${target} PARENT_SCOPE) # the program's target, for more settings
endfunction()

# nnpops_cuda_host_cases(PROGRAM SOURCE CASE...): nnpops_unit_cases for host code of the CUDA
# backend (built with it, needs no device).
function(nnpops_cuda_host_cases program source)
  nnpops_unit_cases(${program} ${source} ${ARGN})
  target_compile_definitions(${NNPOPS_UNIT_TARGET} PRIVATE NNPOPS_HAVE_CUDA=1)
  target_link_libraries(${NNPOPS_UNIT_TARGET} PRIVATE CUDA::cudart CUDA::cublas)
endfunction()

# SHA-256 (core/src/sha256.c): FIPS 180-4 example vectors and padding boundaries.
nnpops_unit_cases(sha256 ${CMAKE_CURRENT_LIST_DIR}/test_sha256.c
  empty abc 448bit 896bit million_a boundaries)

# YAML configuration reader (core/src/config.c).
nnpops_unit_cases(config ${CMAKE_CURRENT_LIST_DIR}/test_config.c
  doubles_ok double_errors ints bools strings structure syntax_error truncated empty depth
  aliases duplicate_keys json load_file too_large locale)

# safetensors weights reader (core/src/safetensors.c).
nnpops_unit_cases(safetensors ${CMAKE_CURRENT_LIST_DIR}/test_safetensors.c
  valid wrong_dtype wrong_shape missing_tensor truncated header_past_end header_too_large
  not_json offsets_past_end overlap overflow unknown_dtype non_utf8_name duplicate_name
  sha256_mismatch many_tensors)

# Model loading (core/src/model.c): resolution, common keys, devices, weights.
nnpops_unit_cases(model ${CMAKE_CURRENT_LIST_DIR}/test_model.c
  lj_ok search_path not_found_ani not_found_generic path_missing malformed_yaml truncated_yaml
  unknown_element duplicate_species unknown_type missing_key not_nnpops format_version
  unknown_key bad_units bad_name device_not_built no_device bad_device bad_args accessors_null
  ani_ok ani_no_weights weights_checksum weights_missing_file weights_bad_sha wrong_tensor_shape
  missing_tensor potential_error)

# The neighbor lists a potential chooses (vt->neighbor_lists) on the CPU step: each form gives the
# default half list's results.
nnpops_unit_cases(lists ${CMAKE_CURRENT_LIST_DIR}/test_lists.c
  half_ghost_pairs full_local full_ghost)

# Worker threads of CPU steps (core/src/pool.c): the static split of a job's shares, the pool
# kept between jobs, a worker that cannot be started, the threads' barrier.
nnpops_unit_cases(pool ${CMAKE_CURRENT_LIST_DIR}/test_pool.c shares partial barrier)
target_link_libraries(${NNPOPS_UNIT_TARGET} PRIVATE Threads::Threads)

# The AEV restricted to the species present (potentials/ani/cpu/aev.c), which the GPU step computes.
nnpops_unit_cases(aev_restrict ${CMAKE_CURRENT_LIST_DIR}/test_aev_restrict.c lengths random)

# The ANI GPU step's host-side plan (potentials/ani/ani_cuda.c: side streams, work space); built
# with the CUDA backend, needs no device.
if(NNPOPS_ENABLE_CUDA)
  nnpops_cuda_host_cases(ani_layout ${CMAKE_CURRENT_LIST_DIR}/test_ani_layout.c
    protein water small one_large float64 single work)
  # The GPU neighbor search's choice of algorithm (kernels/cuda/neighbors.cu, host code).
  nnpops_cuda_host_cases(nbr_plan ${CMAKE_CURRENT_LIST_DIR}/test_nbr_plan.c
    wide_box wide_water wide_mid wide_large thin triclinic_wide mixed batch tiny very_thin)
endif()
