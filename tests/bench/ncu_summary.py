#!/usr/bin/env python3
"""ncu_summary.py - total GPU time per kernel from `ncu --metrics gpu__time_duration.sum
--print-summary per-kernel` output: one row per kernel name (grid and arguments dropped), its
launches, mean and total microseconds, sorted by total, then the sum.  Lines it cannot read are
counted and the first few printed, so a changed ncu format shows up instead of an empty table.
Usage: ncu_summary.py NCU_OUTPUT.txt [ROWS]
"""
import re
import sys

UNIT_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
           "second": 1e6, "s": 1e6}


def short(name):
    name = name.strip()
    # drop "(grid)x(block), Context ..., Device ..." and the argument list
    name = re.split(r" \(\d+, \d+, \d+\)x\(", name)[0]
    depth, out = 0, []
    for ch in name:
        if ch == "(":
            depth += 1
        if depth == 0:
            out.append(ch)
        if ch == ")":
            depth -= 1
    s = "".join(out).strip()
    return s[:110]


def main():
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    kernels, cur, unread = {}, None, []
    for line in open(sys.argv[1], errors="replace"):
        if ", Device " in line and "CC " in line and "Invocations" in line:
            m = re.search(r"Invocations\s*[:=]?\s*(\d+)", line)
            cur = [short(re.split(r", (?:Context|Device) ", line)[0]), int(m.group(1)) if m else 1]
            continue
        if cur and line.strip().startswith("gpu__time_duration.sum"):
            parts = line.split()
            try:
                unit = UNIT_US[parts[1]]
                avg = float(parts[-1].replace(",", "")) * unit
            except (KeyError, ValueError, IndexError):
                unread.append(line.rstrip())
                cur = None
                continue
            k = kernels.setdefault(cur[0], [0, 0.0])
            k[0] += cur[1]
            k[1] += avg * cur[1]
            cur = None
    total = sum(v[1] for v in kernels.values())
    print("%-110s %7s %9s %10s %6s" % ("kernel", "launches", "mean us", "total us", "share"))
    for name, (n, t) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:rows]:
        print("%-110s %7d %9.2f %10.1f %5.1f%%" % (name, n, t / n, t, 100 * t / max(total, 1e-9)))
    print("%d kernel names, %d launches, %.1f us in all" %
          (len(kernels), sum(v[0] for v in kernels.values()), total))
    if unread:
        print("%d metric lines not read, e.g.:" % len(unread))
        print("\n".join(unread[:3]))


if __name__ == "__main__":
    main()
