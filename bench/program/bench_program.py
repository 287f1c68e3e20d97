#!/usr/bin/python3
"""bench/program: a user's PyTorch DDP program tuned by dltune (issue 39), side by side in one run.

    /usr/bin/python3 bench/program/bench_program.py [--build build] [--steps 120] [--rounds 7]

The program is examples/pytorch-ddp/train.py with its recipe (examples/pytorch-ddp/recipe.yaml:
per-rank batch 16/32/64, ranks per node auto, DDP bucket 1/25 MB). The bench
1. tunes it with `dltune tune RECIPE` (successive halving, screened and raced as the recipe's
   tune.screening: auto has it; tune.budget) and, in a second
   database, with `dltune tune RECIPE --grid` (every candidate at the longest trial length):
   program_cost_fraction = the halving's tuning seconds / the grid's;
2. then, in `--rounds` interleaved rounds (the order rotating), runs the program `--steps` steps
   four ways: as a user starts it by hand, `torchrun --standalone --nproc_per_node 2` with the
   script's defaults (batch 32, bucket 25 MB; torchrun sets OMP_NUM_THREADS=1); as an expert
   who knew the answer would, torchrun with the halving plan's settings (its ranks, threads in
   OMP_NUM_THREADS, batch and bucket); `dltune launch RECIPE` finding the halving's plan; and
   `dltune launch` finding the grid's plan. Each figure is the samples/s the program itself
   prints (global samples over its timed steps). program_vs_torchrun = median over rounds of
   dltune / torchrun with the defaults (the issue's goal); program_vs_torchrun_same_settings =
   dltune / the expert's torchrun (what launching through dltune costs or gains at equal
   settings: binding, its rendezvous); program_vs_grid = median of halving's plan / grid's;
3. program_cache_hit_ms: the median wall time of `dltune launch RECIPE --dry-run` with the plan
   cached (process start, topology discovery, the database look-up, printing the command).
Debian's PyTorch 1.13 torchrun needs `--redirects 2 --tee 2` under Python 3.11 (its default
flags fail to parse there); they only change where its output goes.
Last line: summary: program_vs_torchrun=R program_vs_torchrun_same_settings=R program_vs_grid=R
program_cost_fraction=F program_cache_hit_ms=T"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(SRC, "examples", "pytorch-ddp")
RATE = re.compile(r"samples/s: ([0-9.]+)")


def run(cmd, env, cwd=None, timeout=1800):
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit("bench/program: %s exited %d:\n%s%s" % (" ".join(cmd), p.returncode,
                                                         p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout, wall


def rate(out, what):
    m = RATE.findall(out)
    if not m:
        sys.exit("bench/program: %s printed no samples/s line:\n%s" % (what, out[-2000:]))
    return float(m[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("DLTUNE_BUILD", "build"))
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    dltune = os.path.abspath(os.path.join(a.build, "bin", "dltune"))
    torchrun = shutil.which("torchrun") or "/usr/bin/torchrun"
    if not os.path.exists(torchrun):
        sys.exit("bench/program: torchrun (Debian's python3-torch) is the peer and is missing")
    work = tempfile.mkdtemp(prefix="bench-program-")
    recipe = os.path.join(work, "recipe.yaml")
    with open(os.path.join(EXAMPLE, "recipe.yaml")) as f:
        text = f.read().replace("train.py", os.path.join(EXAMPLE, "train.py"))
    text = re.sub(r"(?m)^  steps: .*$", "  steps: %d" % a.steps, text)
    with open(recipe, "w") as f:
        f.write(text)
    env = dict(os.environ, DLTUNE_SITE_DB="", DLTUNE_RUNS_DIR=os.path.join(work, "runs"),
               DLTUNE_NO_PROGRESS="1")
    halving_env = dict(env, DLTUNE_DB=os.path.join(work, "halving.sqlite"))
    grid_env = dict(env, DLTUNE_DB=os.path.join(work, "grid.sqlite"))

    out, _ = run([dltune, "tune", recipe, "--json"], halving_env)
    halving = json.loads(out.strip().splitlines()[-1])
    out, _ = run([dltune, "tune", recipe, "--grid", "--json"], grid_env)
    grid = json.loads(out.strip().splitlines()[-1])
    h_s, g_s = halving["outcome"]["tuning_s"], grid["outcome"]["tuning_s"]
    print("halving: %s at %.1f samples/s in its trials, %.1f s of tuning" %
          (halving["outcome"]["winner"], halving["outcome"]["winner_sps"], h_s))
    print("grid:    %s at %.1f samples/s in its trials, %.1f s of tuning" %
          (grid["outcome"]["winner"], grid["outcome"]["winner_sps"], g_s))
    print("program starts: halving %d, grid %d" % (len(halving["outcome"]["trials"]),
                                                   len(grid["outcome"]["trials"])))
    if halving["outcome"].get("screening"):
        print(halving["outcome"]["screening"]["note"])

    torch_env = dict(env)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        torch_env.pop(k, None)
    v = halving["values"]
    expert_env = dict(torch_env, OMP_NUM_THREADS=str(v["threads_per_rank"]))
    expert = [torchrun, "--standalone", "--nproc_per_node", str(v["ranks"]), "--redirects", "2",
              "--tee", "2", os.path.join(EXAMPLE, "train.py"), "--steps", str(a.steps),
              "--batch-size", str(v["batch"]), "--bucket-mb", "%g" % v["bucket_mb"]]
    print("peers, each run %d steps, %d rounds interleaved, each figure the samples/s the program "
          "prints over its timed steps: torchrun as a user starts it (--standalone "
          "--nproc_per_node 2, the script's defaults, OMP_NUM_THREADS=1 as torchrun sets it), "
          "and torchrun as an expert who knew the plan would (its ranks, threads, batch and "
          "bucket; fp32 is this script's only precision; torchrun has no binding, dltune binds "
          "cores)" % (a.steps, a.rounds))
    print("the expert's torchrun: OMP_NUM_THREADS=%d %s" % (v["threads_per_rank"],
                                                            " ".join(expert)))
    sides = {
        "torchrun": lambda: rate(run([torchrun, "--standalone", "--nproc_per_node", "2",
                                      "--redirects", "2", "--tee", "2",
                                      os.path.join(EXAMPLE, "train.py"), "--steps",
                                      str(a.steps)], torch_env, cwd=work)[0], "torchrun"),
        "torchrun_same_settings": lambda: rate(run(expert, expert_env, cwd=work)[0],
                                               "torchrun with the plan's settings"),
        "dltune": lambda: rate(run([dltune, "launch", recipe], halving_env)[0], "dltune launch"),
        "grid_plan": lambda: rate(run([dltune, "launch", recipe], grid_env)[0], "grid plan"),
    }
    names = list(sides)
    figures = {n: [] for n in names}
    for r in range(a.rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            figures[n].append(sides[n]())
        print("round %d: %s" % (r + 1, "  ".join("%s %.1f" % (n, figures[n][-1]) for n in names)))
    vs_torchrun = statistics.median(d / t for d, t in zip(figures["dltune"], figures["torchrun"]))
    vs_same = statistics.median(
        d / t for d, t in zip(figures["dltune"], figures["torchrun_same_settings"]))
    vs_grid = statistics.median(d / g for d, g in zip(figures["dltune"], figures["grid_plan"]))

    hits = []
    for _ in range(5):
        _, wall = run([dltune, "launch", recipe, "--dry-run"], halving_env)
        hits.append(wall * 1000)
    cache_ms = statistics.median(hits)
    shutil.rmtree(work, ignore_errors=True)
    print("CPU: %s, %d cores" % (cpu_model(), os.cpu_count()))
    print("summary: program_vs_torchrun=%.3f program_vs_torchrun_same_settings=%.3f "
          "program_vs_grid=%.3f program_cost_fraction=%.3f program_cache_hit_ms=%.0f" %
          (vs_torchrun, vs_same, vs_grid, h_s / g_s if g_s > 0 else 0, cache_ms))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    main()
