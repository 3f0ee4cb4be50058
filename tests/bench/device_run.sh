#!/usr/bin/env bash
# device_run.sh - one run on a GPU machine: build with CUDA, run the GPU tests (ctest -L gpu) and
# the GPU benchmark, and write the logs under $OUT (default ./device-out).  Run from the repository
# root.  Inputs that are not in the repository come from _carry_gpu/ (git-ignored):
#   _carry_gpu/neurochem/   ani-2x_8x / ani-1x_8x archives + .info  (converted here into build-gpu-models/)
#   _carry_gpu/shared/      reference/*.json and structures/*.pdb (or *.pdb.xz, unpacked here)
#                           (NNPOPS_SHARED_DIR)
#   _carry_gpu/debs/        libyaml-0-2 and libyaml-dev .debs, used when pkg-config lacks yaml-0.1
# Usage: bash tests/bench/device_run.sh [tests|bench|profile|model|soak|timeline|lammps|all|
#        tests+bench...]
#        [extra bench arguments]
#   tests: ctest -L gpu; bench: bench_gpu; model: ctest -L "unit|kernel|model" of the CUDA-ON build
#   (builds every target); profile: ncu per-kernel times (PROFILE_SYSTEMS="name|name" picks the bench
#   systems, PROFILE_NBR="N ..." neighbor-list sizes, PROFILE_DETAIL="system|kernel regex[;...]" ncu
#   sections of some kernels, PROFILE_NBR_DETAIL="N|kernel regex" the same for the neighbor search
#   alone, PROFILE_SECTIONS the ncu sections of both, PROFILE_CACHE=none keeps the caches warm between
#   the kernels in every ncu run: ncu flushes them by default), PROFILE_NBR_HOT="N|kernel name" the
#   kernel's hottest instructions by warp stall samples (ncu_hot.py); soak: GPU soak runs of
#   tests/slow/soak.c.
#   tnbench: bench_gpu --tensornet (its model made by make_tensornet_bench.py).
#   nbr: the neighbor list alone at 256 .. 10^6 atoms, then torchmd-net's (NBR_SIZES); tnpeer:
#   torchmd-net's TensorNet (TNPEER_ARGS).  Both peers come from _carry_gpu/shared/peers/.
#   cpu: bench_cpu on 1 / 4 / 8 / 16 threads (CPU_THREADS, CPU_BENCH_ARGS).
#   timeline: nsys trace of bench_gpu --latency, one replay of each graph op by op (timeline.py).
#   lammps: pair_style nnpops in LAMMPS (tests/bench/lammps_gpu.sh: the LAMMPS bundle of
#   _carry_gpu/lammps/, made by tests/bench/lammps_bundle.sh; ANI-2x from build-gpu-models/ when
#   an earlier call converted it, tn_a from _carry_gpu/shared/reference/tensornet/): lammps.log
#   and the table lammps.md.
#   tnprof: the same for TensorNet float32 steps, per system (TNPROF_SYSTEMS); tnncu: ncu's time
#   per TensorNet kernel (ncu_summary.py; TNNCU_CACHE=none keeps the caches warm between kernels;
#   TNNCU_DETAIL="system|kernel regex;..." ncu sections of some kernels: tnncu-detail.log).
#   NBR_ALGS: the nbr part once per algorithm named (auto: the plan's choice).
#   EXTRA_CUDA_FLAGS: more nvcc flags for the build (e.g. -lineinfo for ncu's source view).
#   VARIANT_DEFS / VARIANT_BENCH_ARGS: an A/B of the bench against builds of other trees (see
#   below).  TESTS_REGEX: only the GPU tests whose names match (ctest -R).
# The logs are summarised in docs/performance.md, never committed: $OUT (device-out/) is ignored.
set -u
what=${1:-all}
shift || true
root=$(pwd)
out=${OUT:-$root/device-out}
mkdir -p "$out"
log=$out/device.log
exec > >(tee -a "$log") 2>&1

