#!/usr/bin/python3
"""Writes the image fixtures dltune's imagefolder decoding and transforms are checked against
(engine/tests/image_test.cc), computed by Debian's python3-pil 9.4 and python3-torchvision 0.14:

  data/images/NAME.{jpg,png}   small images of every kind ImageFolder meets: baseline JPEG at
                               4:4:4 and 4:2:0, progressive, grayscale and CMYK JPEG; RGB, RGBA,
                               grayscale and palette PNG (odd sizes, smooth gradients plus noise)
  data/images/NAME.rgb         PIL's decode, Image.open(f).convert("RGB"): (H, W, 3) bytes
  data/images/NAME.half.rgb    JPEG only: PIL's decode with draft() at half size, i.e. libjpeg's
                               DCT scaling by 1/2 (what dltune's scaled decoding uses)
  data/images/NAME.eval.f32    torchvision's evaluation transform of the image: Resize(18),
                               CenterCrop(16), ToTensor, Normalize(ImageNet mean, std): (3, 16, 16)
                               float32, little-endian
  data/images/NAME.crop.f32    torchvision's training transform for a fixed crop box and a flip:
                               F.resized_crop(img, top, left, h, w, [16, 16]), hflip, ToTensor,
                               Normalize: (3, 16, 16) float32
  data/images/manifest.json    per image: file, width, height, the half-size decode's size, the
                               crop box [top, left, height, width]
  data/images/crop_stats.json  RandomResizedCrop(scale=(0.08, 1), ratio=(3/4, 4/3)).get_params
                               over 20000 draws per image size: the mean area share, the mean
                               aspect ratio w / h, the share of centred fallback boxes

Run with Debian's system interpreter (a pyenv one first on PATH may lack PIL / torchvision):
    /usr/bin/python3 engine/tests/gen_image_fixtures.py
"""
import json
import os

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "images")
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
rng = np.random.default_rng(42)


def picture(w, h):
    """Smooth colour gradients with a noisy block and a sharp edge: something to resample."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 255 * x / max(w - 1, 1)
    g = 255 * y / max(h - 1, 1)
    b = 127 + 120 * np.sin(x / 3.0) * np.cos(y / 4.0)
    img = np.stack([r, g, b], axis=-1)
    img[h // 4: h // 2, w // 3: 2 * w // 3] = rng.integers(0, 256, (h // 2 - h // 4, 2 * w // 3 - w // 3, 3))
    img[:, w - w // 5:] = [250, 20, 200]
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def save_cases():
    cases = []

    def add(name, img, **save):
        path = os.path.join(HERE, name)
        img.save(path, **save)
        cases.append(name)

    add("rgb444.jpg", picture(61, 47), quality=90, subsampling=0)
    add("rgb420.jpg", picture(80, 53), quality=85, subsampling=2)
    add("progressive.jpg", picture(50, 38), quality=90, progressive=True)
    add("gray.jpg", picture(33, 40).convert("L"), quality=90)
    add("cmyk.jpg", picture(45, 30).convert("CMYK"), quality=95)
    add("rgb.png", picture(37, 29))
    rgba = picture(30, 31).convert("RGBA")
    rgba.putalpha(Image.fromarray(rng.integers(0, 256, (31, 30)).astype(np.uint8), "L"))
    add("rgba.png", rgba)
    add("luma.png", picture(26, 22).convert("L"))
    add("palette.png", picture(40, 24).quantize(colors=16))
    return cases


def f32(t, path):
    t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tofile(path)


def crop_stats():
    """The distribution of torchvision's random crop boxes, for sizes from square to extreme."""
    torch.manual_seed(0)
    out = []
    for w, h in [(500, 375), (375, 500), (64, 64), (333, 2000), (2000, 100), (7, 3)]:
        img = Image.new("RGB", (w, h))
        n, share, ratio, centred = 20000, 0.0, 0.0, 0
        for _ in range(n):
            i, j, bh, bw = T.RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3))
            share += bw * bh / (w * h)
            ratio += bw / bh
            centred += i == (h - bh) // 2 and j == (w - bw) // 2
        out.append({"width": w, "height": h, "mean_share": share / n, "mean_ratio": ratio / n,
                    "centred": centred / n})
    return out


def main():
    os.makedirs(HERE, exist_ok=True)
    with open(os.path.join(HERE, "crop_stats.json"), "w") as f:
        json.dump(crop_stats(), f, indent=1)
        f.write("\n")
    normalize = T.Normalize(MEAN, STD)
    evaluation = T.Compose([T.Resize(18), T.CenterCrop(16), T.ToTensor(), normalize])
    manifest = []
    for name in save_cases():
        path = os.path.join(HERE, name)
        base = os.path.join(HERE, os.path.splitext(name)[0])
        img = Image.open(path).convert("RGB")
        np.asarray(img).tofile(base + ".rgb")
        w, h = img.size
        entry = {"file": name, "width": w, "height": h}
        if name.endswith(".jpg"):
            half = Image.open(path)
            half.draft("RGB", (w // 2, h // 2))
            half = half.convert("RGB")
            np.asarray(half).tofile(base + ".half.rgb")
            entry["half"] = list(half.size)
        f32(evaluation(img), base + ".eval.f32")
        # A crop box as RandomResizedCrop draws them: about half the area, off-centre.
        bw, bh = max(1, int(w * 0.6)), max(1, int(h * 0.7))
        top, left = (h - bh) // 3, (w - bw) // 2
        crop = F.hflip(F.resized_crop(img, top, left, bh, bw, [16, 16]))
        f32(normalize(F.to_tensor(crop)), base + ".crop.f32")
        entry["box"] = [top, left, bh, bw]
        manifest.append(entry)
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
