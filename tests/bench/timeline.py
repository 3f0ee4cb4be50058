#!/usr/bin/env python3
"""timeline.py - one replay of each repeated graph in an nsys GPU trace, op by op.

Reads the CSV of `nsys stats -r cuda_gpu_trace -f csv` (columns Start (ns), Duration (ns), Name),
cuts the trace into bursts separated by at least GAP_NS of GPU idle time, and for every burst
length (number of ops) seen at least MIN_REPEATS times prints the burst of median span: each op's
start and end relative to the burst's first op, its duration, and the idle time before it (negative
where it overlaps the op before, e.g. under programmatic dependent launch).
Usage: timeline.py TRACE.csv [GAP_NS] [MIN_REPEATS]
"""
import csv
import sys


def main():
    path = sys.argv[1]
    gap = float(sys.argv[2]) if len(sys.argv) > 2 else 8000.0
    min_rep = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    ops = []
    with open(path, newline="") as fh:
        rows = [r for r in csv.reader(fh) if r]
    head = next(i for i, r in enumerate(rows) if "Start (ns)" in r)
    cols = rows[head]
    i_start, i_dur = cols.index("Start (ns)"), cols.index("Duration (ns)")
    i_name = cols.index("Name")
    for r in rows[head + 1:]:
        try:
            ops.append((float(r[i_start]), float(r[i_dur]), r[i_name]))
        except (ValueError, IndexError):
            continue
    ops.sort()
    bursts, cur, end = [], [], None
    for op in ops:
        if cur and op[0] - end >= gap:
            bursts.append(cur)
            cur = []
        cur.append(op)
        end = max(end, op[0] + op[1]) if len(cur) > 1 else op[0] + op[1]
    if cur:
        bursts.append(cur)
    by_len = {}
    for b in bursts:
        by_len.setdefault(len(b), []).append(b)
    for n, group in sorted(by_len.items()):
        if len(group) < min_rep or n < 3:
            continue
        span = lambda b: max(o[0] + o[1] for o in b) - b[0][0]
        group.sort(key=span)
        b = group[len(group) // 2]
        t0 = b[0][0]
        spans = sorted(span(x) for x in group)
        print("== bursts of %d ops: %d of them; span us min %.1f median %.1f max %.1f"
              % (n, len(group), spans[0] / 1e3, spans[len(spans) // 2] / 1e3, spans[-1] / 1e3))
        prev_end = t0
        busy = 0.0
        for s, d, name in b:
            print("  %8.2f %8.2f %7.2f %+7.2f  %s" % ((s - t0) / 1e3, (s + d - t0) / 1e3, d / 1e3,
                                                     (s - prev_end) / 1e3, name[:70]))
            prev_end = max(prev_end, s + d)
            busy += d
        print("  sum of op durations %.1f us" % (busy / 1e3))


if __name__ == "__main__":
    main()
