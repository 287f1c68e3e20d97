#!/usr/bin/python3
"""A stand-in for a user's training program whose throughput is known in advance, so that the
program-recipe test can say which candidate must win (tests/launch/program_launch_test.sh).

    fake_trainer.py --batch B --steps S [--bucket-mb M]

Every rank checks what dltune promises it (RANK, WORLD_SIZE, LOCAL_RANK, OMP_NUM_THREADS,
DLTUNE_TRIAL_STEPS / DLTUNE_BUCKET_MB when set, the working directory) and exits 4 naming what
is wrong. Rank 0 then prints `samples/s: X` with X = B x 10 x (1.5 on 2 ranks, else 1), and
appends it to $DLTUNE_METRICS; every rank first prints "rank R of W: T threads". Batches with a behaviour of their own:
  999  exits 3 after "RuntimeError: out of memory" on stderr (every rank)
  7    prints no throughput line
  5    hangs (the trial timeout must stop it)
  3    rank 0 exits 5 the first time ($FAKE_TRAINER_LOG.once does not exist yet: it creates
       it), then trains
The steps it was told are appended to FAKE_TRAINER_LOG, one line per run of rank 0:
"batch ranks threads steps bucket"."""
import argparse
import json
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, required=True)
ap.add_argument("--steps", type=int, required=True)
ap.add_argument("--bucket-mb", type=float, default=0)
a = ap.parse_args()
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
threads = os.environ.get("OMP_NUM_THREADS", "")
problems = []
if os.environ.get("LOCAL_RANK") is None:
    problems.append("LOCAL_RANK is not set")
if not threads.isdigit() or int(threads) < 1:
    problems.append("OMP_NUM_THREADS is %r" % threads)
if os.environ.get("OPENBLAS_NUM_THREADS") != threads:
    problems.append("OPENBLAS_NUM_THREADS differs from OMP_NUM_THREADS")
if "DLTUNE_TRIAL_STEPS" in os.environ and int(os.environ["DLTUNE_TRIAL_STEPS"]) != a.steps:
    problems.append("DLTUNE_TRIAL_STEPS %s but --steps %d" % (os.environ["DLTUNE_TRIAL_STEPS"], a.steps))
if a.bucket_mb and float(os.environ.get("DLTUNE_BUCKET_MB", "0")) != a.bucket_mb:
    problems.append("DLTUNE_BUCKET_MB %s but --bucket-mb %g" % (os.environ.get("DLTUNE_BUCKET_MB"), a.bucket_mb))
if not os.path.exists("fake_trainer.py"):
    problems.append("not started in the recipe's directory (cwd %s)" % os.getcwd())
if problems:
    print("fake_trainer: " + "; ".join(problems), file=sys.stderr)
    sys.exit(4)
if a.batch == 999:
    print("RuntimeError: out of memory (tried to allocate 9.99 GiB)", file=sys.stderr)
    sys.exit(3)
if a.batch == 5:
    time.sleep(3600)
once = os.environ.get("FAKE_TRAINER_LOG", "/nonexistent") + ".once"
if a.batch == 3 and rank == 0 and not os.path.exists(once):
    open(once, "w").close()
    print("fake_trainer: failing once", file=sys.stderr)
    sys.exit(5)
print("rank %d of %d: %s threads" % (rank, world, threads), flush=True)
if rank == 0:
    if os.environ.get("FAKE_TRAINER_LOG"):
        with open(os.environ["FAKE_TRAINER_LOG"], "a") as f:
            f.write("%d %d %s %d %g\n" % (a.batch, world, threads, a.steps, a.bucket_mb))
    print("step %d loss 1.0" % a.steps)
    if a.batch != 7:
        sps = a.batch * 10 * (1.5 if world == 2 else 1.0)
        print("samples/s: %.1f" % sps)
        if os.environ.get("DLTUNE_METRICS"):
            with open(os.environ["DLTUNE_METRICS"], "a") as f:
                f.write(json.dumps({"samples_per_s": sps}) + "\n")
