#!/usr/bin/env python3
"""hier_table.py [--choices] FILE [SECOND_FILE]

The hierarchical-against-flat table of a `dltune tune --collectives --verify --json` run:
per size the best flat algorithm (ring in any segmentation, rd, rabenseifner, tree) and the best
hierarchical one (hier, hier/SEGMENT),
from the exhaustive comparison (same interleaved rounds), the tuner's choice and how close it
came to the best measured. SECOND_FILE, a second run's sweep of the same shape (the exhaustive
floor run), gives each size's flat/hier ratio again: one run's ratio is one draw of a noisy
machine (the same candidate's median differed by 2x between two runs at 8 MiB on 4 namespace
nodes), so hier counts as ahead at a size only when both runs say so. Ends with
  hier_vs_flat_best=R   best flat time / best hier time at the largest size (the lower of the
                        two runs with SECOND_FILE)
  hier_vs_flat_runs=R,R each run's ratio there
  hier_ahead_from=SIZE  the smallest size from which hier beats every flat algorithm at every
                        larger size, in every run given (none when it never does)
  hier_verdict=...      those sizes in words: where hier is ahead in both runs, where the runs
                        disagree (within the machine's noise), where flat is ahead
  chosen_worst=R        the tuner's choice against the best measured, worst size (verify)
  spread_floor=R        the same, over the sizes where the tuner's search measured every
                        candidate too ('=' in the table): there its choice was an exhaustive
                        search's one run earlier, so this is how far two exhaustive runs
                        disagree on this machine, the floor under chosen_worst
  searched_worst=R      the same over the other sizes: those the search decided with fewer
                        candidates, where its own judgement is what is measured (na: none)
With --choices (for a run with --strategy exhaustive): per size, the first exhaustive run's
choice against the verifying run's best, and
  exhaustive_worst=R    its worst size: how far apart two exhaustive searches' choices fall
With --paired TUNED FLOOR: both choices scored in the same sweep, the tuned run's verifying one
(every candidate, interleaved round by round): per size the tuner's choice and the exhaustive
run's (made in its own first sweep, independent of this one) against the best there, and
  chosen_worst_paired=R     the tuner's choice, worst size
  exhaustive_worst_paired=R the exhaustive search's choice, worst size, in the same rounds
Unpaired, chosen_worst and exhaustive_worst are each scored in their own run's verifying sweep:
two draws of the machine's noise, so the goal between them was a coin where both searches
chose alike (the same algorithm scored 0.80 in one run and 0.89 in the other); paired, a size
where both chose the same algorithm scores the same for both.
"""
import json
import sys


def size(b):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div}{unit}"
    return f"{b}B"


def choices(o):
    print("two exhaustive searches in the same ranks, one after the other, as the table above ran"
          " its candidates (interleaved round by round after warm-up calls; native: Open MPI's"
          " MPI_Allreduce with the cluster's mpi_yield_when_idle=1; every rank in the cluster's"
          " cpu cgroup): the first run's choice scored in the second")
    print(f"{'size':>8} {'first run':>14} {'its us':>10} {'2nd run best':>14} {'best us':>10}"
          f" {'vs best':>8}   (both us from the second run)")
    worst = None
    for v in (o.get("verify") or {}).get("sizes", []):
        vs = v.get("vs_oracle", 0)
        if vs:
            worst = min(worst if worst is not None else 1.0, vs)
        print(f"{size(v['bytes']):>8} {v['chosen']:>14} {v['chosen_us']:10.1f} {v['oracle']:>14}"
              f" {v['oracle_us']:10.1f} {vs:8.2f}")
    print(f"exhaustive_worst={worst:.2f}" if worst is not None else "exhaustive_worst=na")


def sweep_rows(o):
    """size -> candidate -> median us, of a sweep's successful measurements."""
    rows = {}
    for m in o.get("measurements", []):
        if m.get("failed"):
            continue
        rows.setdefault(m["bytes"], {})[m["candidate"]] = m["median_us"]
    return rows


def flat_over_hier(r):
    """(best flat name, its us, best hier name, its us) of one size's row, or None."""
    flat = {k: v for k, v in r.items() if k.split("/")[0] not in ("hier", "native", "shm")}
    hier = {k: v for k, v in r.items() if k.split("/")[0] == "hier"}
    if not hier or not flat:
        return None
    name, t = min(flat.items(), key=lambda kv: kv[1])
    hname, ht = min(hier.items(), key=lambda kv: kv[1])
    return name, t, hname, ht


def verdict(ratios):
    """Sizes grouped by what every run says: hier ahead, flat ahead, or the runs disagree."""
    groups = {"hier ahead in every run": [], "flat ahead in every run": [],
              "the runs disagree (noise)": []}
    for b, rs in ratios:
        key = ("hier ahead in every run" if min(rs) > 1 else
               "flat ahead in every run" if max(rs) < 1 else "the runs disagree (noise)")
        groups[key].append(size(b))
    return "; ".join(f"{k}: {', '.join(v)}" for k, v in groups.items() if v) or "na"


