#!/usr/bin/python3
"""bench/engine/bench_shapes.py: the launch's ranks x threads choice against every shape measured.

    /usr/bin/python3 bench/engine/bench_shapes.py [--build build] [--rounds 3] [--seconds 4]
                                                  [--models resnet20,lenet]

Engine issue 38's rxt_vs_best: a launch that leaves ranks and threads per rank auto measures
the node's ranks x threads shapes and runs the fastest (launcher/flow/shape_search.h). Here,
per model, one global batch (strong scaling, every shape trains the same job, synthetic data):

  1. set-up: one `dltune launch` of the recipe with ranks and threads auto and a fresh
     database: it measures the shapes and stores their figures. The bench then deletes the plans
     that launch tuned (and their trials) from its scratch database, keeping the shape
     measurements, so that every launch below runs the recipe's own settings: the comparison is
     of shapes, not of a tuned plan against untuned ones;
  2. rounds, each in rotating order: `dltune launch -n R --set launch.threads_per_rank=T
     --no-tune` for every shape the set-up launch measured (its summary's shape_search
     candidates), and the auto launch (`--no-tune`: the database's measurements decide the
     shape);
  3. per shape the median samples/s over the rounds; rxt_choice_MODEL = the shape the auto
     launch ran, rxt_best_MODEL the fastest shape's (by median); rxt_vs_best_MODEL = per round,
     the chosen shape's run against that round's fastest shape (paired: the machine's slow
     phases cancel), the median over the rounds; rxt_auto_sps_MODEL the auto launch's own
     median (the same shape as the choice, run again: its difference from that shape's median
     is the machine's noise).

There is no outside peer here: what the choice is measured against is every other shape of the
same dltune, each run as a user runs it (`dltune launch` processes bound by launch.binding auto,
the recipe's own settings and precision fp32, the first step untimed), interleaved.

The summary's last line: rxt_vs_best (the smallest over the models), each model's figures and
choice. The launch's own measurements are short (30 % of the budget for all shapes): a choice
between shapes closer than their noise can go either way, which this ratio shows."""
import argparse
import glob
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

CASES = {  # model -> (data section, global batch, optimizer)
    "resnet20": ("  kind: synthetic-cifar\n  samples: 8192\n  heldout: 0.05", 64,
                 "    kind: sgd\n    lr: 0.01\n    momentum: 0.9\n    weight_decay: 0.0005"),
    "lenet": ("  kind: synthetic-digits\n  samples: 8192\n  heldout: 0.05", 128,
              "    kind: sgd\n    lr: 0.01\n    momentum: 0.9\n    weight_decay: 0.0005"),
}


def recipe_text(model, steps):
    data, batch, opt = CASES[model]
    return f"""name: bench-shapes-{model}
description: bench/engine/bench_shapes.py case (generated)
model: {model}
data:
{data}
training:
  steps: {steps}
  batch:
    global: {batch}
  scaling: strong
  optimizer:
{opt}
  seed: 1
tune:
  budget: 20
launch:
  ranks: auto
  threads_per_rank: auto
  binding: auto
  baseline: off
"""


def numa_domains():
    nodes = glob.glob("/sys/devices/system/node/node[0-9]*")
    return max(1, len(nodes))


