#!/usr/bin/python3
"""bench/engine: dltune's training against PyTorch 1.13 (Debian's python3-torch), interleaved.

    /usr/bin/python3 bench/engine/bench_engine.py [--build build] [--rounds 3] [--seconds 2]
                                                  [--algo plan|ring|shm|...] [--no-threads]
                                                  [--modes-only | --no-modes]

Same model, per-rank batch, synthetic data of the model's shape (MNIST-shaped digits for the
2012 nets, CIFAR-shaped images for resnet20, 3x64x64 for resnet18, byte windows of a text file
for gpt-tiny), SGD with momentum (AdamW for gpt-tiny), one thread per rank on both sides, every
rank bound to its own CPU (rank r to the r-th allowed one). The recipes say
`launch.threads_per_rank: 1`: its default, auto, gives a lone rank every core of the node, which
made the 1-rank cases 2 threads against PyTorch's 1 and halved the weak-scaling efficiencies
(measured on 9208039's content: resnet20_vs_torch 1.75, weak_eff_resnet20 0.49); the threaded
comparison is the best-modes part's.

dltune runs as a user runs it: `dltune launch RECIPE -n R --json` of a recipe that names the
model (CASES below; a model is found by its recipe name, and its PyTorch twin by the same name
in torch_models.py), so the ranks are processes started by `dltune run`, each training with
the plan's allreduce. With --algo plan (the default), a first launch of each 2-rank case tunes
its collectives (the recipe fixes batch, bucket 1 MiB and overlap, so only the allreduce is
left to choose) and stores the plan; the measured launches find it in the database. --algo NAME
pins that algorithm instead (comm.allreduce in the recipe, --no-tune). Throughput is the
launch's own (samples over the timed steps: every step but the first).

PyTorch runs one process per rank too: in this process for one rank, and for two ranks
DistributedDataParallel over gloo in two spawned processes (its default CPU backend).

Each round measures, in rotating order: every case on one rank (dltune, PyTorch), then 2-rank
weak scaling (WEAK) for dltune and for DDP. Efficiency = 2-rank samples/s / (2 x the same
round's 1-rank samples/s), per side. The old figure, ranks as threads of one process over the
in-process communicator (bench-engine-rank), is kept as a labelled extra (`*_threads`): it
skips process launch, MPI and the PMIx plan, and is not what a user runs. Ratios and
efficiencies are medians of per-round paired figures.

Best modes (engine issue 38; --modes-only runs just these, --no-modes skips them): PyTorch as
an expert runs it on the same cores, for resnet20 b64, gpt-tiny b16, resnet18 b32 on 3x64x64 and
lenet5 b64: every mode of fp32 / bf16 autocast x contiguous / channels_last (4-D inputs), with
torch.set_num_threads(T) in a process bound to T CPUs, and OpenBLAS (Debian's torch's BLAS) on 1
or on T threads, each a separate process (the variable is read at import); its best mode against
dltune's best of fp32 and bf16 with every layer's kernel chosen by measurement
(bench-engine-rank --select-kernels: the engine's trainer in-process, as dltune-worker runs it,
without the launch), for T = 1 and 2 threads of one rank. Each model's achieved FLOP/s (3x its
forward FLOPs per sample) is printed as a fraction of one core's measured fp32 and bf16 GEMM
peaks (OpenBLAS sgemm and oneDNN matmul, n = 1024; bench-engine-rank peak). On a CPU without bf16
instructions (this project's AMD Zen 3) both sides' bf16 runs in fp32 arithmetic on rounded
values: expect no bf16 speed-up there. PyTorch's fp32 modes are measured first; a bf16 mode
whose first timed step runs below half the fastest of them is reported at that step's rate and
not measured further (it cannot be the best mode; on this Zen 3 it would take minutes a model).
Last line: the summary."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch  # noqa: E402
    import torch.nn as nn  # noqa: E402
    from torch_models import MODELS  # noqa: E402
except ImportError as e:
    sys.exit(f"bench/engine: PyTorch is the peer this benchmark measures against and it is not "
             f"installed ({e}); install Debian's python3-torch: apt-get install python3-torch")

torch.set_num_threads(1)

# (summary label, recipe model name, per-rank batch): one rank against PyTorch.
CASES = [("mlp64", "mlp", 64), ("mlp256", "mlp", 256), ("lenet5", "lenet5", 64),
         ("resnet20", "resnet20", 64), ("gpt_tiny", "gpt-tiny", 16), ("resnet18", "resnet18", 32)]
# (summary label, model, per-rank batch): 2-rank weak scaling against DDP.
WEAK = [("b64", "mlp", 64), ("b256", "mlp", 256), ("resnet20", "resnet20", 64),
        ("gpt", "gpt-tiny", 16)]
# The text file gpt-tiny learns from (every Debian machine has it).
TEXT = "/usr/share/common-licenses/GPL-3"
BUCKET = "1MiB"

ALLOWED_CPUS = sorted(os.sched_getaffinity(0))


def bound_to(rank):
    """Binds this process to the rank-th allowed CPU, as `dltune run` binds its rank processes:
    this VM's CPUs differ in speed by ~10 %, so both sides must run on the same ones."""
    os.sched_setaffinity(0, {ALLOWED_CPUS[rank % len(ALLOWED_CPUS)]})


