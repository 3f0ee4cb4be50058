#!/usr/bin/env python3
"""sass_loops.py - the loops of a kernel's SASS and their instruction mix, to compare the inner
loops of two builds without a GPU.  Reads `cuobjdump -sass -fun NAME file.cubin` (or nvdisasm)
text on stdin; prints each loop (a backward branch) of at most MAX instructions (default 400):
its address range, length, and counts of shared loads, votes, float adds, global stores, calls
and local-memory (spill) accesses.  Usage:
  nvcc -arch=sm_90 -O3 ... -cubin -o k.cubin kernels/cuda/neighbors.cu
  cuobjdump -sass -fun KERNEL_MANGLED_NAME k.cubin | python3 tests/bench/sass_loops.py [MAX]"""
import re
import sys

KINDS = (("lds", "LDS"), ("vote", "VOTE"), ("fadd", "FADD"), ("stg", "STG"), ("call", "CALL"),
         ("local", ("LDL", "STL")))


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    ins = []
    for line in sys.stdin:
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2)))
    where = {a: i for i, (a, _) in enumerate(ins)}
    for i, (a, text) in enumerate(ins):
        m = re.search(r"BRA.*0x([0-9a-f]+)", text)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target >= a or target not in where or i - where[target] + 1 > limit:
            continue
        body = [t for _, t in ins[where[target]:i + 1]]
        counts = []
        for name, ops in KINDS:
            ops = ops if isinstance(ops, tuple) else (ops,)
            counts.append(f"{name} {sum(any(op in t for op in ops) for t in body)}")
        print(f"{target:#07x}-{a:#07x} {len(body):4d} instructions: " + ", ".join(counts))


main()
