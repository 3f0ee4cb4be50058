"""The table of tensornet_vs_torchmdnet.sh: per structure, precision and thread count, the
median over the rounds of each program's median step, and the median over the rounds of the
ratio torchmd-net / nnpops of the runs paired in a round (the energies of the two agree to the
digits shown in the raw lines).

    python3 tensornet_bench_table.py results.txt
"""

import re
import statistics
import sys

LINE = re.compile(r"^(nnpops \S+|torchmd-net) (\S+) atoms (\d+) (float32|float64) threads (\d+)"
                  r".*?median ([0-9.]+) ms")


def main(path):
    rows = {}
    order = []
    for line in open(path, encoding="utf-8"):
        m = LINE.match(line)
        if not m:
            continue
        who = "peer" if m.group(1) == "torchmd-net" else "ours"
        key = (m.group(2), int(m.group(3)), m.group(4), int(m.group(5)))
        if key not in rows:
            rows[key] = {"ours": [], "peer": []}
            order.append(key)
        rows[key][who].append(float(m.group(6)))
    print("| structure | atoms | precision | threads | nnpops ms/step | torchmd-net ms/step "
          "| torchmd-net / nnpops (paired) | rounds |")
    print("|---|---|---|---|---|---|---|---|")
    for key in order:
        r = rows[key]
        n = min(len(r["ours"]), len(r["peer"]))
        if n == 0:
            continue
        ratios = [r["peer"][k] / r["ours"][k] for k in range(n)]
        threads = "all (%d)" % key[3] if key[3] != 1 else "1"
        print("| %s | %d | %s | %s | %.1f | %.1f | %.2f | %d |"
              % (key[0], key[1], key[2], threads, statistics.median(r["ours"][:n]),
                 statistics.median(r["peer"][:n]), statistics.median(ratios), n))


if __name__ == "__main__":
    main(sys.argv[1])