echo "== nnpops device run ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
echo "tree under test: ${TREE_COMMIT:-not given (TREE_COMMIT)}; the copy's git HEAD: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
echo "uncommitted changes (git status --short):"
git status --short 2>/dev/null | sed 's/^/  /'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
nvcc --version | tail -2

# libyaml through pkg-config (the machine image may lack it)
if ! pkg-config --exists yaml-0.1 2>/dev/null; then
  pfx=$root/_carry_gpu/prefix
  mkdir -p "$pfx" "$root/_carry_gpu/bin"
  for d in "$root"/_carry_gpu/debs/*.deb; do dpkg -x "$d" "$pfx"; done
  lib=$pfx/usr/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH=$lib:${LD_LIBRARY_PATH:-}
  if command -v pkg-config >/dev/null 2>&1; then
    sed -i "s|^prefix=.*|prefix=$pfx/usr|" "$lib/pkgconfig/yaml-0.1.pc"
    export PKG_CONFIG_PATH=$lib/pkgconfig
  else
    # no pkg-config at all: a stand-in that answers for yaml-0.1 only
    cat > "$root/_carry_gpu/bin/pkg-config" <<EOF
#!/bin/sh
for a in "\$@"; do case "\$a" in --version) echo 0.29.2; exit 0;; esac; done
case "\$*" in
  *--exists*) exit 0;;
  *--modversion*) echo 0.2.5;;
  *--variable=prefix*) echo $pfx/usr;;
  *--variable=includedir*) echo $pfx/usr/include;;
  *--variable=libdir*) echo $lib;;
  *--variable*) echo;;
  *--libs-only-L*) echo -L$lib;;
  *--libs-only-l*) echo -lyaml;;
  *--libs-only-other*) echo;;
  *--libs*) echo -L$lib -lyaml;;
  *--cflags-only-I*) echo -I$pfx/usr/include;;
  *--cflags-only-other*) echo;;
  *--cflags*) echo -I$pfx/usr/include;;
esac
EOF
    chmod +x "$root/_carry_gpu/bin/pkg-config"
    export PATH=$root/_carry_gpu/bin:$PATH
  fi
  echo "libyaml from _carry_gpu/debs (pkg-config: $(command -v pkg-config))"
fi

# structures carried compressed (name.pdb.xz: the carried tree is limited in size)
for f in "$root"/_carry_gpu/shared/structures/*.pdb.xz; do
  [ -e "$f" ] || continue
  python3 -c "import lzma, sys; open(sys.argv[1][:-3], 'wb').write(lzma.open(sys.argv[1]).read())" "$f"
done

# models: converted from the carried NeuroChem archives, in the background while building, into a
# folder outside _carry_gpu (build-gpu-models, git-ignored) so that a later call on the same warm
# machine finds them without carrying the archives again
models=${NNPOPS_DEVICE_MODELS:-$root/build-gpu-models}
# (the models whose archives were carried: the GPU tests of a missing one skip)
to_convert=
for m in ani2x ani1x; do
  [ -f "$models/$m.yaml" ] && continue
  [ -f "$root/_carry_gpu/neurochem/ani-${m#ani}_8x.tar.xz" ] && to_convert="$to_convert $m"
done
if [ -n "$to_convert" ]; then
  (PYTHONPATH=$root/wrappers python3 -m nnpops convert --source "$root/_carry_gpu/neurochem" \
     --output "$models" $to_convert > "$out/convert.log" 2>&1; echo "convert rc=$?" >> "$out/convert.log") &
  conv_pid=$!
else
  conv_pid=
fi

build=$root/build-gpu
t0=$(date +%s)
# configure_cuda DIR DEFS [SRC]: the CUDA build in DIR of the tree SRC (default: this one), with the
# C / CUDA definitions DEFS
configure_cuda() {
  cmake -S "${3:-$root}" -B "$1" -DCMAKE_BUILD_TYPE=Release -DNNPOPS_ENABLE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_C_FLAGS="$2" -DCMAKE_CUDA_FLAGS="${EXTRA_CUDA_FLAGS:-} $2" \
    -DNNPOPS_TEST_MODEL_DIR="$models" -DNNPOPS_SHARED_DIR="$root/_carry_gpu/shared"
}
# build_variant DIR DEFS TARGET [SRC]: configure_cuda DIR DEFS SRC and build TARGET; on failure the
# build's errors are printed and the status is nonzero (the A/B goes on without that build)
build_variant() {
  local ok=0
  if configure_cuda "$1" "$2" "${4:-$root}" > "$out/cmake-variant.log" 2>&1 &&
     cmake --build "$1" -j"$(nproc)" --target "$3" > "$out/build-variant.log" 2>&1; then
    ok=1
  else
    echo "variant build failed ($1)"
    cat "$out/cmake-variant.log" "$out/build-variant.log" 2>/dev/null | grep -E "error|Error" | head -20
  fi
  rm -f "$out/cmake-variant.log" "$out/build-variant.log"
  [ $ok = 1 ]
}
configure_cuda "$build" "" > "$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
case "$what" in
  *model*|all) targets="";;
  lammps) targets="--target nnpops";;
  *) targets="--target nnpops test_gpu_ops test_gpu_model test_gpu_graphs test_gpu_device test_gpu_tf32x3 test_gpu_tensornet test_model_tensornet bench_gpu test_slow_soak";;
esac
case "$what" in *cpu*) [ -n "$targets" ] && targets="$targets bench_cpu";; esac
cmake --build "$build" -j"$(nproc)" $targets \
  > "$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
echo "== built in $(( $(date +%s) - t0 )) s"
[ -n "$conv_pid" ] && wait "$conv_pid"
cat "$out/convert.log" 2>/dev/null | tail -3

export NNPOPS_MODEL_PATH=$models NNPOPS_SHARED_DIR=$root/_carry_gpu/shared
case "$what" in *tests*|all) run_tests=1;; *) run_tests=0;; esac
case "$what" in *bench*|all) run_bench=1;; *) run_bench=0;; esac
case "$what" in *profile*|all) run_profile=1;; *) run_profile=0;; esac
case "$what" in *model*|all) run_model=1;; *) run_model=0;; esac
if [ $run_tests = 1 ]; then
  echo "== ctest -L gpu"
  (cd "$build" && ctest -L gpu ${TESTS_REGEX:+-R "$TESTS_REGEX"} -FA "^models$" --output-on-failure -V --timeout 150 -j 3 \
     > "$out/ctest.log" 2>&1; echo "ctest rc=$?" >> "$out/ctest.log")
  grep -E "Test +#|tests passed|tests failed|ctest rc|\*\*\*" "$out/ctest.log"
fi
if [ $run_bench = 1 ]; then
  echo "== bench_gpu $*"
  timeout "${BENCH_TIMEOUT:-300}" "$build/tests/bench_gpu" --md "$out/bench.md" "$@" > "$out/bench.log" 2>&1
  echo "bench rc=$?"
  cat "$out/bench.log"
fi
if [ -n "${VARIANT_DEFS:-}" ]; then
  # A/B on one GPU: further builds of bench_gpu, one per entry of VARIANT_DEFS (entries separated
  # by '|'), then bench_gpu $VARIANT_BENCH_ARGS on the main build and each variant in turn, twice
  # each.  An entry "overlay=DIR" builds a copy of this tree with the files under DIR, laid out as
  # in the repository, put over it (e.g. the sources of an earlier commit); further words of an
  # entry are C / CUDA compiler flags of that build.  An entry "env=NAME=VALUE" is no build: the
  # main build again, run with that environment variable (e.g. env=NNPOPS_NO_PDL=1).
  IFS='|' read -r -a def_sets <<< "$VARIANT_DEFS"
  builds=("$build")
  for i in "${!def_sets[@]}"; do
    vb=$root/build-gpu-variant-$i
    defs=${def_sets[$i]} vsrc=$root
    case "$defs" in env=*) builds+=("env:${defs#env=}"); continue;; esac
    echo "== variant $i build: $defs"
    case "$defs" in
      overlay=*)
        vsrc=$root/../nnpops-variant-src-$i
        rm -rf "$vsrc" && mkdir -p "$vsrc"
        tar -C "$root" --exclude='./build-gpu*' --exclude=./_carry_gpu --exclude=./.git -cf - . |
          tar -C "$vsrc" -xf -
        odir=${defs#overlay=}; odir=${odir%% *}
        cp -r "$root/$odir/." "$vsrc/"
        ln -s "$root/_carry_gpu" "$vsrc/_carry_gpu"
        case "$defs" in *" "*) defs=${defs#* };; *) defs="";; esac;;
    esac
    build_variant "$vb" "$defs" bench_gpu "$vsrc" && builds+=("$vb")
  done
  # VARIANT_BENCH_ARGS: one or more argument sets separated by ';' (--tensornet: the benchmark
  # model is made first)
  case "${VARIANT_BENCH_ARGS:-}" in *--tensornet*)
    [ -f "$models/tn_bench.yaml" ] ||
      python3 "$root/tests/bench/make_tensornet_bench.py" "$models" > "$out/tn-model.log" 2>&1;;
  esac
  IFS=';' read -r -a arg_sets <<< "${VARIANT_BENCH_ARGS:-}"
  [ ${#arg_sets[@]} -eq 0 ] && arg_sets=("")
  for rep in 1 2; do
    for b in "${builds[@]}"; do
      for args in "${arg_sets[@]}"; do
        case "$b" in
          env:*) envs=${b#env:} bb=$build;;
          *) envs="" bb=$b;;
        esac
        echo "-- $(basename "$bb")${envs:+ with $envs}, run $rep: bench_gpu $args"
        env $envs timeout 120 "$bb/tests/bench_gpu" $args 2>&1 | grep -E "^\| [a-z0-9]" |
          grep -v "^| system"
      done
    done
  done
fi
# tnbench: TensorNet on the GPU (bench_gpu --tensornet) with the benchmark model made here
case "$what" in *tnbench*) run_tnbench=1;; *) run_tnbench=0;; esac
if [ $run_tnbench = 1 ]; then
  echo "== bench_gpu --tensornet"
  python3 "$root/tests/bench/make_tensornet_bench.py" "$models" > "$out/tn-model.log" 2>&1 ||
    tail -5 "$out/tn-model.log"
  timeout "${BENCH_TIMEOUT:-300}" "$build/tests/bench_gpu" --tensornet --md "$out/bench-tn.md" \
    > "$out/bench-tn.log" 2>&1
  echo "bench rc=$?"
  cat "$out/bench-tn.log"
fi
# nbr: the neighbor list alone (bench_gpu --nbr-only) at the sizes of the peer's benchmark, then
# the peer (_carry_gpu/shared/peers/neighbors_peer.py: torchmd-net's Triton kernels) on the same GPU
case "$what" in *nbr*) run_nbr=1;; *) run_nbr=0;; esac
if [ $run_nbr = 1 ]; then
  echo "== neighbor list alone: nnpops (bench_gpu --nbr-only N)"
  # NBR_ALGS="auto onepass cell-fast ...": the plan's choice (auto) and each forced algorithm in turn
  for alg in ${NBR_ALGS:-auto}; do
    [ "$alg" = auto ] && fa= || fa=$alg
    [ -n "$fa" ] && echo "-- forced: $fa"
    for n in ${NBR_SIZES:-256 512 1024 2048 4096 8192 16384 32768 65536 131072 262144 524288 1000000}; do
      NNPOPS_BENCH_NBR_ALG=$fa timeout 60 "$build/tests/bench_gpu" --nbr-only "$n" 2>&1 | grep -E "^\| [0-9]"
    done
  done
  peer=$root/_carry_gpu/shared/peers/neighbors_peer.py
  if [ -f "$peer" ]; then
    echo "== neighbor list alone: peer ($peer)"
    OUT=$out timeout 400 python3 "$peer" 2>&1 | tail -20
  else
    echo "no neighbor-list peer at $peer"
  fi
fi
# tnpeer: torchmd-net's TensorNet on the same GPU (TNPEER_ARGS, e.g. --no-compile)
case "$what" in *tnpeer*) run_tnpeer=1;; *) run_tnpeer=0;; esac
if [ $run_tnpeer = 1 ]; then
  peer=$root/_carry_gpu/shared/peers/tensornet_peer.py
  echo "== TensorNet peer ($peer ${TNPEER_ARGS:-})"
  timeout "${TNPEER_TIMEOUT:-500}" python3 "$peer" "$out" ${TNPEER_ARGS:-} 2>&1 | tail -30
fi
# tnprof: nsys GPU trace of TensorNet float32 steps (graphs, then eager) per system (TNPROF_SYSTEMS,
# names as bench_gpu --tensornet --only takes them): one graph replay op by op (timeline.py) and the
# kernels' total time
case "$what" in *tnprof*) run_tnprof=1;; *) run_tnprof=0;; esac
if [ $run_tnprof = 1 ]; then
  nsys_bin=$(command -v nsys || ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1)
  [ -f "$models/tn_bench.yaml" ] ||
    python3 "$root/tests/bench/make_tensornet_bench.py" "$models" > "$out/tn-model.log" 2>&1
  IFS='|' read -r -a tsys <<< "${TNPROF_SYSTEMS:-13_f0|98_f0|1hz5|water 9^3}"
  for sy in "${tsys[@]}"; do
    echo "== tnprof: $sy"
    [ -n "$nsys_bin" ] || { echo "nsys not found"; break; }
    timeout 200 "$nsys_bin" profile -t cuda --cuda-graph-trace=node --force-overwrite true -o "$out/tp" \
      "$build/tests/bench_gpu" --tensornet --f32 --only "$sy" --steps 60 > "$out/tnprof-run.log" 2>&1
    echo "nsys rc=$?"; grep -E "^\| [a-z]" "$out/tnprof-run.log"
    if [ ! -f "$out/tp.nsys-rep" ]; then
      # no report: what nsys left and said (e.g. a .qdstrm its importer could not convert)
      echo "no tp.nsys-rep from $nsys_bin; files:"; ls -la "$out"/tp* 2>&1 | sed 's/^/  /'
      grep -vE "^\| " "$out/tnprof-run.log" | tail -20 | sed 's/^/  nsys: /'
    fi
    if [ -f "$out/tp.nsys-rep" ]; then
      "$nsys_bin" stats -r cuda_gpu_trace -f csv -o "$out/tp" "$out/tp.nsys-rep" > /dev/null 2>&1
      python3 "$root/tests/bench/timeline.py" "$out"/tp_cuda_gpu_trace.csv 8000 50 | tee -a "$out/tnprof.log" | tail -120
      "$nsys_bin" stats -r cuda_gpu_kern_sum "$out/tp.nsys-rep" 2>/dev/null | head -45 | cut -c1-200
    fi
    rm -f "$out"/tp.nsys-rep "$out"/tp.qdstrm "$out"/tp.sqlite "$out"/tp_cuda_gpu_trace.csv
  done
fi
# tnncu: ncu's GPU time of every TensorNet float32 kernel per system (TNPROF_SYSTEMS): the sum
# over the kernels' launches (summary per kernel name) of a bench run of 4 steps with graphs
# and 4 eager (3 warm-up + 1 each)
case "$what" in *tnncu*) run_tnncu=1;; *) run_tnncu=0;; esac
if [ $run_tnncu = 1 ] && command -v ncu >/dev/null 2>&1; then
  [ -f "$models/tn_bench.yaml" ] ||
    python3 "$root/tests/bench/make_tensornet_bench.py" "$models" > "$out/tn-model.log" 2>&1
  IFS='|' read -r -a tsys <<< "${TNPROF_SYSTEMS:-13_f0|98_f0|1hz5|water 9^3}"
  for sy in "${tsys[@]}"; do
    echo "== tnncu: $sy"
    timeout 240 ncu --clock-control none --cache-control "${TNNCU_CACHE:-all}" --metrics gpu__time_duration.sum --print-summary per-kernel \
      --launch-count "${TNNCU_LAUNCHES:-2000}" "$build/tests/bench_gpu" --tensornet --f32 --only "$sy" --steps 1 \
      > "$out/tnncu-run.log" 2>&1
    echo "ncu rc=$?"
    python3 "$root/tests/bench/ncu_summary.py" "$out/tnncu-run.log" | tee -a "$out/tnncu.log"
  done
  rm -f "$out/tnncu-run.log"
  if [ -n "${TNNCU_DETAIL:-}" ]; then
    # TNNCU_DETAIL="system|kernel regex[;...]": ncu sections (throughput, occupancy, launch,
    # warp stalls) of the matching TensorNet float32 kernels, eager steps
    IFS=";" read -r -a dentries <<< "$TNNCU_DETAIL"
    for dent in "${dentries[@]}"; do
      IFS="|" read -r dsys dkern <<< "$dent"
      echo "---- detail: $dsys / $dkern" >> "$out/tnncu-detail.log"
      timeout 200 ncu --clock-control none --cache-control "${TNNCU_CACHE:-all}" \
        --kernel-name "regex:$dkern" --launch-skip 5 --launch-count 1 --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section WarpStateStats \
        --section SchedulerStats --section InstructionStats "$build/tests/bench_gpu" --tensornet \
        --f32 --only "$dsys" --steps 1 >> "$out/tnncu-detail.log" 2>&1
      echo "ncu rc=$? (detail $dsys / $dkern)"
    done
  fi
fi
case "$what" in *timeline*) run_timeline=1;; *) run_timeline=0;; esac
if [ $run_timeline = 1 ]; then
  # bench_gpu --latency twice, then an nsys GPU trace of it (graph nodes traced one by one; the nsys
  # of nsight-compute's host directory where none is on PATH, its QdstrmImporter making the report);
  # timeline.py prints one replay of each repeated graph op by op (start, end, overlap)
  echo "== bench_gpu --latency ${TIMELINE_ARGS:-} (twice)"
  for rep in 1 2; do
    "$build/tests/bench_gpu" --latency ${TIMELINE_ARGS:-} 2>&1 | grep -E "^\| [a-z]"
  done
  nsys_bin=$(command -v nsys || ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1)
  if [ -n "$nsys_bin" ]; then
    echo "== timeline: $nsys_bin"
    timeout 200 "$nsys_bin" profile -t cuda --cuda-graph-trace=node --force-overwrite true -o "$out/tl" \
      "$build/tests/bench_gpu" --latency ${TIMELINE_ARGS:-} > "$out/timeline-run.log" 2>&1
    echo "nsys rc=$?"
    if [ ! -f "$out/tl.nsys-rep" ] && [ -f "$out/tl.qdstrm" ]; then
      imp=$(ls "$(dirname "$nsys_bin")"/../*/QdstrmImporter 2>/dev/null | head -1)
      # (its messages in the log: on some images it fails, and then there is no report)
      [ -n "$imp" ] && { "$imp" -i "$out/tl.qdstrm" 2>&1 | tail -5; }
    fi
    if [ -f "$out/tl.nsys-rep" ]; then
      "$nsys_bin" stats -r cuda_gpu_trace -f csv -o "$out/tl" "$out/tl.nsys-rep" > /dev/null 2>&1
      python3 "$root/tests/bench/timeline.py" "$out"/tl_cuda_gpu_trace.csv | tee "$out/timeline.log"
      "$nsys_bin" stats -r cuda_api_sum "$out/tl.nsys-rep" 2>/dev/null | head -30
    else
      echo "no timeline: nsys made no report (see the importer's messages above)"
    fi
    rm -f "$out"/tl.nsys-rep "$out"/tl.qdstrm "$out"/tl.sqlite "$out"/tl_cuda_gpu_trace.csv
  else
    echo "nsys not found"
  fi
