# GPU tests (label "gpu"), one CTest entry per case; each exits 77 (skipped) when
# nnpops_cuda_device_count() == 0.  Included by tests/CMakeLists.txt.
#   gpu.ops.*    every CUDA op against its CPU twin (test_gpu_ops.c, internal functions)
#   gpu.model.*  the ANI models on device "cuda" through the public API (test_gpu_model.c)
#   gpu.ops.tf32x3_* the 3xTF32 tensor-core GEMMs against a float64 CPU GEMM, option tensor_cores
#                    on / off / auto in the model (test_gpu_tf32x3.c)
#   gpu.graphs.* CUDA graphs (replay = eager, warm-up, shape changes, overflow) and deterministic
#                mode (test_gpu_graphs.c)
#   gpu.device.* the experimental device-pointer entry nnpops_compute_device (its plans, the
#                caller's graph captures, device-side checks, overflow) and a provoked capture
#                failure of the library's own graphs (test_gpu_device.c)
# The benchmark bench_gpu (tests/bench/bench_gpu.c) is built here too (not a test).
if(NOT NNPOPS_ENABLE_CUDA)
  return()
endif()

# Programs that call internal functions link the static archive of the library's objects
# (nnpops_internal); they use the CUDA runtime and cuBLAS themselves too.
function(nnpops_gpu_internal_program target)
  target_link_libraries(${target} PRIVATE nnpops_internal CUDA::cudart CUDA::cublas)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common
    ${CMAKE_CURRENT_FUNCTION_LIST_DIR})
  target_compile_definitions(${target} PRIVATE NNPOPS_HAVE_CUDA=1)
endfunction()

add_executable(test_gpu_ops ${CMAKE_CURRENT_LIST_DIR}/test_gpu_ops.c)
nnpops_gpu_internal_program(test_gpu_ops)
foreach(case neighbors_center neighbors_half neighbors_overflow neighbors_onepass neighbors_errors
             center_lists aev dense celu fused reduce reduce_step small_gemm sg_tail stage lj
             lj_model)
  add_test(NAME gpu.ops.${case} COMMAND test_gpu_ops ${case})
  set_tests_properties(gpu.ops.${case} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED models ENVIRONMENT "${NNPOPS_TEST_ENV}")
endforeach()

add_executable(test_gpu_model ${CMAKE_CURRENT_LIST_DIR}/test_gpu_model.c)
target_include_directories(test_gpu_model PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
target_link_libraries(test_gpu_model PRIVATE nnpops::nnpops m Threads::Threads)
function(nnpops_gpu_model_test name)
  add_test(NAME gpu.model.${name} COMMAND test_gpu_model ${ARGN})
  set_tests_properties(gpu.model.${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED models ENVIRONMENT "${NNPOPS_TEST_ENV}")
endfunction()
foreach(model ani2x ani1x)
  foreach(prec f64 f32)
    nnpops_gpu_model_test(reference_${model}_${prec} reference ${model} ${prec})
    nnpops_gpu_model_test(cpu_match_${model}_${prec} cpu_match ${model} ${prec})
  endforeach()
endforeach()
foreach(case fd batch batch_f32 ghosts member water_box species_sets errors thread)
  nnpops_gpu_model_test(${case} ${case})
endforeach()
# a tensornet model (no GPU path) on "cuda" is NNPOPS_ERROR_UNSUPPORTED at load
nnpops_gpu_model_test(no_gpu_path no_gpu_path)
set_tests_properties(gpu.model.no_gpu_path PROPERTIES FIXTURES_REQUIRED "models;tensornet_models")

# CUDA graphs and deterministic mode (test_gpu_graphs.c)
add_executable(test_gpu_graphs ${CMAKE_CURRENT_LIST_DIR}/test_gpu_graphs.c)
target_include_directories(test_gpu_graphs PRIVATE ${PROJECT_SOURCE_DIR}/tests/common
  ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(test_gpu_graphs PRIVATE nnpops::nnpops m)
function(nnpops_gpu_graphs_test name)
  add_test(NAME gpu.graphs.${name} COMMAND test_gpu_graphs ${ARGN})
  set_tests_properties(gpu.graphs.${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED models ENVIRONMENT "${NNPOPS_TEST_ENV}")
endfunction()
nnpops_gpu_graphs_test(replay_f64 replay f64)
nnpops_gpu_graphs_test(replay_f32 replay f32)
foreach(case warmup shape overflow deterministic)
  nnpops_gpu_graphs_test(${case} ${case})
endforeach()

# The experimental device-pointer entry and the provoked capture failure of the library's own
# graphs (test_gpu_device.c; internal: the test hook nnpops__cuda_test_break_next_capture).
# cpu_model runs without a GPU too.
add_executable(test_gpu_device ${CMAKE_CURRENT_LIST_DIR}/test_gpu_device.c)
nnpops_gpu_internal_program(test_gpu_device)
function(nnpops_gpu_device_test name)
  add_test(NAME gpu.device.${name} COMMAND test_gpu_device ${ARGN})
  set_tests_properties(gpu.device.${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED models ENVIRONMENT "${NNPOPS_TEST_ENV}")
endfunction()
nnpops_gpu_device_test(match_ani2x_f64 match ani2x f64)
nnpops_gpu_device_test(match_ani2x_f32 match ani2x f32)
nnpops_gpu_device_test(match_ani1x_f64 match ani1x f64)
foreach(case capture batch errors overflow capture_failure cpu_model)
  nnpops_gpu_device_test(${case} ${case})
endforeach()

# 3xTF32 GEMMs (test_gpu_tf32x3.c)
add_executable(test_gpu_tf32x3 ${CMAKE_CURRENT_LIST_DIR}/test_gpu_tf32x3.c)
nnpops_gpu_internal_program(test_gpu_tf32x3)
foreach(case stack fused gemm model auto chunks)
  add_test(NAME gpu.ops.tf32x3_${case} COMMAND test_gpu_tf32x3 ${case})
  set_tests_properties(gpu.ops.tf32x3_${case} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED models ENVIRONMENT "${NNPOPS_TEST_ENV}")
endforeach()

# Benchmark: build/tests/bench_gpu (see docs/performance.md)
add_executable(bench_gpu ${PROJECT_SOURCE_DIR}/tests/bench/bench_gpu.c)
nnpops_gpu_internal_program(bench_gpu)
