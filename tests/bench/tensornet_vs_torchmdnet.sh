#!/bin/sh
# TensorNet on the CPU, nnpops beside torchmd-net 3.1.0, runs paired: for each structure,
# precision and thread count, ROUNDS rounds of one nnpops run then one torchmd-net run (A B A B),
# so that both see the same load on a shared machine; then a table of the medians and of the
# torchmd-net / nnpops ratio of each pair (docs/performance.md).
#
#   PEER_PYTHON=/path/to/venv/bin/python tests/bench/tensornet_vs_torchmdnet.sh BUILD OUT [ROUNDS]
#
# PEER_PYTHON: a Python with torch and torchmd-net 3.1.0 (never needed by the tests).  BUILD: a
# build tree with tests/bench_tensornet_cpu; OUT: a directory for the checkpoint, the converted
# model, the structures and the raw lines (results.txt).  SYSTEMS, PRECISIONS, THREADS and
# MIN_STEPS_LARGE may be set to run a part.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
rounds=${3:-3}
peer=${PEER_PYTHON:?set PEER_PYTHON to a Python with torchmd-net 3.1.0}
systems=${SYSTEMS:-mol13 mol98 protein1hz5 water2199}
precisions=${PRECISIONS:-f32 f64}
threads_list=${THREADS:-1 0}
large_steps=${MIN_STEPS_LARGE:-3}

[ -f "$out/tn_bench.ckpt" ] || "$peer" "$here/make_tensornet_checkpoint.py" "$out/tn_bench.ckpt"
PYTHONPATH="$root/wrappers" python3 -m nnpops convert --from-torchmdnet "$out/tn_bench.ckpt" \
    --name tn_bench --output "$out"
"$build/tests/bench_tensornet_cpu" --dump "$out/structures.json"

results="$out/results.txt"
: >"$results"
for s in $systems; do
  steps=5
  case $s in protein1hz5|water2199) steps=$large_steps ;; esac
  for p in $precisions; do
    for t in $threads_list; do
      r=0
      while [ "$r" -lt "$rounds" ]; do
        NNPOPS_MODEL_PATH="$out" "$build/tests/bench_tensornet_cpu" tn_bench "$s" "$p" "$t" \
            "$steps" | tee -a "$results"
        "$peer" "$here/peer_tensornet_torchmdnet.py" "$out/tn_bench.ckpt" "$out/structures.json" \
            "$s" "$p" "$t" "$steps" | tee -a "$results"
        r=$((r + 1))
      done
    done
  done
done
python3 "$here/tensornet_bench_table.py" "$results"
