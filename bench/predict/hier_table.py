#!/usr/bin/env python3
"""The hierarchical-against-flat table of a `dltune tune --collectives --verify --json` run:
per size the best flat algorithm (ring in any segmentation, rd, rabenseifner, tree) and the best
hierarchical one (hier, hier/SEGMENT),
from the exhaustive comparison (same interleaved rounds), the tuner's choice and how close it
came to the best measured. Ends with
  hier_vs_flat_best=R   best flat time / best hier time at the largest size
  hier_ahead_from=SIZE  the smallest size from which hier beats every flat algorithm at every
                        larger size (none when it never does)
  chosen_worst=R        the tuner's choice against the best measured, worst size (verify)
"""
import json
import sys


def size(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div}{unit}"
    return f"{b}B"


def main():
    try:
        d = json.load(open(sys.argv[1]))
    except (OSError, ValueError) as e:
        print(f"no sweep: {e}")
        return
    o = d.get("outcome", d)
    rows = {}
    for m in o.get("measurements", []):
        if m.get("failed"):
            continue
        rows.setdefault(m["bytes"], {})[m["candidate"]] = m["median_us"]
    verify = {r["bytes"]: r for r in (o.get("verify") or {}).get("sizes", [])}
    print(f"{o.get('nodes')} nodes x {o.get('ranks', 0) // max(1, o.get('nodes', 1))} ranks")
    print("every candidate in the same ranks, interleaved round by round after warm-up calls;"
          " flat: dltune's ring (any segment), rd, rabenseifner, tree; native: Open MPI's"
          " MPI_Allreduce in those ranks (with the cluster's mpi_yield_when_idle=1), shown,"
          " not in 'best flat'; every rank in the cluster's cpu cgroup (equal core shares)."
          " Open MPI's own default here, spinning (each node's slurmd reports more CPUs than the"
          " host's shared cores), is not run: it took 42 s per 8 KiB call")
    print(f"{'size':>8} {'best flat':>16} {'flat us':>10} {'best hier':>12} {'hier us':>10}"
          f" {'flat/hier':>9} {'native us':>10} {'chosen':>14} {'vs best':>8}")
    ahead_from, last_ratio, worst = None, None, 1.0
    for b in sorted(rows):
        r = rows[b]
        flat = {k: v for k, v in r.items() if k.split("/")[0] not in ("hier", "native", "shm")}
        hier = {k: v for k, v in r.items() if k.split("/")[0] == "hier"}
        if not hier or not flat:
            continue
        name, t = min(flat.items(), key=lambda kv: kv[1])
        hname, ht = min(hier.items(), key=lambda kv: kv[1])
        ratio = t / ht
        last_ratio = ratio
        if ratio > 1 and ahead_from is None:
            ahead_from = b
        elif ratio <= 1:
            ahead_from = None
        v = verify.get(b, {})
        vs = v.get("vs_oracle", 0)
        if vs:
            worst = min(worst, vs)
        native = f"{r['native']:10.1f}" if "native" in r else f"{'-':>10}"
        print(f"{size(b):>8} {name:>16} {t:10.1f} {hname:>12} {ht:10.1f} {ratio:9.2f}"
              f" {native} {v.get('chosen', '-'):>14} {vs:8.2f}")
    print(f"hier_vs_flat_best={last_ratio:.2f}" if last_ratio else "hier_vs_flat_best=na")
    print(f"hier_ahead_from={size(ahead_from) if ahead_from else 'none'}")
    print(f"chosen_worst={worst:.2f}")


main()
