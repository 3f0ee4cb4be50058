# The long entries' COST (CTest starts the costliest tests first when a build directory has no
# timings of its own yet, as in CI's fresh clone): with `ctest -j N` a long test that starts last
# leaves the other slots idle until it ends.  The values are rough seconds of CPU time in the build
# where each entry is slowest (the ASan build for the CPU tests, the race model for tsan.emu.*, the
# emulated GPU for emu.*); only their order matters.  Included last by tests/CMakeLists.txt; an
# entry the configuration does not define is skipped.
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
  # the race model (.ci/sanitize.sh, with the fuzz targets: NNPOPS_FUZZ_SECONDS each)
  tsan.emu.ops.neighbors_center 60
  fuzz.yaml 60
  fuzz.safetensors 60
  tsan.emu.model.batch_f32 50
  tsan.emu.device.capture 50
  tsan.emu.ops.small_gemm 45
  tsan.emu.graphs.warmup 35
  tsan.emu.model.reference.ani2x.f32 35
  tsan.emu.model.errors 25
  tsan.emu.model.ghosts 20
  tsan.emu.model.reference.ani1x.f64 20
  tsan.emu.model.cpu_match.ani1x.f32 20
  tsan.emu.ops.neighbors_overflow 20
  tsan.emu.ops.aev 17
  tsan.emu.ops.neighbors_onepass 14
  tsan.emu.ops.sg_tail 13
  # the emulated GPU (.ci/test.sh, label emu)
  emu.ops.neighbors_center 60
  emu.ops.small_gemm 45
  emu.model.batch_f32 40
  emu.device.capture 30
  emu.graphs.warmup 20
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
