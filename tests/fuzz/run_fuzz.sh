#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time (CTest entries fuzz.yaml / fuzz.safetensors).
# Usage: run_fuzz.sh FUZZER NAME SECONDS WORKDIR SEED_DIR...
# New inputs go to WORKDIR/corpus (emptied first; the seed directories are only read), crashes to
# WORKDIR/artifacts.  A crash, leak, timeout (10 s per input) or out-of-memory (2.5 GB) fails the
# test and prints how to keep the input as a regression test.
set -uo pipefail
fuzzer=$1 name=$2 seconds=$3 work=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
dict=()
[ -f "$here/$name.dict" ] && dict=(-dict="$here/$name.dict")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 -max_len=16384 \
    -print_final_stats=1 "${dict[@]}" -artifact_prefix="$work/artifacts/" \
    "$work/corpus" "$@" >"$work/log.txt" 2>&1
rc=$?
grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb)|^#[0-9]+.*DONE' "$work/log.txt"
echo "fuzz.$name: corpus grew to $(ls "$work/corpus" | wc -l) new inputs; log: $work/log.txt"
if [ $rc -ne 0 ] || [ -n "$(ls -A "$work/artifacts")" ]; then
  tail -n 60 "$work/log.txt"
  echo "fuzz.$name FAILED (exit $rc).  Inputs that failed:"
  for f in "$work"/artifacts/*; do
    [ -e "$f" ] || continue
    echo "  $f"
  done
  echo "Reproduce: NNPOPS_FUZZ_WEIGHTS=... $fuzzer FILE ; keep the input as a regression test:"
  echo "  cp FILE $here/regressions/$name/<what-it-is>   (replayed by unit.fuzz.replay.$name)"
  exit 1
fi
