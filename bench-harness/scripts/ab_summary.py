#!/usr/bin/env python3
"""B/A ratios of an interleaved A/B (ab.sh, recycling_ab.sh): reads
OUT/A-N.json and OUT/B-N.json (rill-bench run results) for rounds 1..ROUNDS
and prints each round's B/A ratios and their medians: throughput, broker
CPU per GB, publish p99, and any figure the script stored under the
result's "extra" object.

usage: ab_summary.py OUT ROUNDS"""
import json
import os
import statistics
import sys


def figures(out, label, rnd):
    path = os.path.join(out, f"{label}-{rnd}.json")
    if not os.path.exists(path):
        return None
    r = json.load(open(path))
    cpu = r.get('broker_cpu') or {}
    found = {'throughput': r['produce']['mb_per_s'], 'cpu_per_gb': cpu.get('cpu_s_per_gb_produced'),
             'p99': r['publish_latency_us']['p99_us']}
    found.update(r.get('extra') or {})
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out, rounds = sys.argv[1], int(sys.argv[2])
    ratios = {}
    for rnd in range(1, rounds + 1):
        a, b = figures(out, 'A', rnd), figures(out, 'B', rnd)
        if not a or not b:
            print(f"round {rnd}: B/A missing (a run failed)")
            continue
        row = {k: b[k] / a[k] for k in a if a[k] and b.get(k) is not None}
        for k, v in row.items():
            ratios.setdefault(k, []).append(v)
        print(f"round {rnd}: B/A " + ", ".join(f"{k} {v:.3f}x" for k, v in row.items()))
    print("median B/A over rounds: " + ", ".join(
        f"{k} {statistics.median(v):.3f}x" for k, v in ratios.items()))


if __name__ == '__main__':
    main()
