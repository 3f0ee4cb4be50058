#!/usr/bin/env bash
# Dynamic checks of the C library (docs/reliability.md), after .ci/test.sh in CI:
#  1. ASan + UBSan (-DNNPOPS_SANITIZE=ON, gcc, build-asan/): the CPU C tests,
#     ctest -L "unit|kernel|model" minus the Python-driven entries (they load the library into a
#     Python process, which has no ASan runtime) and the cases too slow under ASan;
#  2. clang build (build-clang/) of the two libFuzzer targets (ASan + UBSan), of test_threads
#     with the library's sources under ThreadSanitizer, and of the GPU tests against the library's
#     CUDA backend built for the emulated runtime under its race model (tests/emu, label
#     emu_race): ctest -L "fuzz|tsan" -LE slow (each fuzz target runs NNPOPS_FUZZ_SECONDS,
#     default 60 s; both at once);
#  3. valgrind memcheck (--error-exitcode=1 --leak-check=full) of a subset of the C tests in the
#     ordinary Release build ($NNPOPS_BUILD, default build/, the one .ci/test.sh made; configured
#     and built here when missing): small systems, ANI-1x.
# Every phase must be clean; the script stops at the first failure.  Timings are printed at the end.
# Usage: bash .ci/sanitize.sh [asan|fuzz|valgrind ...]   (default: all three phases)
# Environment: NNPOPS_BUILD, NNPOPS_ASAN_BUILD, NNPOPS_CLANG_BUILD (build directories),
#              NNPOPS_FUZZ_SECONDS, NNPOPS_VALGRIND_TESTS (ctest -R regex of the valgrind subset).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(asan fuzz valgrind)

bash .ci/install-deps.sh

rel=${NNPOPS_BUILD:-$root/build}
asan=${NNPOPS_ASAN_BUILD:-$root/build-asan}
clangb=${NNPOPS_CLANG_BUILD:-$root/build-clang}
fuzz_seconds=${NNPOPS_FUZZ_SECONDS:-60}
# one converted-model directory for all build trees (the conversion is skipped when up to date)
models=${NNPOPS_TEST_MODEL_DIR:-$rel/models}
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)

summary=()
t_all=$(date +%s)
phase_start() { echo "=== sanitize: $1 ($(date -u +%H:%M:%S))"; t_phase=$(date +%s); }
phase_end() {
  local s=$(( $(date +%s) - t_phase ))
  summary+=("$1: ${s} s")
  echo "=== sanitize: $1 done in ${s} s"
  [ -n "${NNPOPS_CI_TIMES:-}" ] && printf 'sanitize: %s\t%s\tok\n' "$1" "$s" >>"$NNPOPS_CI_TIMES"
  return 0
}

# Entries that load libnnpops into a process without the ASan runtime (python3 through cffi; the
# install check's consumer program; model.analyze compares its NumPy evaluation with the library's
# through cffi); the pure-Python tests (model.converter, model.download,
# model.tensornet_convert, model.tensornet_reference: the Release run ran them, nothing of them
# is instrumented here).  The conversion itself (model.convert) stays: it is the fixture of the
# rest.
# Also the TensorNet cases that repeat a code path another ASan case takes (minutes under ASan):
# tn_a_member2 has tn_a's architecture, and the ensemble's float32 run its float64 run's code.
asan_exclude='^(kernel\.neighbors_ase|unit\.install|model\.(converter|download|tensornet_convert|tensornet_reference|analyze)|model\.tensornet(_cpu)?\.reference\.tn_a_member2\..*|model\.tensornet\.ensemble\.tn_a_ens\.f32)$'

run_asan() {
  phase_start "ASan+UBSan build"
  cmake -S "$root" -B "$asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNNPOPS_SANITIZE=ON \
      -DNNPOPS_ENABLE_CUDA=OFF -DNNPOPS_BUILD_LAMMPS=OFF -DNNPOPS_TEST_MODEL_DIR="$models" \
      "${launcher[@]}" >/dev/null
  cmake --build "$asan" -j"$jobs" >"$asan/build.log" 2>&1 || { tail -n 50 "$asan/build.log"; exit 1; }
  phase_end "ASan+UBSan build"
  phase_start "ASan+UBSan tests"
  # leaks are errors; UBSan stops at the first report (the build has -fno-sanitize-recover=all)
  (cd "$asan" && \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest -L "unit|kernel|model" -E "$asan_exclude" --output-on-failure -j"$jobs" --timeout 900)
  phase_end "ASan+UBSan tests"
}

