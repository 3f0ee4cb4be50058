# Emulated GPU tests (label "emu"): the library built with its CUDA backend for the CPU, every
# kernel (NNPOPS_CUDA_KERNEL_FILES: kernels/cuda/*.cu and the potentials' cuda/*.cu) compiled as C++ against the stand-in headers of tests/emu/include
# (every launch runs at once, or is recorded while a stream is captured into a graph; threads are
# fibers that switch at warp collectives and block barriers, a cluster's blocks run together:
# emu.cpp; cuBLAS is a plain GEMM; the asynchronous copies are plain copies and TensorNet's
# tensor-core products plain arithmetic on the same tiles, NNPOPS_CUDA_EMULATION), and the GPU
# tests of tests/gpu run against it: every op against its CPU twin, and the models on device
# "cuda" through the public API.  They check the logic of the GPU path (kernels, the step's host
# code, graphs, capacity growth, status words) where no GPU is present, as in CI; the GPU tests
# on a GPU (label gpu) remain the test of the real device (memory ordering, concurrency, timing,
# the hardware's approximate reciprocals and roots).
# Emulated, each case takes the smallest inputs that take its code paths (tests/gpu/emulated.h:
# a subset of the reference systems, boxes of a few dozen to a few hundred atoms, systems just
# above each algorithm's threshold); on a GPU the same programs keep their full sizes.
# Built in CPU-only configurations on Linux (x86-64, or ucontext elsewhere) when a C++ compiler
# is present, not in sanitizer builds (the fibers' stacks would need their annotations).
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
# nnpops_emu_source(CU OUT_VAR): the C++ source launches.py makes of the CUDA source CU
# (build/emu/<name>.emu.cpp), its path in OUT_VAR
function(nnpops_emu_source cu out_var)
  get_filename_component(name ${cu} NAME_WE)
  set(gen ${CMAKE_BINARY_DIR}/emu/${name}.emu.cpp)
  add_custom_command(OUTPUT ${gen}
    COMMAND ${Python3_EXECUTABLE} ${emu_dir}/launches.py ${cu} ${gen}
    DEPENDS ${emu_dir}/launches.py ${cu}
    COMMENT "emulated kernels: ${name}.cu")
  set(${out_var} ${gen} PARENT_SCOPE)
endfunction()
set(emu_kernels)
foreach(cu ${NNPOPS_CUDA_KERNEL_FILES})
  nnpops_emu_source(${PROJECT_SOURCE_DIR}/${cu} gen)
  list(APPEND emu_kernels ${gen})
endforeach()
set(emu_lib_sources ${NNPOPS_CORE_SOURCES} ${NNPOPS_CPU_KERNEL_SOURCES}
  ${NNPOPS_POTENTIAL_SOURCES} ${NNPOPS_CUDA_HOST_SOURCES})
list(TRANSFORM emu_lib_sources PREPEND ${PROJECT_SOURCE_DIR}/)

# nnpops_emu_library(NAME RUNTIME DEFINITION...): the library with its CUDA backend and every
# kernel, built for the CPU against the stand-in RUNTIME (sources or objects of emu.cpp), with
# the compile definitions given besides the emulation's own.
function(nnpops_emu_library name runtime)
  add_library(${name} STATIC EXCLUDE_FROM_ALL ${emu_lib_sources} ${emu_kernels} ${runtime})
  # the stand-in headers come first (cuda_runtime.h, cub, cuBLAS, cooperative groups)
  target_include_directories(${name} BEFORE PUBLIC ${emu_dir}/include)
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/core/include ${NNPOPS_GENERATED_INCLUDE_DIR}
    ${PROJECT_SOURCE_DIR}/core/src ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/kernels/cuda
    ${PROJECT_SOURCE_DIR}/kernels/cpu)
  target_compile_definitions(${name} PUBLIC NNPOPS_HAVE_CUDA=1 NNPOPS_CUDA_EMULATION=1 ${ARGN})
  # the kernels' explicit roundings are the host's operations, never contracted
  target_compile_options(${name} PRIVATE -ffp-contract=off)
  set_target_properties(${name} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  target_link_libraries(${name} PUBLIC PkgConfig::YAML Threads::Threads m)
endfunction()
nnpops_emu_library(nnpops_emu ${emu_dir}/emu.cpp)

# nnpops_emu_program(KIND PROGRAM SOURCE CASE...): the GPU test program SOURCE against the
# emulated library, one CTest entry a case (threads in a random, reproducible order:
# NNPOPS_EMU_SEED, see emu.cpp).  KIND plain: test_emu_<PROGRAM> against nnpops_emu, entries
# emu.<PROGRAM>.<case>, label emu; KIND race: test_emu_race_<PROGRAM> against nnpops_emu_race
# (built on demand), entries tsan.emu.<PROGRAM>.<case>, labels tsan and emu_race.
function(nnpops_emu_program kind program source)
  if(kind STREQUAL "race")
    set(target test_emu_race_${program})
    set(all EXCLUDE_FROM_ALL)
    set(lib nnpops_emu_race)
    set(prefix tsan.emu)
    set(labels "tsan;emu_race")
    set(timeout 1800)
    set(env ";TSAN_OPTIONS=${race_tsan_options}")
  else()
    set(target test_emu_${program})
    set(all)
    set(lib nnpops_emu)
    set(prefix emu)
    set(labels emu)
    set(timeout 1200)
    set(env)
  endif()
  add_executable(${target} ${all} ${source})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common
    ${PROJECT_SOURCE_DIR}/tests/gpu)
  target_link_libraries(${target} PRIVATE ${lib})
  if(kind STREQUAL "race")
    add_dependencies(emu_race_tests ${target})
  endif()
  foreach(case ${ARGN})
    string(REPLACE " " ";" case_args "${case}")
    string(REPLACE " " "." case_name "${case}")
    add_test(NAME ${prefix}.${program}.${case_name} COMMAND ${target} ${case_args})
    set_tests_properties(${prefix}.${program}.${case_name} PROPERTIES LABELS "${labels}"
      TIMEOUT ${timeout} SKIP_RETURN_CODE 77 FIXTURES_REQUIRED models
      ENVIRONMENT "${NNPOPS_TEST_ENV};NNPOPS_EMU_SEED=1${env}")
  endforeach()
