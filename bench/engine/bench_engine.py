#!/usr/bin/python3
"""bench/engine: the dltune engine against PyTorch 1.13 (Debian's python3-torch), interleaved.

    /usr/bin/python3 bench/engine/bench_engine.py [--build build] [--rounds 3] [--seconds 2]
                                                  [--algo shm] [--overlap on]

Same model, batch, synthetic MNIST-shaped data, SGD with momentum, 1 thread per rank. Each
round measures, in rotating order: the engine (bench-engine-rank) and PyTorch 1 rank for mlp
b64, mlp b256, lenet5 b64; then 2-rank weak scaling of mlp b64/b256 for the engine (ranks as
threads over the ThreadCommunicator) and for PyTorch DistributedDataParallel (gloo, 2
processes). The engine's 2-rank runs reduce their 1 MiB gradient buckets with --algo (default
shm: the node-shared-memory allreduce in place on the gradient buffer, which is what `dltune tune`
picks at every size on this machine; ring, the engine's default without a plan, reached 0.69-0.82
at b64 where shm reached 0.83-0.91) and --overlap (default on, the engine's default; off measured
the same within noise). Every rank, the engine's and PyTorch's, is bound to its own CPU (rank r
to the r-th allowed one; a 1-rank run to the first): this VM's CPU 0 runs ~10 % slower than
CPU 1. Ratios are medians of per-round paired ratios. Last line: the summary."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
try:
    import torch  # noqa: E402
    import torch.nn as nn  # noqa: E402
except ImportError as e:
    sys.exit(f"bench/engine: PyTorch is the peer this benchmark measures against and it is not "
             f"installed ({e}); install Debian's python3-torch: apt-get install python3-torch")

torch.set_num_threads(1)


def torch_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                             nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


ALLOWED_CPUS = sorted(os.sched_getaffinity(0))


def bound_to(rank):
    """Binds this process to the rank-th allowed CPU, as bench-engine-rank binds its ranks (and
    `dltune run` its rank processes): this VM's CPUs differ in speed by ~10 %, so both sides of
    a comparison must run on the same one."""
    os.sched_setaffinity(0, {ALLOWED_CPUS[rank % len(ALLOWED_CPUS)]})


def torch_sps(name, batch, seconds, ddp=None):
    if ddp is None:  # a DDP worker is bound by ddp_worker
        bound_to(0)
        try:
            return measure_torch(name, batch, seconds)
        finally:
            os.sched_setaffinity(0, set(ALLOWED_CPUS))
    return measure_torch(name, batch, seconds, ddp)


def measure_torch(name, batch, seconds, ddp=None):
    model = torch_model(name)
    if ddp is not None:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    lossf = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        lossf(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    t = time.perf_counter()
    for _ in range(5):
        step()
    steps = int(seconds / ((time.perf_counter() - t) / 5)) + 1
    if ddp is not None:  # every rank must run the same number of steps
        s = torch.tensor([steps])
        torch.distributed.broadcast(s, 0)
        steps = int(s.item())
    t = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * batch / (time.perf_counter() - t)


def ddp_worker(rank, batch, seconds, port, out):
    bound_to(rank)
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=2)
    sps = torch_sps("mlp", batch, seconds, ddp=True)
    if rank == 0:
        out.put(2 * sps)  # global samples/s (per-rank batch each)
    torch.distributed.destroy_process_group()


def torch_ddp_sps(batch, seconds, port):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=ddp_worker, args=(r, batch, seconds, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    v = q.get(timeout=120)
    for p in procs:
        p.join()
    return v


def engine(build, *args):
    out = subprocess.run([os.path.join(build, "bin", "bench-engine-rank"), *map(str, args)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("DLTUNE_BUILD", "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--algo", default="shm", help="the engine's allreduce for 2 ranks")
    ap.add_argument("--overlap", choices=["on", "off"], default="on")
    a = ap.parse_args()
    single = [("mlp", 64), ("mlp", 256), ("lenet5", 64)]
    ratios = {k: [] for k in single}
    gflops = {k: [] for k in single}
    weak = {64: [], 256: []}
    ddp = {64: [], 256: []}
    sgemm = []
    port = 29500 + os.getpid() % 1000
    print(f"{'round':>5} {'what':<22} {'dltune sps':>11} {'torch sps':>10} {'ratio':>6}")
    for r in range(a.rounds):
        sgemm.append(engine(a.build, "sgemm", 2048)["sgemm_gflops"])
        order = single if r % 2 == 0 else list(reversed(single))
        for name, b in order:
            if r % 2 == 0:
                e = engine(a.build, "train", name, b, 1, a.seconds)
                t = torch_sps(name, b, a.seconds)
            else:
                t = torch_sps(name, b, a.seconds)
                e = engine(a.build, "train", name, b, 1, a.seconds)
            ratios[(name, b)].append(e["samples_per_s"] / t)
            gflops[(name, b)].append(e["gflops"])
            print(f"{r:>5} {name + ' b' + str(b):<22} {e['samples_per_s']:>11.0f} {t:>10.0f} "
                  f"{e['samples_per_s'] / t:>6.2f}", flush=True)
        for b in (64, 256):
            e1 = engine(a.build, "train", "mlp", b, 1, a.seconds)["samples_per_s"]
            e2 = engine(a.build, "train", "mlp", b, 2, a.seconds, a.algo,
                        "overlap" if a.overlap == "on" else "no-overlap")["samples_per_s"]
            t1 = torch_sps("mlp", b, a.seconds)
            port += 1
            t2 = torch_ddp_sps(b, a.seconds, port)
            weak[b].append(e2 / (2 * e1))
            ddp[b].append(t2 / (2 * t1))
            print(f"{r:>5} {'weak 2 ranks mlp b' + str(b):<22} {e2:>11.0f} {t2:>10.0f} "
                  f"eff dltune {e2 / (2 * e1):.2f} torch ddp {t2 / (2 * t1):.2f}", flush=True)
    med = statistics.median
    sg = med(sgemm)
    print(f"OpenBLAS sgemm 2048 (1 thread, this run): {sg:.1f} GFLOP/s")
    print(f"engine 2 ranks: allreduce {a.algo}, overlap {a.overlap}")
    for k in single:
        g = med(gflops[k])
        print(f"engine {k[0]} b{k[1]}: {g:.1f} GFLOP/s = {100 * g / sg:.0f}% of sgemm")
    print("summary: " + " ".join([
        f"mlp64_vs_torch={med(ratios[('mlp', 64)]):.2f}",
        f"mlp256_vs_torch={med(ratios[('mlp', 256)]):.2f}",
        f"lenet5_vs_torch={med(ratios[('lenet5', 64)]):.2f}",
        f"weak_eff_b64={med(weak[64]):.2f}", f"weak_eff_b256={med(weak[256]):.2f}",
        f"ddp_eff_b64={med(ddp[64]):.2f}", f"ddp_eff_b256={med(ddp[256]):.2f}"]))


if __name__ == "__main__":
    sys.exit(main())