fi
case "$what" in *cpu*) run_cpu=1;; *) run_cpu=0;; esac
if [ $run_cpu = 1 ]; then
  # bench_cpu's small systems on several threads (CPU_THREADS, default "1 4 8 16"; CPU_BENCH_ARGS
  # "MAX_ATOMS MODEL ...", each its own run, default "13 ani2x;13 ani1x")
  cbuilds=("$build")
  IFS=';' read -r -a cargs <<< "${CPU_BENCH_ARGS:-13 ani2x;13 ani1x}"
  for rep in 1 2; do
    for args in "${cargs[@]}"; do
      for th in ${CPU_THREADS:-1 4 8 16}; do
        for b in "${cbuilds[@]}"; do
          echo "-- $(basename "$b"), run $rep: bench_cpu $args $th"
          timeout 120 "$b/tests/bench_cpu" $args "$th" 2>&1 | grep -E "^\| [a-z]" | grep -v "^| system"
        done
      done
    done
  done
fi
case "$what" in *soak*|all) run_soak=1;; *) run_soak=0;; esac
if [ $run_soak = 1 ]; then
  # GPU soak (tests/slow/soak.c): host RSS within 5 % and GPU memory in use flat after the warm-up
  echo "== GPU soak: ANI-2x on cuda (small: 10^5 steps of 24 atoms, eager and with graphs; large: 1000"
  echo "   steps of a ~10^4-atom box whose atom count changes every step)"
  for args in "small 100000 ani2x cuda" "small 100000 ani2x cuda graphs" "large 1000 ani2x cuda"; do
    timeout 300 "$build/tests/test_slow_soak" $args > "$out/soak-run.log" 2>&1
    rc=$?
    cat "$out/soak-run.log" >> "$out/soak.log"
    echo "soak $args: rc=$rc"
    grep -E "GPU memory in use:|RSS:|graphs:|PASS|FAIL" "$out/soak-run.log"
  done
  rm -f "$out/soak-run.log"