run_fuzz() {
  phase_start "clang build (libFuzzer targets, ThreadSanitizer test)"
  CC=clang CXX=clang++ cmake -S "$root" -B "$clangb" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DNNPOPS_FUZZ=ON -DNNPOPS_FUZZ_SECONDS="$fuzz_seconds" -DNNPOPS_TSAN=ON \
      -DNNPOPS_ENABLE_CUDA=OFF -DNNPOPS_BUILD_LAMMPS=OFF -DNNPOPS_TEST_MODEL_DIR="$models" \
      "${launcher[@]}" >/dev/null
  cmake --build "$clangb" -j"$jobs" --target fuzz_yaml fuzz_safetensors test_threads_tsan \
      emu_race_tests >"$clangb/build.log" 2>&1 || { tail -n 50 "$clangb/build.log"; exit 1; }
  phase_end "clang build (libFuzzer targets, ThreadSanitizer test)"
  phase_start "fuzzing (${fuzz_seconds} s per target) and ThreadSanitizer"
  local log="$clangb/fuzz-tsan.log" rc=0
  (cd "$clangb" && ctest -L "fuzz|tsan" -LE slow --output-on-failure -j"$jobs" -V) >"$log" 2>&1 \
    || rc=$?
  grep -E '^[0-9]+: (stat::|#[0-9]+.*DONE|fuzz\.|[0-9]+ threads)|tests passed|Test +#' "$log" || true
  if [ $rc -ne 0 ]; then tail -n 150 "$log"; echo "sanitize: fuzz/tsan failed, log: $log"; exit 1; fi
  phase_end "fuzzing (${fuzz_seconds} s per target) and ThreadSanitizer"
}

# The valgrind subset: small inputs, ANI-1x (ANI-2x reference runs take minutes under memcheck).
valgrind_tests=${NNPOPS_VALGRIND_TESTS:-'^(unit\.(config|safetensors|model|bad_inputs|fuzz\.replay)\..*|unit\.pool\.(shares|partial)|unit\.hostile\.(tiny_ok|weights_.*|st_.*|yaml_.*)|kernel\.neighbors\.(nonperiodic|mixed_pbc|half_width|overflow|bad_cell)|kernel\.neighbors_internal\.(overflow|errors|empty)|model\.lj\..*|model\.ani\.(reference\.ani1x\.f32|ghosts|member|unknown_element|batch))$'}

run_valgrind() {
  phase_start "valgrind build (Release)"
  if [ ! -f "$rel/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$rel" -DCMAKE_BUILD_TYPE=Release -DNNPOPS_ENABLE_CUDA=OFF \
        -DNNPOPS_BUILD_LAMMPS=OFF "${launcher[@]}" >/dev/null
  fi
  cmake --build "$rel" -j"$jobs" >"$rel/valgrind-build.log" 2>&1 || { tail -n 50 "$rel/valgrind-build.log"; exit 1; }
  # the fixtures (converted models, fuzz corpus) the subset needs
  (cd "$rel" && ctest -R '^(model\.convert|unit\.fuzz\.corpus)$' --output-on-failure >/dev/null)
  phase_end "valgrind build (Release)"
  phase_start "valgrind memcheck"
  (cd "$rel" && ctest --show-only=json-v1 >"$rel/ctest-tests.json")
  python3 - "$rel/ctest-tests.json" "$valgrind_tests" "$jobs" <<'EOF'
import concurrent.futures, json, os, re, subprocess, sys, time
tests = json.load(open(sys.argv[1]))["tests"]
pattern, jobs = re.compile(sys.argv[2]), int(sys.argv[3])
chosen = [t for t in tests if pattern.search(t["name"])]
if not chosen:
    sys.exit("valgrind: no test matches " + sys.argv[2])

def prop(t, name, default=None):
    for p in t.get("properties", []):
        if p["name"] == name:
            return p["value"]
    return default

# the costliest first (their COST, tests/costs.cmake): with 2 workers, a long test that starts
# last would leave the other worker idle until it ends
chosen.sort(key=lambda t: -float(prop(t, "COST", 0) or 0))

def run(t):
    env = dict(os.environ)
    for kv in prop(t, "ENVIRONMENT", []):
        k, _, v = kv.partition("=")
        env[k] = v
    cmd = ["valgrind", "--error-exitcode=1", "--leak-check=full", "--quiet"] + t["command"]
    t0 = time.time()
    p = subprocess.run(cmd, env=env, cwd=prop(t, "WORKING_DIRECTORY", None), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace")
    return t["name"], p.returncode, time.time() - t0, p.stdout

failed, skipped, total = [], 0, 0.0
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    for name, rc, secs, out in pool.map(run, chosen):
        total += secs
        state = "ok" if rc == 0 else "skipped" if rc == 77 else "FAILED"
        print("valgrind %-58s %-7s %6.1f s" % (name, state, secs), flush=True)
        if rc == 77:
            skipped += 1
        elif rc != 0:
            failed.append(name)
            print(out[-6000:])
print("valgrind: %d tests, %d failed, %d skipped, %.0f s of test time" %
      (len(chosen), len(failed), skipped, total))
sys.exit(1 if failed else 0)
EOF
  phase_end "valgrind memcheck"
}

for p in "${phases[@]}"; do
  case $p in
    asan) run_asan ;;
    fuzz) run_fuzz ;;
    valgrind) run_valgrind ;;
    *) echo "sanitize.sh: unknown phase '$p' (asan, fuzz, valgrind)" >&2; exit 2 ;;
  esac
done
echo "=== sanitize: all clean in $(( $(date +%s) - t_all )) s"
printf '    %s\n' "${summary[@]}"
