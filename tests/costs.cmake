# The long entries' COST: CTest starts the costliest tests first when a build directory has no
# timings of its own yet (CI's fresh clone), and .ci/sanitize.sh sorts its valgrind subset by it.
# With `ctest -j N` a long test that starts last leaves the other slots idle until it ends.  The
# values are rough seconds in the build where each entry is slowest (the ASan build for the CPU
# tests, valgrind for model.ani.*, the race model for tsan.emu.*, the emulated GPU for emu.*);
# only their order matters.  Included last by tests/CMakeLists.txt; an entry the configuration
# does not define is skipped.
set(_nnpops_costs
  # ASan + UBSan (.ci/sanitize.sh); the Release run keeps the same order
  model.tensornet.ensemble.tn_a_ens.f64 60
  model.tensornet_cpu.reference.tn_a.f64 40
  model.tensornet_cpu.reference.tn_b_oldlayout_so3.f64 30
  model.tensornet_cpu.reference.tn_a.f32 30
  model.tensornet.reference.tn_a.f64 30
  kernel.neighbors.far_outside 30
  model.tensornet_cpu.reference.tn_b_oldlayout_so3.f32 25
  model.tensornet_cpu.reference.tn_c_gauss_lower_zbl.f64 25
  model.tensornet.reference.tn_b_oldlayout_so3.f64 20
  kernel.aev_cpu.f32 20
  kernel.aev_cpu.f64 20
  model.tensornet_cpu.reference.tn_c_gauss_lower_zbl.f32 20
  kernel.neighbors.random_mix 15
  unit.pool.barrier 15
  model.ani.fd_forces 15
  model.tensornet_cpu.variants.tn_a 12
  model.ani.ghosts 12
  # valgrind (.ci/sanitize.sh sorts its subset by COST)
  model.ani.reference.ani1x.f32 40
  model.ani.batch 20
  # the race model (.ci/sanitize.sh, with the fuzz targets: NNPOPS_FUZZ_SECONDS each)
  tsan.emu.device.capture_failure 70
  tsan.emu.device.batch 65
  tsan.emu.device.capture 60
  tsan.emu.model.batch_f32 60
  fuzz.yaml 60
  fuzz.safetensors 60
  tsan.emu.ops.neighbors_center 55
  tsan.emu.device.errors 50
  tsan.emu.ops.small_gemm 35
  tsan.emu.model.reference.ani2x.f32 32
  tsan.emu.graphs.warmup 28
  tsan.emu.model.errors 25
  tsan.emu.tf32x3.gemm 20
  tsan.emu.model.reference.ani1x.f64 15
  tsan.emu.model.cpu_match.ani1x.f32 14
  tsan.emu.ops.neighbors_overflow 14
  tsan.emu.ops.aev 12
  tsan.emu.model.ghosts 12
  tsan.emu.ops.sg_tail 10
  tsan.emu.ops.neighbors_onepass 9
  # the emulated GPU (.ci/test.sh, label emu)
  emu.graphs.overflow 30
  emu.tf32x3.model 29
  emu.graphs.shape 23
  emu.device.overflow 16
  emu.ops.neighbors_center 15
  emu.model.batch_f32 15
  emu.model.water_box 15
  emu.model.fd 13
  emu.device.capture_failure 12
  emu.ops.small_gemm 9
)
list(LENGTH _nnpops_costs _n)
math(EXPR _last "${_n} - 1")
foreach(_i RANGE 0 ${_last} 2)
  math(EXPR _j "${_i} + 1")
  list(GET _nnpops_costs ${_i} _test)
  list(GET _nnpops_costs ${_j} _cost)
  if(TEST ${_test})
    set_tests_properties(${_test} PROPERTIES COST ${_cost})
  endif()
endforeach()