# ---- dltune, through its command line

def data_yaml(model, batch):
    """The recipe's data section for the model's input shape (torch_models.MODELS)."""
    shape = MODELS[model][1]
    samples = max(8192, 16 * batch)
    if len(shape) == 1:
        return f"  kind: text\n  path: {TEXT}\n  context: {shape[0]}\n  heldout: 0.05"
    if shape == (3, 32, 32):
        return f"  kind: synthetic-cifar\n  samples: {samples}\n  heldout: 0.05"
    if shape[0] == 3:
        return (f"  kind: synthetic-imagenet\n  shape: [{', '.join(map(str, shape))}]\n"
                f"  classes: 10\n  samples: {max(1024, 8 * batch)}\n  heldout: 0.05")
    return f"  kind: synthetic-digits\n  samples: {samples}\n  heldout: 0.05"


def optimizer_yaml(model):
    if len(MODELS[model][1]) == 1:
        return "    kind: adamw\n    lr: 0.001\n    weight_decay: 0.1"
    return "    kind: sgd\n    lr: 0.01\n    momentum: 0.9\n    weight_decay: 0.0005"


def recipe_text(model, batch, steps, algo):
    return f"""name: bench-{model}-b{batch}
description: bench/engine case (generated)
model: {model}
data:
{data_yaml(model, batch)}
training:
  steps: {steps}
  batch:
    per_rank: {batch}
  scaling: weak
  optimizer:
{optimizer_yaml(model)}
  seed: 1
comm:
  allreduce: {"auto" if algo == "plan" else algo}
  bucket: {BUCKET}
  overlap: on
tune:
  budget: 30
launch:
  binding: auto
  threads_per_rank: 1
"""