endfunction()

set(gpu_src ${PROJECT_SOURCE_DIR}/tests/gpu)
nnpops_emu_program(plain ops ${gpu_src}/test_gpu_ops.c neighbors_center neighbors_half
  neighbors_overflow neighbors_onepass neighbors_errors center_lists aev dense celu fused reduce
  reduce_step small_gemm sg_tail stage lj lj_model lj_ghost_centers ani_columns)
set(emu_model_cases)
foreach(model ani2x ani1x)
  foreach(prec f64 f32)
    list(APPEND emu_model_cases "reference ${model} ${prec}" "cpu_match ${model} ${prec}")
  endforeach()
endforeach()
nnpops_emu_program(plain model ${gpu_src}/test_gpu_model.c ${emu_model_cases} fd batch batch_f32
  ghosts member water_box species_sets errors thread tensornet)
set_tests_properties(emu.model.tensornet PROPERTIES FIXTURES_REQUIRED "models;tensornet_models")
# (not emulated: graphs deterministic, 100 steps of a 10^4-atom system, and 3xTF32 auto / chunks,
# GEMMs of 10^4 columns: each takes more than 20 minutes here)
nnpops_emu_program(plain graphs ${gpu_src}/test_gpu_graphs.c warmup shape overflow)
nnpops_emu_program(plain device ${gpu_src}/test_gpu_device.c capture batch errors overflow
  capture_failure cpu_model)
nnpops_emu_program(plain tf32x3 ${gpu_src}/test_gpu_tf32x3.c stack fused gemm model)
nnpops_emu_program(plain tensornet ${gpu_src}/test_gpu_tensornet.c compose_f64 compose_f32
  ops_f64 ops_f32 step_f64 step_f32 tiles_f64 tiles_f32 gemm_f32 pairs)
# TensorNet models on "cuda" through the public API against torchmd-net's values (the reference
# case keeps a 13-atom molecule and the batch with charges when emulated)
nnpops_emu_program(plain tensornet_model ${PROJECT_SOURCE_DIR}/tests/model/test_tensornet.c
  "reference tn_a f64 cuda" "reference tn_a f32 cuda" "reference tn_b_oldlayout_so3 f64 cuda"
  "reference tn_c_gauss_lower_zbl f64 cuda" "reference tn_d_lightning_f32 f32 cuda"
  "replica tn_a f64 cuda" "batch tn_a f64 cuda" "ghosts tn_a f64 cuda")
foreach(c "reference.tn_a.f64.cuda" "reference.tn_a.f32.cuda" "reference.tn_b_oldlayout_so3.f64.cuda"
    "reference.tn_c_gauss_lower_zbl.f64.cuda" "reference.tn_d_lightning_f32.f32.cuda"
    "replica.tn_a.f64.cuda" "batch.tn_a.f64.cuda" "ghosts.tn_a.f64.cuda")
  set_tests_properties(emu.tensornet_model.${c} PROPERTIES
    FIXTURES_REQUIRED "models;tensornet_models")
endforeach()