class Launcher:
    def __init__(self, build, work):
        self.dltune = os.path.join(build, "bin", "dltune")
        self.work = work
        self.env = dict(os.environ, DLTUNE_RUNS_DIR=os.path.join(work, "runs"),
                        DLTUNE_SITE_DB="", DLTUNE_NO_PROGRESS="1")

    def launch(self, recipe, db, extra):
        cmd = [self.dltune, "launch", recipe, "--json"] + extra
        p = subprocess.run(cmd, env=dict(self.env, DLTUNE_DB=db), capture_output=True, text=True)
        shutil.rmtree(os.path.join(self.work, "runs"), ignore_errors=True)
        if p.returncode != 0:
            sys.exit(f"bench_shapes: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
        for line in reversed(p.stdout.splitlines()):
            if line.startswith("{") and '"summary"' in line:
                return json.loads(line)
        sys.exit(f"bench_shapes: no summary from {' '.join(cmd)}:\n{p.stdout[-2000:]}")


def keep_only_shape_measurements(db):
    """Deletes the set-up launch's tuned plans from the bench's scratch database (step 1)."""
    with sqlite3.connect(db) as c:
        for table in ("plans", "recipe_trials"):
            c.execute(f"DELETE FROM {table}")


def bench_model(l, model, rounds, seconds):
    _, batch, _ = CASES[model]
    work = l.work
    db = os.path.join(work, f"{model}.sqlite")
    probe = os.path.join(work, f"{model}-probe.yaml")
    with open(probe, "w") as f:
        f.write(recipe_text(model, 30))
    s = l.launch(probe, db, [])
    search = s.get("shape_search") or {}
    print(f"{model} (global batch {batch}): the launch's search: {search.get('why', '(none)')}")
    if not search.get("decided"):
        sys.exit(f"bench_shapes: the set-up launch of {model} did not measure the shapes")
    keep_only_shape_measurements(db)
    sps0 = max(c["samples_per_s"] or 0 for c in search["candidates"])
    steps = max(20, int(seconds * sps0 / batch))
    recipe = os.path.join(work, f"{model}.yaml")
    with open(recipe, "w") as f:
        f.write(recipe_text(model, steps))
    # The shapes the launch measured (shape_search.h shape_candidates), as it listed them.
    shapes = [(c["ranks_per_node"], c["threads"]) for c in search["candidates"]
              if c["samples_per_s"]]
    cases = [(f"{r}x{t}", ["-n", str(r), "--set", f"launch.threads_per_rank={t}", "--no-tune"])
             for r, t in shapes]
    cases.append(("auto", ["--no-tune"]))
    got = {name: [] for name, _ in cases}
    chosen = None
    for i in range(rounds):
        order = cases[i % len(cases):] + cases[:i % len(cases)]
        for name, extra in order:
            s = l.launch(recipe, db, extra)
            if s["plan_source"] != "default":
                sys.exit(f"bench_shapes: {name} ran a {s['plan_source']} plan, not the recipe's own")
            got[name].append(s["throughput_sps"])
            if name == "auto":
                chosen = f"{s['ranks']}x{s['threads_per_rank']}"
        print(f"  round {i + 1}: " + ", ".join(f"{n} {got[n][-1]:.0f}" for n, _ in order))
    med = {n: statistics.median(v) for n, v in got.items()}
    best = max((n for n in med if n != "auto"), key=lambda n: med[n])
    # The auto launch runs the chosen shape exactly; what is measured is the choice: per round,
    # the chosen shape's run against the round's fastest shape (paired, so that the machine's
    # slow phases cancel), the median over the rounds.
    shape_names = [n for n, _ in cases if n != "auto"]
    ratio = statistics.median(
        got[chosen][i] / max(got[n][i] for n in shape_names) for i in range(rounds))
    print(f"  {model}: " + ", ".join(f"{n} {med[n]:.0f}" for n, _ in cases) +
          f" samples/s (medians); the launch ran {chosen}, the fastest here is {best}; the "
          f"chosen shape against each round's fastest: {ratio:.2f}")
    return ratio, chosen, best, med["auto"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("DLTUNE_BUILD", "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--models", default="resnet20,lenet")
    a = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "unknown CPU")
    print(f"{cpu}, {cores} cores, {numa_domains()} NUMA domain(s); load average "
          f"{os.getloadavg()[0]:.2f}")
    if cores < 2:
        print("bench_shapes: one core: no shapes to choose between")
        return 0
    work = tempfile.mkdtemp(prefix="dltune-bench-shapes-")
    l = Launcher(a.build, work)
    keys = []
    worst = None
    try:
        for model in a.models.split(","):
            if model not in CASES:
                sys.exit(f"bench_shapes: no case for model '{model}' ({', '.join(CASES)})")
            ratio, chosen, best, auto = bench_model(l, model, a.rounds, a.seconds)
            keys += [f"rxt_vs_best_{model}={ratio:.2f}", f"rxt_choice_{model}={chosen}",
                     f"rxt_best_{model}={best}", f"rxt_auto_sps_{model}={auto:.0f}"]
            worst = ratio if worst is None else min(worst, ratio)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"summary: rxt_vs_best={worst:.2f} " + " ".join(keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
