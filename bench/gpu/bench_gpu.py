#!/usr/bin/env python3
"""dltune's GPU engine vs PyTorch on the same GPU: training throughput, and GPU/CPU loss agreement.

Throughput: mlp (batch 64 and 256), lenet (64), alexnet (64, 3x227x227), resnet50 (64,
3x224x224) and gpt2-small (8 sequences of 1024 tokens, vocabulary 50257) with
`dltune-worker train --device gpu`, and the same network in PyTorch (twins defined here, resnet50
from torchvision when it imports, gpt2-small from engine/tests/torch_nets.py), FP32 everywhere
(TF32 off on both sides: dltune runs plain FP32), same data shapes, same optimizer (SGD, momentum
0.9, weight decay 5e-4; AdamW for the GPT). dltune's figure is its own summary (samples/s over
every step but the first); PyTorch's the steps after 3 warm-up steps. PyTorch's GPT twin computes
attention as dltune does (scores, masked softmax, weighted sum); the figure with PyTorch's fused
scaled_dot_product_attention is printed beside it, labelled.

loss_match: the same training (seed, data, steps) with device gpu and device cpu, final losses
within 1e-3 relative: mlp, lenet, resnet20, gpt-tiny (AdamW, clipping, 2 micro-batches), and a
few steps of resnet50 and of gpt2-small on short inputs.

Results are printed (and, with --out, written as JSON) case by case, so a run cut short by its
time limit still reports what it measured; --budget SECONDS skips what would not fit.

Usage: bench_gpu.py [--bin DIR] [--worker-env FILE] [--budget S] [--repeats N] [--out FILE]
                    [--only NAME,...] [--dry-run]
  --bin: where dltune-worker and dltune are (default $DLTUNE_BINARY_DIR/bin or build/bin)
  --worker-env: lines VAR=VALUE set for dltune's processes only (the device kit's library
                paths), never for this Python process.
  --dry-run: no GPU needed: runs every case's configuration through the worker for one step
             (GPU cases stop at the device check; the quick loss cases train on the CPU), and
             builds every PyTorch twin on the CPU to check its parameter count against
             `dltune model list --json`.
Skips (exit 0) when there is no GPU. Last line: summary: mlp64_vs_torch=R mlp256_vs_torch=R
lenet_vs_torch=R alexnet_vs_torch=R resnet50_vs_torch=R gpt2_small_vs_torch=R loss_match=yes|no
(R = dltune samples/s / PyTorch samples/s; "-" where a case did not run).
"""
import argparse
import atexit
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
for d in (HERE, os.path.join(HERE, "..", "..", "engine", "tests")):
    if os.path.exists(os.path.join(d, "torch_nets.py")):
        sys.path.insert(0, d)
        break

