#!/usr/bin/env python3
"""dltune's GPU engine vs PyTorch: training throughput on one GPU, and CPU/GPU loss agreement.

Trains mlp (batch 64 and 256), lenet (64) and alexnet (64, 227x227 synthetic images) with
`dltune-worker train --device gpu` and with the same network in PyTorch (FP32 everywhere: TF32
off on both sides, since dltune runs plain FP32), same synthetic data shapes, same optimizer
(SGD, momentum 0.9, weight decay 5e-4). Runs are interleaved (dltune, torch, dltune, ...) and
the median samples/s of the repeats is reported. loss_match: dltune on the GPU and on the CPU,
same seed, same steps, final losses within 1e-3 (relative).

Usage: bench_gpu.py [--build DIR] [--repeats N]. Skips (exit 0) when there is no GPU.
Last line: summary: mlp64_vs_torch=R mlp256_vs_torch=R lenet_vs_torch=R alexnet_vs_torch=R
loss_match=yes|no   (R = dltune samples/s / PyTorch samples/s)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CASES = [  # name, model, batch, steps, data
    ("mlp64", "mlp", 64, 400, "synthetic"),
    ("mlp256", "mlp", 256, 300, "synthetic"),
    ("lenet", "lenet", 64, 300, "synthetic"),
    ("alexnet", "alexnet", 64, 25, "synthetic-imagenet"),
]


def have_gpu():
    try:
        import torch
    except ImportError:
        return False, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return False, "torch.cuda.is_available() is false (no GPU or no driver)"
    return True, torch.cuda.get_device_name(0)


def run_dltune(worker, model, batch, steps, data, device="gpu", seed=1):
    cfg = {"model": model, "data": data, "global_batch": batch, "steps": steps, "seed": seed,
           "device": device, "lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4,
           "heldout_size": 0, "log_every": max(1, steps)}
    if data == "synthetic-imagenet":
        cfg.update({"input": [3, 227, 227], "classes": 1000, "train_size": 2 * batch})
    else:
        cfg["train_size"] = 8192
    with tempfile.TemporaryDirectory() as d:
        plan = os.path.join(d, "plan.json")
        summary = os.path.join(d, "summary.json")
        with open(plan, "w") as f:
            json.dump(cfg, f)
        p = subprocess.run([worker, "train", "--plan", plan, "--summary", summary],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"dltune-worker failed ({p.returncode}): {p.stderr.strip()}")
        with open(summary) as f:
            return json.load(f)


def torch_model(name):
    import torch.nn as nn
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                             nn.ReLU(), nn.Linear(256, 10)), (1, 28, 28), 10
    if name == "lenet":
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5),
                             nn.MaxPool2d(2, 2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                             nn.Linear(500, 10)), (1, 28, 28), 10
    lrn = lambda: nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, 4), nn.ReLU(), lrn(), nn.MaxPool2d(3, 2),
        nn.Conv2d(96, 256, 5, 1, 2, groups=2), nn.ReLU(), lrn(), nn.MaxPool2d(3, 2),
        nn.Conv2d(256, 384, 3, 1, 1), nn.ReLU(), nn.Conv2d(384, 384, 3, 1, 1, groups=2),
        nn.ReLU(), nn.Conv2d(384, 256, 3, 1, 1, groups=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Flatten(), nn.Linear(9216, 4096), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4096, 4096),
        nn.ReLU(), nn.Dropout(0.5), nn.Linear(4096, 1000)), (3, 227, 227), 1000


def run_torch(model, batch, steps):
    import torch
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    net, shape, classes = torch_model(model)
    net = net.cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    # The same pool as dltune's synthetic data: a few batches' worth, host-resident, copied per
    # step as dltune copies its batch.
    pool = torch.randn(4 * batch, *shape).pin_memory()
    labels = torch.randint(0, classes, (4 * batch,)).pin_memory()
    warm = 2
    for i in range(steps):
        if i == warm:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        j = (i % 4) * batch
        x = pool[j:j + batch].cuda(non_blocking=True)
        y = labels[j:j + batch].cuda(non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return (steps - warm) * batch / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("DLTUNE_BINARY_DIR", "build"))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    ok, what = have_gpu()
    if not ok:
        print(f"bench_gpu: skipped: {what}")
        return 0
    worker = os.path.join(args.build, "bin", "dltune-worker")
    if not os.access(worker, os.X_OK):
        print(f"bench_gpu: {worker} not found; build dltune with CUDA first", file=sys.stderr)
        return 2
    print(f"GPU: {what}")
    print(f"{'case':10} {'dltune sps':>12} {'torch sps':>12} {'ratio':>7}")
    ratios = {}
    for name, model, batch, steps, data in CASES:
        ours, theirs = [], []
        for _ in range(args.repeats):  # interleaved
            ours.append(run_dltune(worker, model, batch, steps, data)["throughput_sps"])
            theirs.append(run_torch(model, batch, steps))
        a, b = statistics.median(ours), statistics.median(theirs)
        ratios[name] = a / b
        print(f"{name:10} {a:12.0f} {b:12.0f} {a / b:7.2f}")
    match = True
    for model, steps in (("mlp", 30), ("lenet", 20)):
        g = run_dltune(worker, model, 64, steps, "synthetic", device="gpu")["final_loss"]
        c = run_dltune(worker, model, 64, steps, "synthetic", device="cpu")["final_loss"]
        same = abs(g - c) <= 1e-3 * max(1.0, abs(c))
        match = match and same
        print(f"loss after {steps} steps, {model}: gpu {g:.6f} cpu {c:.6f} "
              f"{'match' if same else 'DIFFER'}")
    print("summary: " + " ".join(f"{k}_vs_torch={ratios[k]:.2f}" for k in
                                 ("mlp64", "mlp256", "lenet", "alexnet")) +
          f" loss_match={'yes' if match else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