def paired(tuned, floor):
    """Both runs' choices scored in the tuned run's verifying sweep."""
    rows = sweep_rows(tuned)
    floor_choice = {x["bytes"]: x["chosen"] for x in floor.get("sizes", [])}
    tuned_choice = {x["bytes"]: x["chosen"] for x in tuned.get("sizes", [])}
    # The best as the verifying run judged it (its exhaustive choice among the tuner's
    # candidates: chosen_worst_paired is then chosen_worst), else the fastest measured.
    oracle = {v["bytes"]: (v["oracle"], v["oracle_us"])
              for v in (tuned.get("verify") or {}).get("sizes", []) if v.get("oracle_us")}
    print("both searches' choices scored in the same sweep (the tuned run's verifying one: every"
          " candidate, interleaved round by round); the exhaustive choice was made in that run's"
          " own first sweep")
    print(f"{'size':>8} {'best here':>14} {'us':>10} {'tuner chose':>14} {'vs best':>8}"
          f" {'exhaustive chose':>17} {'vs best':>8}")
    worst = {"tuned": None, "floor": None}
    for b in sorted(rows):
        r = rows[b]
        if b not in tuned_choice or b not in floor_choice or not r:
            continue
        best, best_us = oracle.get(b) or min(r.items(), key=lambda kv: kv[1])
        line = f"{size(b):>8} {best:>14} {best_us:10.1f}"
        for who, choice in (("tuned", tuned_choice[b]), ("floor", floor_choice[b])):
            us = r.get(choice)
            vs = best_us / us if us else None
            if vs is not None:
                worst[who] = min(worst[who] if worst[who] is not None else 1.0, vs)
            width = 14 if who == "tuned" else 17
            line += f" {choice:>{width}} {vs:8.2f}" if vs is not None else f" {choice:>{width}} {'-':>8}"
        print(line)
    for who, key in (("tuned", "chosen_worst_paired"), ("floor", "exhaustive_worst_paired")):
        print(f"{key}={worst[who]:.2f}" if worst[who] is not None else f"{key}=na")


def main():
    args = sys.argv[1:]
    if args and args[0] == "--paired":
        try:
            tuned = json.load(open(args[1]))
            floor = json.load(open(args[2]))
        except (OSError, ValueError, IndexError) as e:
            print(f"no sweep: {e}")
            return
        paired(tuned.get("outcome", tuned), floor.get("outcome", floor))
        return
    only_choices = bool(args) and args[0] == "--choices"
    files = args[1:] if only_choices else args
    try:
        d = json.load(open(files[0]))
        second = sweep_rows(json.load(open(files[1])).get("outcome", {})) if len(files) > 1 else {}
    except (OSError, ValueError, IndexError, AttributeError) as e:
        print(f"no sweep: {e}")
        return
    o = d.get("outcome", d)
    if only_choices:
        choices(o)
        return
    rows = sweep_rows(o)
    verify = {r["bytes"]: r for r in (o.get("verify") or {}).get("sizes", [])}
    print(f"{o.get('nodes')} nodes x {o.get('ranks', 0) // max(1, o.get('nodes', 1))} ranks")
    print("every candidate in the same ranks, interleaved round by round after warm-up calls;"
          " flat: dltune's ring (any segment), rd, rabenseifner, tree; native: Open MPI's"
          " MPI_Allreduce in those ranks (with the cluster's mpi_yield_when_idle=1), shown,"
          " not in 'best flat'; every rank in the cluster's cpu cgroup (equal core shares)."
          " Open MPI's own default here, spinning (each node's slurmd reports more CPUs than the"
          " host's shared cores), is not run: it took 42 s per 8 KiB call")
    print(f"{'size':>8} {'best flat':>16} {'flat us':>10} {'best hier':>12} {'hier us':>10}"
          f" {'flat/hier':>9} {'2nd run':>7} {'native us':>10} {'chosen':>14} {'vs best':>8}")
    ahead_from, last, worst, floor, searched, ratios = None, None, 1.0, None, None, []
    for b in sorted(rows):
        best = flat_over_hier(rows[b])
        if best is None:
            continue
        name, t, hname, ht = best
        r = rows[b]
        runs = [t / ht]
        again = flat_over_hier(second.get(b, {}))
        if again:
            runs.append(again[1] / again[3])
        ratio = runs[0]
        ratios.append((b, runs))
        last = runs
        if min(runs) > 1 and ahead_from is None:
            ahead_from = b
        elif min(runs) <= 1:
            ahead_from = None
        v = verify.get(b, {})
        vs = v.get("vs_oracle", 0)
        if vs:
            worst = min(worst, vs)
            if v.get("searched_all"):
                floor = min(floor if floor is not None else 1.0, vs)
            else:
                searched = min(searched if searched is not None else 1.0, vs)
        native = f"{r['native']:10.1f}" if "native" in r else f"{'-':>10}"
        run2 = f"{runs[1]:7.2f}" if len(runs) > 1 else f"{'-':>7}"
        print(f"{size(b):>8} {name:>16} {t:10.1f} {hname:>12} {ht:10.1f} {ratio:9.2f} {run2}"
              f" {native} {v.get('chosen', '-'):>14} {vs:8.2f}"
              f"{' =' if v.get('searched_all') else ''}")
    print(f"hier_vs_flat_best={min(last):.2f}" if last else "hier_vs_flat_best=na")
    print(f"hier_vs_flat_runs={','.join(f'{x:.2f}' for x in last)}" if last
          else "hier_vs_flat_runs=na")
    print(f"hier_ahead_from={size(ahead_from) if ahead_from else 'none'}")
    print(f"hier_verdict={verdict(ratios)}")
    print("(= the tuner's search measured every candidate at that size too: its choice there was"
          " an exhaustive search's, one run before the verifying one)")
    print(f"chosen_worst={worst:.2f}")
    print(f"spread_floor={floor:.2f}" if floor is not None else "spread_floor=na")
    print(f"searched_worst={searched:.2f}" if searched is not None else "searched_worst=na")


main()
