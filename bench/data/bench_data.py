#!/usr/bin/python3
"""bench/data: dltune's imagefolder loader against torchvision's DataLoader, interleaved.

    /usr/bin/python3 bench/data/bench_data.py [--build build] [--images 2000] [--threads 2]
                                              [--rounds 3] [--batches 30] [--dir DIR]
                                              [--train-steps 6] [--train-size 224]

The images: --images JPEGs of ImageNet-like sizes (about 500 x 375, between 400 and 600 wide,
landscape and portrait) in 10 class folders under train/ (and a few under val/), generated
with PIL (smooth gradients, shapes and noise, quality 90) into --dir (a temporary folder by
default; an existing folder of that layout is reused).

images_per_s: the same training transform on both sides, RandomResizedCrop(224) (scale 0.08-1,
ratio 3/4-4/3), horizontal flip, to float and ImageNet normalisation, batches of 32, the same
number of workers: dltune's BatchLoader with --threads loader threads (bench-data-loader
throughput), torchvision's DataLoader(ImageFolder(...)) with num_workers = --threads worker
processes (PIL decoding, torch 1 thread each). Rounds alternate which side goes first; the
ratio is the median of the rounds' paired ratios.

loader_stall_fraction: resnet18 training steps (batch 32 of 224 x 224 crops, --threads loader
threads, the BLAS on every core) on the same images: the share of the step time the trainer
waited for its batch; beside it the step time with the loader and with the same data in memory,
so the loader threads' cost on the computation shows too.

Last line: the summary (imagefolder_vs_torchvision: goal >= 1.5; loader_stall_fraction: goal
<= 0.02)."""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
try:
    import torch
    import torchvision.datasets as datasets
    import torchvision.transforms as T
    from PIL import Image, ImageDraw, ImageFilter
except ImportError as e:
    sys.exit(f"bench/data: torchvision and PIL are the peer this benchmark measures against and "
             f"they are not installed ({e}): apt-get install python3-torchvision python3-pil")

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BATCH = 32


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def load():
    return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"


def make_images(root, n, rng):
    if os.path.isdir(os.path.join(root, "train")):
        return
    t0 = time.time()
    for i in range(n):
        part = "val" if i % 20 == 19 else "train"
        cls = f"class{i % 10:02d}"
        os.makedirs(os.path.join(root, part, cls), exist_ok=True)
        w, h = rng.randint(400, 600), rng.randint(300, 450)
        if rng.random() < 0.25:
            w, h = h, w
        img = Image.linear_gradient("L").resize((w, h)).convert("RGB")
        r, g, b = img.split()
        img = Image.merge("RGB", (r, g.rotate(rng.randint(0, 359)).resize((w, h)), b.transpose(Image.FLIP_LEFT_RIGHT)))
        d = ImageDraw.Draw(img)
        for _ in range(8):
            x0, y0 = rng.randint(0, w - 20), rng.randint(0, h - 20)
            d.ellipse([x0, y0, x0 + rng.randint(10, w // 3), y0 + rng.randint(10, h // 3)],
                      fill=tuple(rng.randint(0, 255) for _ in range(3)))
        noise = Image.effect_noise((w, h), 40).convert("RGB")
        img = Image.blend(img, noise, 0.25).filter(ImageFilter.SMOOTH)
        img.save(os.path.join(root, part, cls, f"{i:05d}.jpg"), quality=90)
    print(f"generated {n} JPEGs in {time.time() - t0:.0f} s in {root}")


def torchvision_images_per_s(root, workers, batches):
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize(MEAN, STD)])
    ds = datasets.ImageFolder(os.path.join(root, "train"), transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers,
                                     drop_last=True)
    it = iter(dl)
    for _ in range(2):  # warm-up: the workers start and fill their prefetch
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    return batches * BATCH / (time.perf_counter() - t0)


def dltune_run(build, *args):
    exe = os.path.join(build, "bin", "bench-data-loader")
    p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench/data: bench-data-loader {' '.join(map(str, args))} failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("DLTUNE_BUILD", "build"))
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--dir", default="")
    ap.add_argument("--train-steps", type=int, default=6)
    ap.add_argument("--train-size", type=int, default=224)
    a = ap.parse_args()
    torch.set_num_threads(1)
    root = a.dir or tempfile.mkdtemp(prefix="dltune-bench-data-")
    print(f"CPU: {cpu_name()}; {load()}")
    make_images(root, a.images, random.Random(1))

    ratios, ours, theirs = [], [], []
    print(f"{'round':>5} {'dltune img/s':>13} {'torchvision img/s':>18} {'ratio':>6}  "
          f"({a.threads} loader threads / DataLoader workers, batches of {BATCH})")
    for r in range(a.rounds):
        if r % 2 == 0:
            e = dltune_run(a.build, "throughput", os.path.join(root), a.threads, 224, BATCH,
                           a.batches)["images_per_s"]
            t = torchvision_images_per_s(root, a.threads, a.batches)
        else:
            t = torchvision_images_per_s(root, a.threads, a.batches)
            e = dltune_run(a.build, "throughput", os.path.join(root), a.threads, 224, BATCH,
                           a.batches)["images_per_s"]
        ours.append(e)
        theirs.append(t)
        ratios.append(e / t)
        print(f"{r:>5} {e:>13.0f} {t:>18.0f} {e / t:>6.2f}  ({load()})", flush=True)

    s = dltune_run(a.build, "train", root, a.threads, a.train_size, BATCH, a.train_steps,
                   os.cpu_count())
    print(f"resnet18 step, batch {BATCH} of {a.train_size} x {a.train_size} crops, "
          f"{a.threads} loader threads, BLAS on {os.cpu_count()} cores: {s['step_s']:.2f} s, "
          f"of which waiting for data {1000 * s['data_s']:.1f} ms "
          f"(stall fraction {s['stall_fraction']:.4f}); the same steps on data in memory: "
          f"{s['step_s_in_memory']:.2f} s ({load()})")
    med = statistics.median
    print(f"CPU: {cpu_name()}; after: {load()}")
    print("summary: " + " ".join([f"imagefolder_vs_torchvision={med(ratios):.2f}",
                                  f"dltune_images_per_s={med(ours):.0f}",
                                  f"torchvision_images_per_s={med(theirs):.0f}",
                                  f"loader_stall_fraction={s['stall_fraction']:.4f}"]))


if __name__ == "__main__":
    main()
