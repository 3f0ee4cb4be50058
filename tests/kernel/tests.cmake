# Kernel tests (label "kernel"): one CTest entry per case.  Included by tests/CMakeLists.txt.

# ---- neighbor search -----------------------------------------------------------------------------
# Public nnpops_neighbor_pairs against a brute-force search over all periodic images.
foreach(case nonperiodic orthorhombic triclinic left_handed mixed_pbc slab half_width many_images
             far_outside tiny overflow bad_cell too_many_images invalid_argument random_mix)
  nnpops_c_test(neighbors.${case} kernel ${CMAKE_CURRENT_LIST_DIR}/test_neighbors.c ${case})
endforeach()
# The internal kernel (batches of systems, ghost atoms, overflow without a message, scratch size).
foreach(case batch skip_from overflow errors sparse empty)
  nnpops_internal_test(neighbors_internal.${case} kernel
    ${CMAKE_CURRENT_LIST_DIR}/test_neighbors_internal.c ${case})
endforeach()
# The public function against ASE's neighbor_list (needs ase, numpy, pytest).
nnpops_py_test(neighbors_ase kernel tests/kernel/test_neighbors_ase.py)

# ---- the CPU twin of the GPU's grouped small-n GEMM -------------------------------------------
# Its k split (the slices of the inner dimension, added by the caller) against the unsplit sums.
nnpops_internal_test(small_gemm_twin.split kernel ${CMAKE_CURRENT_LIST_DIR}/test_small_gemm_twin.c
  split)

# ---- the GEMM of the CPU dense kernels ----------------------------------------------------------
# Every variant (columns or rows in vectors, 16-, 32- or 64-byte vectors) against a plain loop,
# bit for bit.
foreach(case f32 f64)
  nnpops_internal_test(dense_cpu.${case} kernel ${CMAKE_CURRENT_LIST_DIR}/test_dense_cpu.c ${case})
  target_compile_options(test_kernel_dense_cpu_${case} PRIVATE -ffp-contract=off)
endforeach()

# The CELU kernels against libm (within 2 units in the last place); every vector width gives the
# same bits.
foreach(case f32 f64)
  nnpops_internal_test(celu_cpu.${case} kernel ${CMAKE_CURRENT_LIST_DIR}/test_celu_cpu.c ${case})
  target_compile_options(test_kernel_celu_cpu_${case} PRIVATE -ffp-contract=off)
endforeach()

# The AEV kernels against a long double implementation of the definition (forward) and its finite
# differences (backward); every vector width gives the same bits; the vector logarithm against libm.
foreach(case f32 f64)
  nnpops_internal_test(aev_cpu.${case} kernel ${CMAKE_CURRENT_LIST_DIR}/test_aev_cpu.c ${case})
  target_compile_options(test_kernel_aev_cpu_${case} PRIVATE -ffp-contract=off)
endforeach()

# Benchmark (an executable, not a test): build/tests/bench_neighbors_cpu [max_atoms]
if(NOT TARGET bench_neighbors_cpu)
  add_executable(bench_neighbors_cpu ${PROJECT_SOURCE_DIR}/tests/bench/bench_neighbors_cpu.c)
  target_link_libraries(bench_neighbors_cpu PRIVATE nnpops_internal)
  target_include_directories(bench_neighbors_cpu PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
endif()
# Benchmark (an executable, not a test): build/tests/bench_dense_cpu (the dense GEMM's variants)
if(NOT TARGET bench_dense_cpu)
  add_executable(bench_dense_cpu ${PROJECT_SOURCE_DIR}/tests/bench/bench_dense_cpu.c)
  target_link_libraries(bench_dense_cpu PRIVATE nnpops_internal)
endif()