class Dltune:
    def __init__(self, build, algo, work):
        self.dltune = os.path.join(build, "bin", "dltune")
        self.algo = algo
        self.work = work
        self.env = dict(os.environ, DLTUNE_RUNS_DIR=os.path.join(work, "runs"),
                        DLTUNE_SITE_DB="", DLTUNE_NO_PROGRESS="1")

    def launch(self, model, batch, ranks, steps):
        """Runs `dltune launch` of the case; returns its summary (a dict)."""
        path = os.path.join(self.work, f"{model}-b{batch}.yaml")
        with open(path, "w") as f:
            f.write(recipe_text(model, batch, steps, self.algo))
        cmd = [self.dltune, "launch", path, "-n", str(ranks), "--json"]
        if ranks == 1 or self.algo != "plan":  # else the plan: tuned once, then from the db
            cmd.append("--no-tune")
        # One database per case: a plan is keyed by the model, not by the batch the recipe
        # fixes, and a cached plan's batch replaced the recipe's (b256 trained at b64).
        env = dict(self.env, DLTUNE_DB=os.path.join(self.work, f"{model}-b{batch}.sqlite"))
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"bench/engine: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
        shutil.rmtree(os.path.join(self.work, "runs"), ignore_errors=True)
        for line in reversed(p.stdout.splitlines()):
            if line.startswith("{") and '"summary"' in line:
                s = json.loads(line)
                if int(s.get("global_batch", 0)) != batch * ranks:
                    sys.exit(f"bench/engine: {' '.join(cmd)} trained global batch "
                             f"{s.get('global_batch')}, not {batch} x {ranks}")
                return s
        sys.exit(f"bench/engine: no summary from {' '.join(cmd)}:\n{p.stdout[-2000:]}")


def threads_sps(build, model, batch, ranks, seconds, algo):
    """The labelled extra: ranks as threads of one process (bench-engine-rank)."""
    args = [os.path.join(build, "bin", "bench-engine-rank"), "train", model, str(batch),
            str(ranks), str(seconds)]
    if ranks > 1:
        args += [algo if algo != "plan" else "shm", "overlap"]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["samples_per_s"]


# ---- PyTorch

def measure_torch(name, batch, seconds, ddp=False):
    make, shape = MODELS[name]
    model = make()
    if ddp:
        model = nn.parallel.DistributedDataParallel(model)
    lossf = nn.CrossEntropyLoss()
    if len(shape) == 1:  # a language model: AdamW, a loss at every position
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
        x = torch.randint(0, 256, (batch, *shape))
        y = torch.randint(0, 256, (batch, *shape))

        def loss():
            return lossf(model(x).reshape(-1, 256), y.reshape(-1))
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
        x = torch.randn(batch, *shape)
        y = torch.randint(0, 10, (batch,))

        def loss():
            return lossf(model(x), y)

    def step():
        opt.zero_grad()
        loss().backward()
        opt.step()

    for _ in range(3):
        step()
    t = time.perf_counter()
    for _ in range(5):
        step()
    steps = int(seconds / ((time.perf_counter() - t) / 5)) + 1
    if ddp:  # every rank must run the same number of steps
        s = torch.tensor([steps])
        torch.distributed.broadcast(s, 0)
        steps = int(s.item())
    t = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * batch / (time.perf_counter() - t)


def measure_torch_mode(name, batch, seconds, bf16, channels_last, give_up_below=0.0):
    """Samples/s of one PyTorch mode on this process's threads (the expert modes). With
    give_up_below > 0, a mode whose first timed step (after one warm-up step) runs below that
    rate is not measured further: that step's rate is returned. It is meant for a rate half the
    fastest mode's so far, which no run-to-run noise here bridges, so the best mode is still
    measured in full; it spares a CPU without bf16 instructions minutes of emulated bf16 steps
    (PyTorch's bf16 autocast trains resnet20 at 12 samples/s on this Zen 3, fp32 at 230)."""
    make, shape = MODELS[name]
    model = make()
    lossf = nn.CrossEntropyLoss()
    lm = len(shape) == 1
    if lm:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
        x = torch.randint(0, 256, (batch, *shape))
        y = torch.randint(0, 256, (batch, *shape))
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
        x = torch.randn(batch, *shape)
        y = torch.randint(0, 10, (batch,))
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(x)
        loss = lossf(out.float().reshape(-1, 256), y.reshape(-1)) if lm else lossf(out.float(), y)
        loss.backward()
        opt.step()

    step()
    if give_up_below > 0:
        t = time.perf_counter()
        step()
        rate = batch / (time.perf_counter() - t)
        if rate < give_up_below:
            return rate
    for _ in range(2 if give_up_below > 0 else 3):
        step()
    t = time.perf_counter()
    for _ in range(3):
        step()
    steps = int(seconds / ((time.perf_counter() - t) / 3)) + 1
    t = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * batch / (time.perf_counter() - t)


