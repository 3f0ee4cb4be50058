#!/usr/bin/env python3
"""ncu_hot.py - the hottest instructions of a kernel from ncu's source page (CSV on stdin, as
`ncu -i REPORT --page source --csv --print-source sass` writes it): the columns, then the N rows
(default 40) with the most warp stall samples, each with its address, source and its largest
stall reasons.  Usage: ncu -i r.ncu-rep --page source --csv ... | python3 ncu_hot.py [N]"""
import csv
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    rows = list(csv.reader(sys.stdin))
    head = next((i for i, r in enumerate(rows) if any("Sampling" in c for c in r)), None)
    if head is None:
        print("no sampling columns; first lines:")
        for r in rows[:5]:
            print(r)
        return
    cols = rows[head]
    body = [r for r in rows[head + 1:] if len(r) == len(cols)]
    total_col = next(i for i, c in enumerate(cols) if "Sampling (All" in c)
    stall_cols = [i for i, c in enumerate(cols) if c.startswith("stall_")]  # the reasons
    print("columns:", "; ".join(cols))
    total = sum(number(r[total_col]) for r in body) or 1.0
    print(f"{len(body)} rows, {total:.0f} samples")
    body.sort(key=lambda r: -number(r[total_col]))
    for r in body[:top]:
        reasons = sorted(((number(r[i]), cols[i]) for i in stall_cols), reverse=True)[:3]
        why = ", ".join(f"{name} {v:.0f}" for v, name in reasons if v > 0)
        print(f"{100 * number(r[total_col]) / total:5.1f}%  " + " | ".join(r[:3]) + f"  [{why}]")


main()
