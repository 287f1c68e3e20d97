#!/usr/bin/env python3
"""A small CNN trained with PyTorch DistributedDataParallel on synthetic CIFAR-shaped data.

CPU only, gloo backend, env:// initialization: run it under `dltune run -n N`, torchrun or
mpirun-like launchers that set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Without
WORLD_SIZE it trains as one process, without DDP.

Rank 0 prints `samples/s: X` (global samples per second over the timed steps, the first
WARMUP steps excluded) and `final loss: Y`, and appends a JSON line to $DLTUNE_METRICS when set.
"""
import argparse
import json
import os
import time
from collections import deque

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DistributedSampler

WARMUP = 2       # steps left out of the throughput
SAMPLES = 4096   # size of the synthetic data set
CLASSES = 10


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=32, help="per process")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--bucket-mb", type=float,
                   default=float(os.environ.get("DLTUNE_BUCKET_MB", 25)),
                   help="DDP's bucket_cap_mb (default: $DLTUNE_BUCKET_MB, else 25)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--log-every", type=int, default=20, help="rank 0 prints the loss (0: never)")
    args = p.parse_args()
    if args.batch_size < 1 or args.steps < 1 or args.bucket_mb <= 0:
        p.error("--batch-size and --steps must be >= 1, --bucket-mb > 0")
    return args


def synthetic_data(seed=0):
    """CIFAR-shaped images: a per-class pattern plus noise, so the loss can go down."""
    g = torch.Generator().manual_seed(seed)
    prototypes = torch.randn(CLASSES, 3, 32, 32, generator=g)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    images = prototypes[labels] + 2.0 * torch.randn(SAMPLES, 3, 32, 32, generator=g)
    return images, labels


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 8 * 8, 128)
        self.fc2 = nn.Linear(128, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def batches(sampler, batch_size):
    """Endless per-rank batches of indices: this rank's share of every epoch, reshuffled."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        idx = torch.tensor(list(sampler))
        for i in range(0, len(idx) - batch_size + 1, batch_size):
            yield idx[i:i + batch_size]
        epoch += 1


def main():
    args = parse_args()
    if "OMP_NUM_THREADS" in os.environ:
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1

    images, labels = synthetic_data()
    sampler = DistributedSampler(range(SAMPLES), num_replicas=world, rank=rank,
                                 shuffle=True, seed=0, drop_last=True)
    if args.batch_size > len(sampler):
        raise SystemExit(f"--batch-size {args.batch_size} exceeds this rank's "
                         f"{len(sampler)} samples")

    torch.manual_seed(0)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = SmallCNN()
    if distributed:
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    warmup = WARMUP if args.steps > WARMUP else 0
    recent = deque(maxlen=10)  # this rank's last losses
    start = time.perf_counter()
    for step, idx in zip(range(1, args.steps + 1), batches(sampler, args.batch_size)):
        if step == warmup + 1:
            start = time.perf_counter()  # the clock starts once the warm-up steps are done
        loss = F.cross_entropy(model(images[idx]), labels[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        recent.append(loss.item())
        if rank == 0 and args.log_every and step % args.log_every == 0:
            print(f"step {step}/{args.steps} loss {sum(recent) / len(recent):.4f}", flush=True)
    elapsed = time.perf_counter() - start

    # The final loss: the mean of the last 10 steps' losses, averaged over the ranks.
    final = torch.tensor([sum(recent) / len(recent)])
    if distributed:
        dist.all_reduce(final)
        final /= world
    if rank == 0:
        sps = (args.steps - warmup) * args.batch_size * world / elapsed
        print(f"samples/s: {sps:.1f}")
        print(f"final loss: {final.item():.4f}", flush=True)
        if os.environ.get("DLTUNE_METRICS"):
            with open(os.environ["DLTUNE_METRICS"], "a") as f:
                f.write(json.dumps({"samples_per_s": round(sps, 2), "loss": round(final.item(), 4),
                                    "steps": args.steps}) + "\n")
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