def torch_worker(name, batch, seconds, threads):
    """--torch-worker: every mode of one model on `threads` threads, as one JSON line."""
    torch.set_num_threads(threads)
    os.sched_setaffinity(0, set(ALLOWED_CPUS[:threads]))
    cl_ok = len(MODELS[name][1]) == 3
    out = {}
    # fp32 first; a bf16 mode below half the best so far stops after one timed step.
    for bf16 in (False, True):
        for cl in ((False, True) if cl_ok else (False,)):
            mode = ("bf16" if bf16 else "fp32") + ("_cl" if cl else "")
            floor = 0.5 * max(out.values()) if bf16 and out else 0.0
            out[mode] = measure_torch_mode(name, batch, seconds, bf16, cl, floor)
    print(json.dumps(out))


def torch_modes(name, batch, seconds, threads):
    """{mode: samples/s} of every PyTorch mode on `threads` threads, OpenBLAS on 1 and (when
    threads > 1) on as many threads: the best of the two settings per mode."""
    best = {}
    for blas in sorted({1, threads}):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(blas), OMP_NUM_THREADS=str(threads))
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-worker", name,
                            str(batch), str(seconds), str(threads)],
                           env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"bench/engine: the PyTorch worker failed:\n{p.stderr[-2000:]}")
        for mode, sps in json.loads(p.stdout.strip().splitlines()[-1]).items():
            key = mode + ("" if blas == 1 else f"_blas{blas}")
            best[key] = sps
    return best


def dltune_mode(build, model, batch, seconds, threads, precision):
    """One rank of dltune's trainer on `threads` threads in `precision`, every layer's kernel
    chosen by measurement first: the JSON line of bench-engine-rank."""
    args = [os.path.join(build, "bin", "bench-engine-rank"), "train", model, str(batch), "1",
            str(seconds), "--threads", str(threads), "--precision", precision,
            "--select-kernels"]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def gemm_peaks(build):
    args = [os.path.join(build, "bin", "bench-engine-rank"), "peak", "1024"]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# (summary label, model, per-rank batch) of the best-mode comparison.
MODES = [("resnet20", "resnet20", 64), ("gpt_tiny", "gpt-tiny", 16),
         ("resnet18", "resnet18", 32), ("lenet5", "lenet5", 64)]


