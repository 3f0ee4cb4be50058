"""The peer of bench_tensornet_cpu: torchmd-net's TensorNet (energy + forces) on the same
structures with the same model, one structure, precision and thread count per run.

    python peer_tensornet_torchmdnet.py CKPT STRUCTURES.json SYSTEM f32|f64 THREADS [MIN_STEPS]

CKPT: the checkpoint of make_tensornet_checkpoint.py (the one nnpops converts); STRUCTURES.json:
`bench_tensornet_cpu --dump FILE`.  THREADS: torch.set_num_threads (0 = all processors).  The
model is torchmd-net's load_model(CKPT, precision=32|64) with its defaults (derivative=True: the
forces by autograd); a periodic structure passes its box.  One warm-up step, then steps until
MIN_STEPS (default 5) and at least 2 s; prints the median, minimum and mean wall time of a step,
in the line format of bench_tensornet_cpu.  Needs torch and torchmd-net (not part of any test).
"""

import json
import os
import statistics
import sys
import time

import torch
from torchmdnet.models.model import load_model


def main(ckpt, structures, name, prec, threads, min_steps=5):
    threads = int(threads) or os.cpu_count()
    torch.set_num_threads(threads)
    dtype = torch.float32 if prec == "f32" else torch.float64
    s = json.load(open(structures))[name]
    model = load_model(ckpt, precision=32 if prec == "f32" else 64)
    model.eval()
    z = torch.tensor(s["numbers"], dtype=torch.long)
    pos = torch.tensor(s["positions_A"], dtype=dtype).reshape(-1, 3)
    batch = torch.zeros(len(z), dtype=torch.long)
    box = None
    if s["cell_A"] is not None:
        box = torch.tensor(s["cell_A"], dtype=dtype).reshape(3, 3)

    def step():
        energy, forces = model(z, pos, batch=batch, box=box)
        return float(energy.detach().sum()), forces

    e, _ = step()  # warm-up
    times = []
    t0 = time.perf_counter()
    while len(times) < int(min_steps) or time.perf_counter() - t0 < 2.0:
        a = time.perf_counter()
        e, _ = step()
        times.append(time.perf_counter() - a)
    print("torchmd-net %s atoms %d %s threads %d: median %.3f ms, min %.3f ms, mean %.3f ms "
          "over %d steps; energy %.10f eV"
          % (name, len(z), "float32" if prec == "f32" else "float64", threads,
             1e3 * statistics.median(times), 1e3 * min(times), 1e3 * statistics.mean(times),
             len(times), e))


if __name__ == "__main__":
    main(*sys.argv[1:])
