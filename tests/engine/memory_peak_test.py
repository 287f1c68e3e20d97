#!/usr/bin/env python3
"""The memory model against the measured peak of real trainings, layout by layout.

Each layout trains for 3 steps with its ranks as processes, started as `dltune launch` starts
them (`dltune run -n R --plan PLAN --recipe RECIPE -- dltune-worker train --summary S`); the
worker reports every rank's memory-model estimate of
its stage beside its measured resident peak (engine/worker/main.cc memory_report()). Every
rank must be within 15 % of its estimate (the issue's bound), on resnet20 (batch norm,
residual blocks: data parallel, 2 stages under 1F1B, 2 stages under GPipe with recomputation,
3 stages async, 2 replicas x 2 stages) and gpt-tiny (AdamW, a tied embedding: data parallel
and 2 stages async with recomputation). Stages there hold 8-80 MiB, where a constant the model
missed would show (the deep MLP of bench/parallel and launch_pipeline_test holds 100-170 MiB).

Usage: memory_peak_test.py DLTUNE DLTUNE_WORKER
"""
import json
import os
import subprocess
import sys
import tempfile

BOUND = 0.15


def main():
    dltune, worker = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="dltune_memory_peak.")
    text = os.path.join(tmp, "text.txt")
    with open(text, "w") as f:
        f.write("the memory model counts what each stage keeps for its backward. " * 400)

    def partition(model, stages, batch, ranks):
        out = subprocess.run([dltune, "model", "show", model, "--batch", str(batch), "--ranks",
                              str(ranks), "--stages", str(stages), "--json"],
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out)["memory"]["layout"]["partition"]

    cases = [  # name, model, data, ranks, stages, schedule, recompute, per-replica batch, optimizer
        ("resnet20 dp1", "resnet20", "cifar", 1, 1, "1f1b", False, 32, "sgd"),
        ("resnet20 dp2", "resnet20", "cifar", 2, 1, "1f1b", False, 32, "sgd"),
        ("resnet20 s2 1f1b", "resnet20", "cifar", 2, 2, "1f1b", False, 32, "sgd"),
        ("resnet20 s2 gpipe recompute", "resnet20", "cifar", 2, 2, "gpipe", True, 32, "sgd"),
        ("resnet20 s3 async", "resnet20", "cifar", 3, 3, "async", False, 32, "sgd"),
        ("resnet20 2x2 1f1b", "resnet20", "cifar", 4, 2, "1f1b", False, 32, "sgd"),
        ("gpt-tiny dp2", "gpt-tiny", "text", 2, 1, "1f1b", False, 8, "adamw"),
        ("gpt-tiny s2 async recompute", "gpt-tiny", "text", 2, 2, "async", True, 8, "adamw"),
    ]
    data = {  # 256 samples to train on (285 less the 29 held out), or the text's windows
        "cifar": "data: {kind: synthetic-cifar, samples: 285, heldout: 0.1}\n",
        "text": f"data: {{kind: text, path: {text}, context: 128, heldout: 0.1}}\n",
    }
    failures, worst = [], 0.0
    for name, model, kind, ranks, stages, schedule, recompute, batch, optimizer in cases:
        replicas = ranks // stages
        recipe = (f"name: memory\nmodel: {model}\n" + data[kind] +
                  f"training:\n  steps: 3\n  batch: {{per_rank: {batch}}}\n  scaling: weak\n"
                  f"  optimizer: {{kind: {optimizer}, lr: 0.01}}\n")
        plan = {"version": 1,
                "collectives": {"allreduce": [{"min_bytes": 0, "max_bytes": 2**64 - 1,
                                               "algo": "ring", "segment_bytes": 0}]},
                "training": {"per_rank_batch": batch, "global_batch": batch * replicas,
                             "scaling": "weak"},
                "job": {"nodes": 1, "ranks_per_node": ranks},
                "parallel": {"replicas": replicas, "stages": stages,
                             "partition": partition(model, stages, batch, ranks)
                             if stages > 1 else [],
                             "microbatches": 4 * stages if stages > 1 else 1,
                             "schedule": schedule, "recompute": "stage" if recompute else "none"}}
        path = os.path.join(tmp, name.replace(" ", "_"))
        with open(path + ".yaml", "w") as f:
            f.write(recipe)
        with open(path + ".plan", "w") as f:
            json.dump(plan, f)
        run = subprocess.run([dltune, "run", "-n", str(ranks), "--plan", path + ".plan",
                              "--recipe", path + ".yaml", "--",
                              worker, "train", "--summary", path + ".out.json"],
                             capture_output=True, text=True)
        if run.returncode != 0:
            failures.append(f"{name}: exited {run.returncode}: {run.stderr[-1500:]}")
            continue
        memory = json.load(open(path + ".out.json"))["memory"]
        if "max_error" not in memory:
            failures.append(f"{name}: nothing measured: {memory}")
            continue
        for r in memory["ranks"]:
            est, got, err = r["estimate_bytes"], r["measured_bytes"], r["error"]
            print(f"{name:28s} rank {r['rank']} stage {r['stage']}: estimate "
                  f"{est / 2**20:7.1f} MiB, measured {got / 2**20:7.1f} MiB, error {err:.3f}")
            worst = max(worst, err)
            if err > BOUND:
                failures.append(f"{name}: rank {r['rank']} off by {err:.1%}: {r['terms']}")
    print(f"worst error {worst:.3f} (bound {BOUND})")
    subprocess.run(["rm", "-rf", tmp])
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