def best_modes(a):
    """The best-mode rounds; returns the summary keys."""
    med = statistics.median
    peaks = gemm_peaks(a.build)
    print(f"one core's GEMM peaks (n 1024, 1 thread): OpenBLAS sgemm "
          f"{peaks['openblas_sgemm_gflops']:.1f} GFLOP/s, oneDNN fp32 "
          f"{peaks['onednn_f32_gflops']:.1f}, oneDNN bf16 {peaks['onednn_bf16_gflops']:.1f} "
          f"(-1: no bf16 kernel); CPU: {peaks['cpu']}; oneDNN {peaks['onednn']}")
    if not peaks["bf16_hardware"]:
        print("no bf16 instructions here: bf16 on both sides computes in fp32 arithmetic on "
              "bf16-rounded values (the engine's documented fallback); no bf16 speed-up expected")
    ratio = {(lab, t): [] for lab, _, _ in MODES for t in (1, 2)}
    tbest = {(lab, t): [] for lab, _, _ in MODES for t in (1, 2)}
    dbest = {(lab, t): [] for lab, _, _ in MODES for t in (1, 2)}
    bf16_speedup = {lab: [] for lab, _, _ in MODES}
    frac = {lab: [] for lab, _, _ in MODES}
    choices = {}
    print(f"{'round':>5} {'model':<9} {'thr':>3} {'torch modes (samples/s)':<64} "
          f"{'dltune fp32':>11} {'bf16':>7} {'best/torch':>10}")
    for r in range(a.rounds):
        for label, model, b in (MODES if r % 2 == 0 else list(reversed(MODES))):
            for t in (1, 2):
                runs = [("torch", lambda: torch_modes(model, b, a.seconds, t)),
                        ("fp32", lambda: dltune_mode(a.build, model, b, a.seconds, t, "fp32")),
                        ("bf16", lambda: dltune_mode(a.build, model, b, a.seconds, t, "bf16"))]
                got = {}
                for k in range(len(runs)):
                    name, fn = runs[(k + r) % len(runs)]
                    got[name] = fn()
                tb = max(got["torch"].values())
                d32, d16 = got["fp32"]["samples_per_s"], got["bf16"]["samples_per_s"]
                db = max(d32, d16)
                ratio[(label, t)].append(db / tb)
                tbest[(label, t)].append(tb)
                dbest[(label, t)].append(db)
                if t == 1:
                    bf16_speedup[label].append(d16 / d32)
                    best = got["fp32"] if d32 >= d16 else got["bf16"]
                    frac[label].append(db * best["flops_per_sample"] / 1e9 /
                                       peaks["fp32_peak_gflops"])
                    choices[label] = (got["fp32"].get("kernels", []))
                modes = " ".join(f"{m} {v:.0f}" for m, v in sorted(got["torch"].items()))
                print(f"{r:>5} {label:<9} {t:>3} {modes:<64} {d32:>11.0f} {d16:>7.0f} "
                      f"{db / tb:>10.2f}", flush=True)
    print("dltune: one rank, the trainer in-process (bench-engine-rank), every layer's kernel "
          "chosen by measurement; PyTorch: one process, torch.set_num_threads(T), best of its modes "
          "(a bf16 mode below half its fastest fp32 mode is timed over one step only: it cannot "
          "be the best); fractions of peak count the model's direct-convolution FLOPs (a layer "
          "on the winograd kernel does 4/9 of them)")
    for label, _, _ in MODES:
        fp = med(frac[label])
        print(f"{label}: 1 thread: PyTorch best {med(tbest[(label, 1)]):.0f} samples/s, dltune "
              f"best {med(dbest[(label, 1)]):.0f} ({med(ratio[(label, 1)]):.2f}x); 2 threads: "
              f"{med(tbest[(label, 2)]):.0f} vs {med(dbest[(label, 2)]):.0f} "
              f"({med(ratio[(label, 2)]):.2f}x); dltune at {fp:.2f} of the fp32 GEMM peak, "
              f"{fp * peaks['fp32_peak_gflops'] / peaks['bf16_peak_gflops']:.2f} of the bf16 one")
    for c in choices.get("resnet20", []):
        if c["timings"]:
            print(f"  resnet20 kernel {c['node']:<24} {c['kernel']:<10} " +
                  " ".join(f"{t['kernel']} {t['median_ms']:.2f} ms" for t in c["timings"]))
    keys = [f"{label}_vs_torch_best={med(ratio[(label, 1)]):.2f}" for label, _, _ in MODES]
    keys += [f"{label}_vs_torch_best_threads2={med(ratio[(label, 2)]):.2f}"
             for label, _, _ in MODES]
    keys.append(f"bf16_speedup_resnet20={med(bf16_speedup['resnet20']):.2f}")
    eff = [d2 / (2 * d1) for d1, d2 in zip(dbest[("resnet20", 1)], dbest[("resnet20", 2)])]
    teff = [t2 / (2 * t1) for t1, t2 in zip(tbest[("resnet20", 1)], tbest[("resnet20", 2)])]
    keys.append(f"threads2_eff_resnet20={med(eff):.2f}")
    keys.append(f"torch_threads2_eff_resnet20={med(teff):.2f}")
    keys.append(f"torch_best_sps_resnet20={med(tbest[('resnet20', 1)]):.0f}")
    keys.append(f"fp32_peak_gflops={peaks['fp32_peak_gflops']:.1f}")
    keys.append(f"bf16_peak_gflops={peaks['bf16_peak_gflops']:.1f}")
    keys += [f"{label}_fraction_fp32_peak={med(frac[label]):.2f}" for label, _, _ in MODES]
    return keys