SGD = {"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4}
ADAMW = {"optimizer": "adamw", "lr": 1e-4, "weight_decay": 0.1}


def imagenet(side, classes=1000):
    return {"data": "synthetic-imagenet", "input": [3, side, side], "classes": classes}


# Throughput cases: label, model, batch, dltune steps, extra config.
SPEED = [
    ("mlp64", "mlp", 64, 400, SGD),
    ("mlp256", "mlp", 256, 300, SGD),
    ("lenet", "lenet", 64, 300, SGD),
    ("alexnet", "alexnet", 64, 30, dict(SGD, **imagenet(227))),
    ("resnet50", "resnet50", 64, 20, dict(SGD, **imagenet(224))),
    ("gpt2_small", "gpt2-small", 8, 8, dict(ADAMW, input=[1024], text=1024)),
]
# Loss agreement cases: model, batch, steps, extra config. The quick ones run before the
# throughput cases, the two whose CPU side takes seconds after them.
LOSS_FIRST = [
    ("mlp", 64, 30, SGD),
    ("lenet", 64, 20, SGD),
    ("resnet20", 16, 5, dict(SGD, data="synthetic-cifar")),
    ("gpt-tiny", 8, 5, dict(ADAMW, lr=1e-3, clip_grad_norm=1.0, microbatches=2, input=[128],
                            text=128)),
]
LOSS_LAST = [
    ("resnet50", 4, 2, dict(SGD, **imagenet(224))),
    ("gpt2-small", 2, 2, dict(ADAMW, clip_grad_norm=1.0, input=[64], text=64)),
]
GOALS = {"mlp64": 1.0, "mlp256": 1.0, "lenet": 1.0, "alexnet": 0.8, "resnet50": 0.7,
         "gpt2_small": 0.7}


def log(msg):
    print(msg, flush=True)


def text_file(directory, context):
    """A deterministic text of ~120 KB (byte tokens) and the held-out share that leaves the
    worker two held-out windows (its text data always has a held-out part)."""
    path = os.path.join(directory, "text.txt")
    if not os.path.exists(path):
        rng = random.Random(1)
        words = ("the of and to in is was for on that with as by at from his her it an were "
                 "are which this be or has had not but one all their they there been gpu "
                 "kernel tensor stream batch gradient allreduce ring tree rank node").split()
        with open(path, "w") as f:
            f.write(" ".join(rng.choice(words) for _ in range(24000)))
    size = os.path.getsize(path)
    return path, min(0.4, (context + 1 + 2 * max(1, context // 16)) / size)


def worker_recipe(model, batch, steps, extra, device, work):
    """The recipe a case trains (YAML), as `dltune launch` would hand it to its ranks: the
    built-in `model` on synthetic data (no held-out evaluation) or a text file, `steps` steps
    of a global batch of `batch`, on the GPU engine (comm.backend nccl) or the CPU's."""
    opt = {k: v for k, v in extra.items() if k in ("lr", "momentum", "weight_decay",
                                                    "clip_grad_norm")}
    opt["kind"] = extra.get("optimizer", "sgd")
    shape = extra.get("input")
    model_keys = {"builtin": model}
    if "text" in extra:
        path, split = text_file(work, extra["text"])
        model_keys["context"] = extra["text"]
        data = {"kind": "text", "path": path, "context": extra["text"], "heldout": split}
    elif extra.get("data") == "synthetic-imagenet":
        data = {"kind": "synthetic-imagenet", "samples": 2 * batch, "heldout": 0,
                "shape": shape, "classes": extra.get("classes", 1000)}
    else:
        kind = "synthetic-cifar" if extra.get("data") == "synthetic-cifar" else "synthetic-digits"
        data = {"kind": kind, "samples": 8192, "heldout": 0}
    training = {"steps": steps, "batch": {"global": batch}, "scaling": "strong",
                "optimizer": opt, "seed": 1}
    if "microbatches" in extra:
        training["parallel"] = {"microbatches": extra["microbatches"]}
    recipe = {"name": "bench-" + model, "model": model_keys, "data": data,
              "training": training, "comm": {"backend": "nccl" if device == "gpu" else "auto"}}
    return json.dumps(recipe)  # JSON is YAML


class Dltune:
    def __init__(self, bindir, env_file, work):
        self.worker = os.path.join(bindir, "dltune-worker")
        self.dltune = os.path.join(bindir, "dltune")
        self.env = dict(os.environ)
        if env_file:
            with open(env_file) as f:
                for line in f:
                    if "=" in line:
                        k, v = line.rstrip("\n").split("=", 1)
                        self.env[k] = v
        self.work = work

    def train(self, model, batch, steps, extra, device, timeout):
        recipe = os.path.join(self.work, "recipe.yaml")
        summary = os.path.join(self.work, "summary.json")
        with open(recipe, "w") as f:
            f.write(worker_recipe(model, batch, steps, extra, device, self.work))
        if os.path.exists(summary):
            os.remove(summary)
        p = subprocess.run([self.worker, "train", "--recipe", recipe, "--summary", summary],
                           capture_output=True, text=True, env=self.env, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"dltune-worker ({device}) exited {p.returncode}: "
                               f"{p.stderr.strip()[-600:]}")
        with open(summary) as f:
            return json.load(f)

    def builtin_parameters(self):
        p = subprocess.run([self.dltune, "model", "list", "--json"], capture_output=True,
                           text=True, env=self.env, timeout=60)
        if p.returncode != 0:
            raise RuntimeError(f"dltune model list exited {p.returncode}: {p.stderr.strip()}")
        return {m["name"]: m["parameters"] for m in json.loads(p.stdout)}


# ---- PyTorch twins

def torch_model(name, sdpa=False):
    """The PyTorch twin of dltune's built-in `name`: (module, sample shape, classes)."""
    import torch.nn as nn
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                             nn.ReLU(), nn.Linear(256, 10)), (1, 28, 28), 10
    if name == "lenet":
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5),
                             nn.MaxPool2d(2, 2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                             nn.Linear(500, 10)), (1, 28, 28), 10
    if name == "alexnet":
        lrn = lambda: nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)  # noqa: E731
        return nn.Sequential(
            nn.Conv2d(3, 96, 11, 4), nn.ReLU(), lrn(), nn.MaxPool2d(3, 2),
            nn.Conv2d(96, 256, 5, 1, 2, groups=2), nn.ReLU(), lrn(), nn.MaxPool2d(3, 2),
            nn.Conv2d(256, 384, 3, 1, 1), nn.ReLU(), nn.Conv2d(384, 384, 3, 1, 1, groups=2),
            nn.ReLU(), nn.Conv2d(384, 256, 3, 1, 1, groups=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Flatten(), nn.Linear(9216, 4096), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(4096, 1000)), (3, 227, 227), 1000
    if name == "resnet50":
        return resnet50(), (3, 224, 224), 1000
    if name == "gpt2-small":
        return gpt(sdpa), (1024,), 50257
    raise ValueError(name)


def resnet50():
    """torchvision's ResNet-50 (v1.5, the stride in the 3x3 convolution), or the same network
    defined here with torchvision's parameter names when torchvision does not import."""
    try:
        import torchvision
        return torchvision.models.resnet50(num_classes=1000)
    except ImportError:
        pass
    import torch.nn as nn

    class Bottleneck(nn.Module):
        def __init__(self, inp, planes, stride):
            super().__init__()
            out = planes * 4
            self.conv1 = nn.Conv2d(inp, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or inp != out:
                self.downsample = nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False),
                                                nn.BatchNorm2d(out))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + (x if self.downsample is None else self.downsample(x)))

    class ResNet50(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            inp = 64
            for i, (planes, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
                layer = []
                for b in range(blocks):
                    layer.append(Bottleneck(inp, planes, 2 if b == 0 and i > 0 else 1))
                    inp = planes * 4
                setattr(self, f"layer{i + 1}", nn.Sequential(*layer))
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(2048, 1000)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.avgpool(x).flatten(1))

    return ResNet50()


def gpt(sdpa):
    """GPT-2 small as dltune's gpt2-small (torch_nets.Gpt: pre-norm blocks, GELU tanh, tied
    head). Its attention is torch_nets.causal_attention's math with the mask on the GPU
    (scores, masked softmax, weighted sum: what dltune computes), or with `sdpa` PyTorch's fused
    scaled_dot_product_attention. run_torch() restores torch_nets afterwards."""
    import math

    import torch
    import torch.nn.functional as F
    import torch_nets
    masks = {}

    def heads_of(x, heads):
        B, T, C3 = x.shape
        return [t.view(B, T, heads, C3 // 3 // heads).transpose(1, 2)
                for t in x.split(C3 // 3, dim=2)]

    def plain(x, heads):
        B, T, C3 = x.shape
        q, k, v = heads_of(x, heads)
        key = (T, x.device)
        if key not in masks:
            masks[key] = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~masks[key], float("-inf")).softmax(dim=-1)
        return (att @ v).transpose(1, 2).contiguous().view(B, T, C3 // 3)

    def fused(x, heads):
        B, T, C3 = x.shape
        q, k, v = heads_of(x, heads)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).contiguous().view(B, T, C3 // 3)

    torch_nets.causal_attention = fused if sdpa else plain
    return torch_nets.Gpt(vocab=50257, context=1024, C=768, blocks=12, heads=12)


def run_torch(model, batch, steps, sdpa=False):
    import torch
    import torch_nets
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    plain_attention = torch_nets.causal_attention
    try:
        net, shape, classes = torch_model(model, sdpa)
        net = net.cuda()
        loss_fn = torch.nn.CrossEntropyLoss()
        text = len(shape) == 1
        if text:
            opt = torch.optim.AdamW(net.parameters(), lr=1e-4, weight_decay=0.1)
            pool = torch.randint(0, classes, (2 * batch, *shape)).pin_memory()
            labels = torch.randint(0, classes, (2 * batch, *shape)).pin_memory()
        else:
            opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
            pool = torch.randn(2 * batch, *shape).pin_memory()
            labels = torch.randint(0, classes, (2 * batch,)).pin_memory()
        warm = 3
        for i in range(warm + steps):
            if i == warm:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            j = (i % 2) * batch
            x = pool[j:j + batch].cuda(non_blocking=True)
            y = labels[j:j + batch].cuda(non_blocking=True)
            opt.zero_grad(set_to_none=True)
            out = net(x)
            loss = loss_fn(out.reshape(-1, classes), y.reshape(-1)) if text else loss_fn(out, y)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        sps = steps * batch / (time.perf_counter() - t0)
        del net, opt, pool, labels
        torch.cuda.empty_cache()
        return sps
    finally:
        torch_nets.causal_attention = plain_attention


# ---- the run

class Results:
    def __init__(self, path):
        self.path = path
        self.cases = []

    def add(self, record):
        self.cases.append(record)
        if self.path:
            with open(self.path, "w") as f:
                json.dump({"cases": self.cases}, f, indent=1)


def have_gpu():
    try:
        import torch
    except ImportError as e:
        return False, f"PyTorch does not import ({e})"
    if not torch.cuda.is_available():
        return False, "torch.cuda.is_available() is false (no GPU or no driver)"
    return True, torch.cuda.get_device_name(0)


def check_case(dl, model, batch, extra, device):
    """One step of a case's configuration through the worker: None when the worker accepted
    it (it trained, or, for device gpu on a machine without one, it stopped at the device with
    the reason), else what it said."""
    try:
        s = dl.train(model, batch, 1, extra, device, timeout=300)
    except subprocess.TimeoutExpired:
        return "timed out"
    except RuntimeError as e:
        if device == "gpu" and "device 'gpu': " in str(e):
            return None
        return str(e)
    loss = s.get("final_loss")
    if not isinstance(loss, (int, float)) or loss != loss or loss <= 0:
        return f"final_loss {loss!r}"
    return None


def dry_run(dl):
    """Everything but the GPU: every case's configuration through the worker (the GPU cases
    reach the device check, the quick loss cases train a step on the CPU), and the twins'
    parameter counts against dltune's built-ins."""
    ok = True
    cases = [(f"speed {label}", model, batch, extra, "gpu")
             for label, model, batch, _, extra in SPEED]
    cases += [(f"loss {model}", model, batch, extra, "gpu")
              for model, batch, _, extra in LOSS_FIRST + LOSS_LAST]
    cases += [(f"loss {model} (cpu)", model, batch, extra, "cpu")
              for model, batch, _, extra in LOSS_FIRST]
    for what, model, batch, extra, device in cases:
        why = check_case(dl, model, batch, extra, device)
        ok = ok and why is None
        log(f"bench_gpu: dry run: {what}: " +
            ("the worker accepts it" if why is None else f"REJECTED: {why}"))
    try:
        import torch
    except ImportError as e:
        log(f"bench_gpu: dry run: PyTorch does not import ({e}); twins not checked")
        return 0 if ok else 1
    log(f"bench_gpu: dry run: PyTorch {torch.__version__} from {os.path.dirname(torch.__file__)}")
    counts = dl.builtin_parameters()
    for name in ("mlp", "lenet", "alexnet", "resnet50", "gpt2-small"):
        net = torch_model(name)[0]
        n = sum(p.numel() for p in net.parameters())
        same = n == counts.get(name)
        ok = ok and same
        log(f"bench_gpu: dry run: twin {name}: {n} parameters, dltune {counts.get(name)}: "
            f"{'same' if same else 'DIFFERENT'}")
        del net
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.environ.get("DLTUNE_BINARY_DIR", "build"),
                                                  "bin"))
    ap.add_argument("--worker-env", default="")
    ap.add_argument("--budget", type=float, default=1e9)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default="")
    ap.add_argument("--only", default="")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    t_start = time.monotonic()
    left = lambda: args.budget - (time.monotonic() - t_start)  # noqa: E731
    work = tempfile.mkdtemp(prefix="bench-gpu-")
    atexit.register(shutil.rmtree, work, True)
    dl = Dltune(args.bin, args.worker_env, work)
    if not os.access(dl.worker, os.X_OK):
        log(f"bench_gpu: {dl.worker} not found; build dltune with CUDA first")
        return 2
    if args.dry_run:
        return dry_run(dl)
    ok, what = have_gpu()
    if not ok:
        log(f"bench_gpu: skipped: {what}")
        return 0
    only = set(args.only.split(",")) if args.only else None
    results = Results(args.out)
    log(f"GPU: {what}")
    matches = []

    def loss_cases(cases):
        for model, batch, steps, extra in cases:
            if only and model not in only:
                continue
            if left() < 20:
                log(f"loss {model}: skipped: {left():.0f} s of the budget left")
                matches.append(False)
                continue
            rec = {"case": "loss_" + model, "model": model, "batch": batch, "steps": steps}
            try:
                g = dl.train(model, batch, steps, extra, "gpu", timeout=max(10, left() - 5))
                c = dl.train(model, batch, steps, extra, "cpu", timeout=max(10, left() - 5))
                g, c = g["final_loss"], c["final_loss"]
                same = abs(g - c) <= 1e-3 * max(1.0, abs(c))
                rec.update(gpu_loss=g, cpu_loss=c, match=same)
                log(f"loss after {steps} steps, {model}: gpu {g:.6f} cpu {c:.6f} "
                    f"{'match' if same else 'DIFFER'}")
            except Exception as e:  # noqa: BLE001 (report it and go on with the next case)
                same = False
                rec["error"] = str(e)
                log(f"loss {model}: FAILED: {e}")
            matches.append(same)
            results.add(rec)

    loss_cases(LOSS_FIRST)
    log(f"{'case':12} {'dltune sps':>12} {'torch sps':>12} {'ratio':>7} {'goal':>5}")
    ratios = {}
    for label, model, batch, steps, extra in SPEED:
        if only and label not in only:
            continue
        if left() < 30:
            log(f"{label:12} skipped: {left():.0f} s of the budget left")
            continue
        ours, theirs, err, summary = [], [], "", {}
        try:
            for _ in range(args.repeats):  # interleaved
                summary = dl.train(model, batch, steps, extra, "gpu", timeout=max(10, left() - 5))
                ours.append(summary["throughput_sps"])
                theirs.append(run_torch(model, batch, max(5, steps // 2)))
        except Exception as e:  # noqa: BLE001
            err = str(e)
        rec = {"case": label, "model": model, "batch": batch, "goal": GOALS[label]}
        if ours and theirs:
            a, b = statistics.median(ours), statistics.median(theirs)
            ratios[label] = a / b
            # The worker's own split (compute / communication seconds, steps timed) too: where
            # a ratio falls short, it says whether the GPU or the host side is slow.
            rec.update(dltune_sps=a, torch_sps=b, ratio=a / b, dltune_summary=summary)
            log(f"{label:12} {a:12.1f} {b:12.1f} {a / b:7.2f} {GOALS[label]:5.1f}")
            if model == "gpt2-small" and left() > 30:
                try:
                    f = run_torch(model, batch, max(5, steps // 2), sdpa=True)
                    rec["torch_sdpa_sps"] = f
                    log(f"{'  torch sdpa':12} {'':12} {f:12.1f} {a / f:7.2f}")
                except Exception as e:  # noqa: BLE001
                    log(f"  torch sdpa failed: {e}")
        else:
            rec["error"] = err
            log(f"{label:12} FAILED: {err}")
        results.add(rec)
    loss_cases(LOSS_LAST)
    match = bool(matches) and all(matches)
    fmt = lambda k: f"{ratios[k]:.2f}" if k in ratios else "-"  # noqa: E731
    log("summary: " + " ".join(f"{k}_vs_torch={fmt(k)}" for k in GOALS) +
        f" loss_match={'yes' if match else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