# The race model (emu.cpp, EMU_TSAN): with -DNNPOPS_TSAN=ON and clang (whose ThreadSanitizer
# switches fibers in well under a microsecond), the same library, kernels and GPU test programs
# under ThreadSanitizer, the stand-in itself (emu.cpp) uninstrumented; every GPU thread a fiber
# of its own, ordered only by what orders memory on the GPU (barriers, __syncwarp, fences,
# programmatic launches' triggers and waits, stream order, host synchronization).  Label tsan
# (with the other ThreadSanitizer tests: .ci/sanitize.sh); any report fails the case.
if(NOT NNPOPS_TSAN)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR NOT CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  message(STATUS "nnpops: the emulated race tests need clang on x86-64: not built")
  return()
endif()
# reports name the kernels' lines (llvm-symbolizer); the known ones are suppressed (race.supp)
find_program(NNPOPS_LLVM_SYMBOLIZER NAMES llvm-symbolizer llvm-symbolizer-14
  PATHS /usr/lib/llvm-14/bin)
set(race_tsan_options "halt_on_error=1:exitcode=66:suppressions=${emu_dir}/race.supp")
if(NNPOPS_LLVM_SYMBOLIZER)
  string(APPEND race_tsan_options ":external_symbolizer_path=${NNPOPS_LLVM_SYMBOLIZER}")
else()
  message(WARNING "nnpops: no llvm-symbolizer: the race tests' suppressions (by function) "
    "cannot match")
endif()
add_library(nnpops_emu_race_rt OBJECT EXCLUDE_FROM_ALL ${emu_dir}/emu.cpp)
target_include_directories(nnpops_emu_race_rt BEFORE PRIVATE ${emu_dir}/include)
target_compile_definitions(nnpops_emu_race_rt PRIVATE EMU_TSAN=1 NNPOPS_HAVE_CUDA=1
  NNPOPS_CUDA_EMULATION=1)
set_target_properties(nnpops_emu_race_rt PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
nnpops_emu_library(nnpops_emu_race $<TARGET_OBJECTS:nnpops_emu_race_rt> EMU_TSAN=1)
# every program of the race model (built on demand: .ci/sanitize.sh builds this target)
add_custom_target(emu_race_tests)
target_compile_options(nnpops_emu_race PUBLIC -fsanitize=thread -g -fno-omit-frame-pointer)
target_link_options(nnpops_emu_race PUBLIC -fsanitize=thread)

nnpops_emu_program(race ops ${gpu_src}/test_gpu_ops.c neighbors_center
  neighbors_half neighbors_overflow neighbors_onepass neighbors_errors center_lists aev dense celu fused reduce
  reduce_step small_gemm sg_tail stage)
nnpops_emu_program(race model ${gpu_src}/test_gpu_model.c
  "reference ani2x f32" "reference ani1x f64" "cpu_match ani1x f32" batch_f32 ghosts errors fd
  member)
nnpops_emu_program(race graphs ${gpu_src}/test_gpu_graphs.c warmup shape)
# (3 to 8 minutes each under the race model, paths the other cases take too: label slow, out of
# .ci/sanitize.sh)
set_tests_properties(tsan.emu.model.fd tsan.emu.model.member tsan.emu.graphs.shape PROPERTIES
  LABELS "tsan;emu_race;slow")
nnpops_emu_program(race device ${gpu_src}/test_gpu_device.c capture batch
  errors capture_failure)
nnpops_emu_program(race tf32x3 ${gpu_src}/test_gpu_tf32x3.c stack fused gemm)
nnpops_emu_program(race tensornet ${gpu_src}/test_gpu_tensornet.c ops_f32 ops_f64 step_f32
  gemm_f32 tiles_f32 pairs)

# The race model's own check (race_selftest.cu): each case without its ordering must be reported,
# with it must run clean.
nnpops_emu_source(${emu_dir}/race_selftest.cu race_self)
add_executable(test_emu_race_selftest EXCLUDE_FROM_ALL ${race_self})
target_link_libraries(test_emu_race_selftest PRIVATE nnpops_emu_race)
add_dependencies(emu_race_tests test_emu_race_selftest)
foreach(case barrier warp blocks ticket pdl host)
  foreach(ordered 0 1)
    set(name tsan.emu.selftest.${case}.${ordered})
    add_test(NAME ${name} COMMAND test_emu_race_selftest ${case} ${ordered})
    set_tests_properties(${name} PROPERTIES LABELS "tsan;emu_race" TIMEOUT 120
      ENVIRONMENT "TSAN_OPTIONS=${race_tsan_options}")
    if(ordered EQUAL 0) # (the output decides: a report, whatever the exit status)
      set_tests_properties(${name} PROPERTIES
        PASS_REGULAR_EXPRESSION "WARNING: ThreadSanitizer: data race")
    endif()
  endforeach()
endforeach()