def torch_sps(name, batch, seconds):
    bound_to(0)
    try:
        return measure_torch(name, batch, seconds)
    finally:
        os.sched_setaffinity(0, set(ALLOWED_CPUS))


def ddp_worker(rank, name, batch, seconds, port, out):
    bound_to(rank)
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=2)
    sps = measure_torch(name, batch, seconds, ddp=True)
    if rank == 0:
        out.put(2 * sps)  # global samples/s (per-rank batch each)
    torch.distributed.destroy_process_group()


def torch_ddp_sps(name, batch, seconds, port):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=ddp_worker, args=(r, name, batch, seconds, port, q))
             for r in range(2)]
    for p in procs:
        p.start()
    v = q.get(timeout=300)
    for p in procs:
        p.join()
    return v


# ---- the rounds

def steps_for(sps, batch, ranks, seconds):
    return int(min(20000, max(40, seconds * sps / (batch * ranks))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("DLTUNE_BUILD", "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--algo", default="plan",
                    help="dltune's allreduce for 2 ranks: 'plan' (tuned by the first launch) "
                         "or an algorithm to pin")
    ap.add_argument("--no-threads", action="store_true", help="skip the ranks-as-threads extra")
    ap.add_argument("--modes-only", action="store_true",
                    help="only the best-mode comparison (threads, bf16, kernel choice)")
    ap.add_argument("--no-modes", action="store_true", help="skip the best-mode comparison")
    a = ap.parse_args()
    if a.modes_only:
        print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        print("summary: " + " ".join(best_modes(a)))
        return 0
    med = statistics.median
    work = tempfile.mkdtemp(prefix="dltune-bench-engine-")
    d = Dltune(a.build, a.algo, work)
    port = 29500 + os.getpid() % 1000
    hint = {}  # (model, batch, ranks) -> last samples/s, to size the next launch

    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print("set-up: one launch per case (the 2-rank ones tune and store their plan)")
    for _, model, b in CASES + WEAK:
        if (model, b, 1) not in hint:
            hint[(model, b, 1)] = d.launch(model, b, 1, 60)["throughput_sps"]
    for label, model, b in WEAK:
        s = d.launch(model, b, 2, 60)
        hint[(model, b, 2)] = s["throughput_sps"]
        ranges = s["plan"]["collectives"].get("allreduce", [])
        print(f"  {model} b{b} on 2 ranks: plan ({s['plan_source']}): allreduce " +
              ", ".join(f"{r['algo']} from {r['min_bytes']} B" for r in ranges))

    single = {k[0]: [] for k in CASES}
    eff = {k[0]: [] for k in WEAK}
    ddp = {k[0]: [] for k in WEAK}
    launch_eff = {k[0]: [] for k in WEAK}
    thr = {k[0]: [] for k in WEAK}
    print(f"{'round':>5} {'what':<26} {'dltune sps':>11} {'torch sps':>10} {'ratio':>6}")
    for r in range(a.rounds):
        one = {}  # (model, batch) -> this round's dltune 1-rank samples/s
        one_t = {}
        order = CASES if r % 2 == 0 else list(reversed(CASES))
        for label, model, b in order:
            steps = steps_for(hint[(model, b, 1)], b, 1, a.seconds)
            if r % 2 == 0:
                e = d.launch(model, b, 1, steps)["throughput_sps"]
                t = torch_sps(model, b, a.seconds)
            else:
                t = torch_sps(model, b, a.seconds)
                e = d.launch(model, b, 1, steps)["throughput_sps"]
            hint[(model, b, 1)] = e
            one[(model, b)], one_t[(model, b)] = e, t
            single[label].append(e / t)
            print(f"{r:>5} {label + ' 1 rank':<26} {e:>11.0f} {t:>10.0f} {e / t:>6.2f}",
                  flush=True)
        for label, model, b in WEAK:
            if (model, b) not in one:
                one[(model, b)] = d.launch(model, b, 1, steps_for(hint[(model, b, 1)], b, 1,
                                                                     a.seconds))["throughput_sps"]
                one_t[(model, b)] = torch_sps(model, b, a.seconds)
            port += 1
            runs = [("dltune", lambda: d.launch(model, b, 2,
                                                 steps_for(hint[(model, b, 2)], b, 2, a.seconds))),
                    ("ddp", lambda: torch_ddp_sps(model, b, a.seconds, port))]
            if not a.no_threads:
                runs.append(("threads", lambda: (
                    threads_sps(a.build, model, b, 2, a.seconds, a.algo),
                    threads_sps(a.build, model, b, 1, a.seconds, a.algo))))
            got = {}
            for k in range(len(runs)):
                name, fn = runs[(k + r) % len(runs)]
                got[name] = fn()
            s2 = got["dltune"]
            e2, t2 = s2["throughput_sps"], got["ddp"]
            hint[(model, b, 2)] = e2
            eff[label].append(e2 / (2 * one[(model, b)]))
            ddp[label].append(t2 / (2 * one_t[(model, b)]))
            if s2.get("scaling_efficiency") is not None:
                launch_eff[label].append(s2["scaling_efficiency"])
            line = (f"{r:>5} {'weak 2 ranks ' + model + ' b' + str(b):<26} {e2:>11.0f} "
                    f"{t2:>10.0f} eff dltune {eff[label][-1]:.2f} (launch's own "
                    f"{s2.get('scaling_efficiency') or 0:.2f}) torch ddp {ddp[label][-1]:.2f}")
            if "threads" in got:
                th2, th1 = got["threads"]
                thr[label].append(th2 / (2 * th1))
                line += f"; extra: ranks as threads {thr[label][-1]:.2f}"
            print(line, flush=True)
    shutil.rmtree(work, ignore_errors=True)

    print(f"dltune: `dltune launch` processes, allreduce {a.algo}, bucket {BUCKET}, overlap on; "
          f"PyTorch: 1 process / DDP (gloo) 2 processes; 1 thread per rank on both sides "
          f"(launch.threads_per_rank 1; torch.set_num_threads(1)); every thread count: the "
          f"best-modes part")
    print("figures taken on a shared 2-core machine: compare paired ratios, not single medians")
    for label, model, b in WEAK:
        print(f"weak scaling {model} b{b}: dltune processes {med(eff[label]):.2f} "
              f"(the launch's own summary: {med(launch_eff[label]) if launch_eff[label] else 0:.2f})"
              + (f", ranks as threads (extra, not as a user runs it) {med(thr[label]):.2f}"
                 if thr[label] else "") + f"; PyTorch DDP {med(ddp[label]):.2f}")
    keys = [f"{label}_vs_torch={med(single[label]):.2f}" for label, _, _ in CASES]
    keys += [f"weak_eff_{label}={med(eff[label]):.2f}" for label, _, _ in WEAK]
    keys += [f"ddp_eff_{label}={med(ddp[label]):.2f}" for label, _, _ in WEAK]
    keys += [f"weak_eff_{label}_threads={med(thr[label]):.2f}" for label, _, _ in WEAK
             if thr[label]]
    if not a.no_modes:
        keys += best_modes(a)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print("summary: " + " ".join(keys))


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--torch-worker":
        torch_worker(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
        sys.exit(0)
    sys.exit(main())
