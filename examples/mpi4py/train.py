#!/usr/bin/env python3
"""A small MLP trained data-parallel with mpi4py: numpy forward and backward by hand.

Every rank computes the gradient of a batch from its own share of the synthetic data into one
flat float32 buffer, averaged with comm.Allreduce each step (the whole buffer at once, or in
buckets of --bucket-mb MiB); then every rank takes the same SGD step.
Run it under `dltune run -n N` or mpirun.

Rank 0 appends a JSON line {"step", "samples_per_s", "loss"} to $DLTUNE_METRICS (when set)
every 10 steps and once at the end, samples_per_s counting every rank's samples from the end
of the WARMUP steps to that step; it prints `samples/s: X` and `final loss: Y` at the end.
"""
import argparse
import json
import os
import time

import numpy as np
from mpi4py import MPI

WARMUP = 2                    # steps left out of the throughput
SAMPLES, FEATURES, CLASSES = 8192, 784, 10
LAYERS = [FEATURES, 512, 512, CLASSES]
METRICS_EVERY = 10


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--bucket-mb", type=float,
                   default=float(os.environ.get("DLTUNE_BUCKET_MB", 0)),
                   help="Allreduce the gradients in buckets of this many MiB "
                        "(default: $DLTUNE_BUCKET_MB, else 0: the whole buffer at once)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--log-every", type=int, default=50, help="rank 0 prints the loss (0: never)")
    args = p.parse_args()
    if args.batch_size < 1 or args.steps < 1 or args.bucket_mb < 0:
        p.error("--batch-size and --steps must be >= 1, --bucket-mb >= 0")
    return args


def synthetic_data(seed=0):
    """Every rank makes the same data set: a per-class centre plus noise."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CLASSES, FEATURES), dtype=np.float32)
    y = rng.integers(0, CLASSES, SAMPLES)
    x = 0.15 * centres[y] + rng.standard_normal((SAMPLES, FEATURES), dtype=np.float32)
    return x, y


def flat_views(flat):
    """[W1, b1, W2, b2, ...] as views into one flat buffer."""
    views, at = [], 0
    for n_in, n_out in zip(LAYERS, LAYERS[1:]):
        views.append(flat[at:at + n_in * n_out].reshape(n_in, n_out))
        views.append(flat[at + n_in * n_out:at + n_in * n_out + n_out])
        at += n_in * n_out + n_out
    return views


def forward_backward(params, grads, x, y):
    """Softmax cross-entropy of the MLP on (x, y); writes the gradient into `grads`."""
    acts = [x]
    for i in range(0, len(params), 2):
        h = acts[-1] @ params[i] + params[i + 1]
        acts.append(np.maximum(h, 0) if i + 2 < len(params) else h)
    z = acts.pop()
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    rows = np.arange(len(y))
    loss = -np.log(p[rows, y] + 1e-12).mean()
    d = p
    d[rows, y] -= 1
    d /= len(y)
    for i in range(len(params) - 2, -1, -2):
        a = acts.pop()
        np.matmul(a.T, d, out=grads[i])
        np.sum(d, axis=0, out=grads[i + 1])
        if i:
            d = (d @ params[i].T) * (a > 0)
    return float(loss)


def allreduce_mean(comm, flat, bucket_elems):
    for at in range(0, flat.size, bucket_elems):
        comm.Allreduce(MPI.IN_PLACE, flat[at:at + bucket_elems], op=MPI.SUM)
    flat /= comm.Get_size()


def main():
    args = parse_args()
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    x, y = synthetic_data()
    per_rank = SAMPLES // world
    if args.batch_size > per_rank:
        raise SystemExit(f"--batch-size {args.batch_size} exceeds this rank's {per_rank} samples")

    size = sum(n_in * n_out + n_out for n_in, n_out in zip(LAYERS, LAYERS[1:]))
    flat_params, flat_grads = np.zeros(size, np.float32), np.zeros(size, np.float32)
    params, grads = flat_views(flat_params), flat_views(flat_grads)
    rng = np.random.default_rng(1)  # the same initial weights on every rank
    for w in params[0::2]:
        w[...] = rng.standard_normal(w.shape, dtype=np.float32) * np.sqrt(2.0 / w.shape[0])
    bucket_elems = int(args.bucket_mb * 2**20 / 4) or size
    metrics = os.environ.get("DLTUNE_METRICS") if rank == 0 else None

    warmup = WARMUP if args.steps > WARMUP else 0
    order, pos, epoch = None, per_rank, 0
    losses, start = [], time.perf_counter()
    for step in range(1, args.steps + 1):
        if step == warmup + 1:
            start = time.perf_counter()
        if pos + args.batch_size > per_rank:  # a new epoch: reshuffle, take this rank's share
            order = np.random.default_rng(epoch).permutation(SAMPLES)[rank::world][:per_rank]
            pos, epoch = 0, epoch + 1
        idx = order[pos:pos + args.batch_size]
        pos += args.batch_size
        losses.append(forward_backward(params, grads, x[idx], y[idx]))
        allreduce_mean(comm, flat_grads, bucket_elems)
        flat_params -= args.lr * flat_grads

        if step % METRICS_EVERY and step != args.steps:
            continue
        loss = comm.allreduce(sum(losses) / len(losses)) / world  # the last steps', all ranks
        losses = []
        sps = (step - warmup) * args.batch_size * world / (time.perf_counter() - start)
        if rank == 0 and args.log_every and step % args.log_every == 0:
            print(f"step {step}/{args.steps} loss {loss:.4f} samples/s {sps:.1f}", flush=True)
        if metrics:
            with open(metrics, "a") as f:
                f.write(json.dumps({"step": step, "samples_per_s": round(sps, 2),
                                    "loss": round(loss, 4)}) + "\n")
    if rank == 0:
        print(f"samples/s: {sps:.1f}")
        print(f"final loss: {loss:.4f}", flush=True)


if __name__ == "__main__":
    main()