fi
case "$what" in *lammps*) run_lammps=1;; *) run_lammps=0;; esac
if [ $run_lammps = 1 ]; then
  # its own log (lammps.log) and table (lammps.md); here the table, or the log's end on a failure
  echo "== LAMMPS: pair_style nnpops (tests/bench/lammps_gpu.sh)"
  OUT=$out NNPOPS_BUILD=$build NNPOPS_DEVICE_MODELS=$models bash "$root/tests/bench/lammps_gpu.sh" \
    > /dev/null 2>&1
  echo "lammps rc=$?"
  grep -E "^== |NOT FOUND|skipped" "$out/lammps.log" | grep -v "^== lammps_gpu"
  if [ -f "$out/lammps.md" ]; then cat "$out/lammps.md"; else tail -30 "$out/lammps.log"; fi
fi
if [ $run_model = 1 ]; then
  echo "== ctest -L \"unit|kernel|model\" (CUDA-ON build)"
  (cd "$build" && timeout 200 ctest -L "unit|kernel|model" -LE "slow|lammps|fuzz" -FA "^models$" --timeout 120 \
     -j "$(nproc)" > "$out/ctest-model.log" 2>&1; echo "ctest rc=$?" >> "$out/ctest-model.log")
  grep -E "tests passed|tests failed|ctest rc|\*\*\*|Failed|Not Run" "$out/ctest-model.log" | head -40
