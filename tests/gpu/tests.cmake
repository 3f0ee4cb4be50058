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
#   gpu.tensornet.* TensorNet's ops over center lists against their CPU twins, the composed step
#                against the CPU pass (test_gpu_tensornet.c); gpu.tensornet_model.* the TensorNet
#                reference models on "cuda" (tests/model/test_tensornet.c)
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
             lj_model lj_ghost_centers ani_columns)
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
# a tensornet model on "cuda": a charged batch against the CPU model
nnpops_gpu_model_test(tensornet tensornet)
set_tests_properties(gpu.model.tensornet PROPERTIES FIXTURES_REQUIRED "models;tensornet_models")

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
nnpops_gpu_graphs_test(replay_tn_a_f64 replay f64 tn_a)
nnpops_gpu_graphs_test(replay_tn_a_f32 replay f32 tn_a)
set_tests_properties(gpu.graphs.replay_tn_a_f64 gpu.graphs.replay_tn_a_f32 PROPERTIES
  FIXTURES_REQUIRED "models;tensornet_models")
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
nnpops_gpu_device_test(capture_tn_a capture tn_a)
set_tests_properties(gpu.device.capture_tn_a PROPERTIES FIXTURES_REQUIRED "models;tensornet_models")

# 3xTF32 GEMMs (test_gpu_tf32x3.c)
add_executable(test_gpu_tf32x3 ${CMAKE_CURRENT_LIST_DIR}/test_gpu_tf32x3.c)
nnpops_gpu_internal_program(test_gpu_tf32x3)
foreach(case stack fused gemm model auto chunks)
  add_test(NAME gpu.ops.tf32x3_${case} COMMAND test_gpu_tf32x3 ${case})
  set_tests_properties(gpu.ops.tf32x3_${case} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED models ENVIRONMENT "${NNPOPS_TEST_ENV}")
endforeach()

# TensorNet models on "cuda" through the public API: torchmd-net's reference values (every model,
# both precisions), finite differences, the replica, batches with charges, ghosts
# (tests/model/test_tensornet.c with the device argument)
if(TARGET test_model_tensornet)
  set(_tn_gpu_cases)
  foreach(m tn_a tn_a_member2 tn_b_oldlayout_so3 tn_c_gauss_lower_zbl tn_d_lightning_f32)
    list(APPEND _tn_gpu_cases reference.${m}.f64 reference.${m}.f32)
  endforeach()
  list(APPEND _tn_gpu_cases fd.tn_a.f64 fd.tn_c_gauss_lower_zbl.f64 replica.tn_a.f64
    batch.tn_a.f64 batch.tn_c_gauss_lower_zbl.f64 ghosts.tn_a.f64 ghosts.tn_c_gauss_lower_zbl.f64)
  foreach(c ${_tn_gpu_cases})
    string(REPLACE "." ";" _args ${c})
    add_test(NAME gpu.tensornet_model.${c} COMMAND test_model_tensornet ${_args} cuda)
    set_tests_properties(gpu.tensornet_model.${c} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
      FIXTURES_REQUIRED "models;tensornet_models" ENVIRONMENT "${NNPOPS_TEST_ENV}")
  endforeach()
endif()

# TensorNet's ops over center lists: each CUDA op against its CPU twin, the composed step
# against the CPU pass (test_gpu_tensornet.c; the compose cases need no GPU)
add_executable(test_gpu_tensornet ${CMAKE_CURRENT_LIST_DIR}/test_gpu_tensornet.c)
nnpops_gpu_internal_program(test_gpu_tensornet)
foreach(case compose_f64 compose_f32 ops_f64 ops_f32 step_f64 step_f32 tiles_f64 tiles_f32 gemm_f32
    pairs)
  add_test(NAME gpu.tensornet.${case} COMMAND test_gpu_tensornet ${case})
  set_tests_properties(gpu.tensornet.${case} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED models ENVIRONMENT "${NNPOPS_TEST_ENV}")
endforeach()

# Benchmark: build/tests/bench_gpu (see docs/performance.md)
add_executable(bench_gpu ${PROJECT_SOURCE_DIR}/tests/bench/bench_gpu.c)
nnpops_gpu_internal_program(bench_gpu)
