# Emulated GPU tests (label "emu"): the cases of tests/gpu/test_gpu_ops.c for the neighbor search,
# staging, AEV, reductions and the networks' GEMMs and element-wise kernels run against the
# kernels of kernels/cuda/{neighbors,device_io,aev,reduce,mlp}.cu compiled as C++ for the CPU
# with the stand-in headers of tests/emu/include (every launch runs at once; threads are fibers
# that switch at warp collectives and block barriers: emu.cpp; cuBLAS a plain GEMM; the
# asynchronous copies plain copies, NNPOPS_CUDA_EMULATION).  They check the kernels' logic where
# no GPU is present, as in CI; the GPU tests (label gpu) remain the test of the real device
# (memory ordering, concurrency, timing, the hardware's approximate reciprocals and roots).  Built
# in CPU-only configurations (a CUDA build links the real kernels) on Linux (x86-64, or ucontext
# elsewhere) when a C++ compiler is present, not in sanitizer builds (the fibers' stacks would
# need their annotations).  Not emulated: the networks' tails in one launch (thread block
# clusters, tail.cu) and the 3xTF32 tensor-core GEMMs (tf32x3.cu); the launchers of their cases
# are left unresolved (never called), which the link allows.
if(NNPOPS_ENABLE_CUDA OR NNPOPS_SANITIZE OR NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
  return()
endif()
include(CheckLanguage)
check_language(CXX)
if(NOT CMAKE_CXX_COMPILER)
  message(STATUS "nnpops: no C++ compiler: the emulated GPU tests (label emu) are not built")
  return()
endif()
enable_language(CXX)

set(emu_dir ${CMAKE_CURRENT_LIST_DIR})
set(emu_sources ${emu_dir}/emu.cpp)
foreach(k neighbors device_io aev reduce mlp)
  set(gen ${CMAKE_BINARY_DIR}/emu/${k}.emu.cpp)
  add_custom_command(OUTPUT ${gen}
    COMMAND ${Python3_EXECUTABLE} ${emu_dir}/launches.py ${PROJECT_SOURCE_DIR}/kernels/cuda/${k}.cu
            ${gen}
    DEPENDS ${emu_dir}/launches.py ${PROJECT_SOURCE_DIR}/kernels/cuda/${k}.cu
    COMMENT "emulated kernels: ${k}.cu")
  list(APPEND emu_sources ${gen})
endforeach()
add_executable(test_emu_ops ${emu_sources} ${PROJECT_SOURCE_DIR}/tests/gpu/test_gpu_ops.c)
# the stand-in headers come first (cuda_runtime.h, cub); the kernels' own includes after them
target_include_directories(test_emu_ops BEFORE PRIVATE ${emu_dir}/include)
target_include_directories(test_emu_ops PRIVATE ${PROJECT_SOURCE_DIR}/kernels/cuda
  ${PROJECT_SOURCE_DIR}/kernels/cpu ${PROJECT_SOURCE_DIR}/tests/common
  ${PROJECT_SOURCE_DIR}/tests/gpu)
target_compile_definitions(test_emu_ops PRIVATE NNPOPS_HAVE_CUDA=1 NNPOPS_CUDA_EMULATION=1)
# the kernels' explicit roundings are the host's operations, never contracted
target_compile_options(test_emu_ops PRIVATE -ffp-contract=off)
set_target_properties(test_emu_ops PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
  POSITION_INDEPENDENT_CODE OFF)
# nnpops_cuda_device_count: the stand-in's (1) before the CPU library's (0); the launchers of the
# cases not emulated stay unresolved (a non-PIE link, so that none needs a PLT entry)
target_link_options(test_emu_ops PRIVATE -no-pie LINKER:--allow-multiple-definition
  LINKER:--unresolved-symbols=ignore-all)
target_link_libraries(test_emu_ops PRIVATE nnpops_internal m)
foreach(case neighbors_center neighbors_half neighbors_overflow neighbors_errors center_lists stage
             aev reduce reduce_step dense celu fused small_gemm)
  add_test(NAME emu.ops.${case} COMMAND test_emu_ops ${case})
  # (threads in a random order, reproducible: see emu.cpp)
  set_tests_properties(emu.ops.${case} PROPERTIES LABELS emu TIMEOUT 1200
    FIXTURES_REQUIRED models ENVIRONMENT "${NNPOPS_TEST_ENV};NNPOPS_EMU_SEED=1")
endforeach()