fi
if [ $run_profile = 1 ] && command -v ncu >/dev/null 2>&1; then
  echo "== ncu: GPU time per kernel of 4 steps (3 warm-up + 1) per system, eager"
  # every ncu run: clocks left alone, caches flushed between kernels unless PROFILE_CACHE=none
  ncu_run=(ncu --clock-control none --cache-control "${PROFILE_CACHE:-all}")
  if [ "${PROFILE_SYSTEMS:-}" = none ]; then systems=()   # only the detail / neighbor parts
  elif [ -n "${PROFILE_SYSTEMS:-}" ]; then IFS="|" read -r -a systems <<< "$PROFILE_SYSTEMS"
  else systems=(alanine 1hz5 "water 10^3"); fi
  for sys in "${systems[@]}"; do
    echo "---- $sys" >> "$out/profile.log"
    timeout 150 "${ncu_run[@]}" --metrics gpu__time_duration.sum \
      --print-summary per-kernel --launch-count 600 "$build/tests/bench_gpu" --only "$sys" --steps 1 --no-graphs --no-tc-compare \
      >> "$out/profile.log" 2>&1
    echo "ncu rc=$? ($sys)"
  done
  # ncu sections of the detail parts (PROFILE_SECTIONS="A B ..." replaces the default list)
  sections=()
  for sec in ${PROFILE_SECTIONS:-SpeedOfLight Occupancy WarpStateStats LaunchStats MemoryWorkloadAnalysis}; do
    sections+=(--section "$sec")
  done
  if [ -n "${PROFILE_DETAIL:-}" ]; then
    # PROFILE_DETAIL="system|kernel regex[;system|kernel regex...]": ncu sections (throughput,
    # occupancy, warp stalls) of the matching kernels of one bench system, per entry
    IFS=";" read -r -a dentries <<< "$PROFILE_DETAIL"
    for dent in "${dentries[@]}"; do
      IFS="|" read -r dsys dkern <<< "$dent"
      echo "---- detail: $dsys / $dkern" >> "$out/profile-detail.log"
      timeout 200 "${ncu_run[@]}" \
        --kernel-name "regex:$dkern" --launch-count 12 "${sections[@]}" "$build/tests/bench_gpu" \
        --only "$dsys" --steps 1 --no-graphs --no-tc-compare >> "$out/profile-detail.log" 2>&1
      echo "ncu rc=$? (detail $dsys)"
    done
  fi
  if [ -n "${PROFILE_NBR_DETAIL:-}" ]; then
    # PROFILE_NBR_DETAIL="N|kernel regex": the same sections for the neighbor search alone at N atoms
    IFS="|" read -r nn nkern <<< "$PROFILE_NBR_DETAIL"
    echo "---- detail: neighbors $nn / $nkern" >> "$out/profile-detail.log"
    timeout 200 "${ncu_run[@]}" --kernel-name "regex:$nkern" --launch-count 4 \
      "${sections[@]}" "$build/tests/bench_gpu" --nbr-only "$nn" \
      >> "$out/profile-detail.log" 2>&1
    echo "ncu rc=$? (neighbor detail $nn)"
  fi
  if [ -n "${PROFILE_NBR_HOT:-}" ]; then
    # PROFILE_NBR_HOT="N|kernel name": the kernel's hottest instructions (warp stall samples) in the
    # neighbor search alone at N atoms (its fourth launch), through ncu's source page (ncu_hot.py)
    # (several kernels: names separated by ',')
    IFS="|" read -r nn nkerns <<< "$PROFILE_NBR_HOT"
    IFS="," read -r -a hot_kernels <<< "$nkerns"
    for nkern in "${hot_kernels[@]}"; do
      rm -f "$out/hot.ncu-rep"
      timeout 200 "${ncu_run[@]}" --kernel-name "$nkern" --launch-skip 3 --launch-count 1 \
        --section SourceCounters --section WarpStateStats -o "$out/hot" \
        "$build/tests/bench_gpu" --nbr-only "$nn" > "$out/hot-run.log" 2>&1
      echo "ncu rc=$? (hot $nkern, $nn atoms)"
      { echo "---- hottest instructions: $nkern, neighbors $nn"
        ncu -i "$out/hot.ncu-rep" --page source --csv --print-source sass 2>&1 |
          python3 "$root/tests/bench/ncu_hot.py" 60; } >> "$out/profile-hot.log"
      rm -f "$out/hot.ncu-rep" "$out/hot-run.log"
    done
  fi
  for n in ${PROFILE_NBR:-}; do
    echo "---- neighbors $n" >> "$out/profile.log"
    timeout 100 "${ncu_run[@]}" --metrics gpu__time_duration.sum \
      --print-summary per-kernel --launch-count 60 "$build/tests/bench_gpu" --nbr-only "$n" >> "$out/profile.log" 2>&1
    echo "ncu rc=$? (neighbors $n)"
  done
fi
