"""PyTorch twins of dltune's built-in models, by the name a recipe uses (`model: NAME`).

bench/engine measures each case of its CASES list (model name, per-rank batch) on both sides;
adding a model to the benchmark is its entry here plus one line in CASES. The twins follow the
built-ins as recipes/README.md describes them (same layers, shapes and parameter counts)."""
import os
import sys

import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "engine",
                                "tests"))
from torch_nets import CifarResNet, Gpt  # noqa: E402


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                         nn.ReLU(), nn.Linear(256, 10))


def lenet5():
    # recipes/README.md: LeNet-5 with ReLU (conv 6 5x5 pad 2, avgpool 2, conv 16 5x5, avgpool 2,
    # linear 120, 84).
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.AvgPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def lenet():
    # Caffe's MNIST LeNet: conv 20 5x5, maxpool 2, conv 50 5x5, maxpool 2, linear 500, relu.
    return nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                         nn.Linear(500, 10))


def resnet20():
    return CifarResNet(20)


def resnet18():
    # torchvision's, for 10 classes (bench/engine runs it on 3x64x64 images).
    return torchvision.models.resnet18(num_classes=10)


def gpt_tiny():
    # dltune's gpt-tiny defaults: 4 blocks of width 128, 4 heads, context 128, bytes.
    return Gpt(vocab=256, context=128, C=128, blocks=4, heads=4)


# name -> (constructor, per-sample input shape). A 1-D shape is a sequence of token ids whose
# labels are the next token at every position (a language model; bench/engine trains it with
# AdamW on both sides).
MODELS = {
    "mlp": (mlp, (1, 28, 28)),
    "lenet5": (lenet5, (1, 28, 28)),
    "lenet": (lenet, (1, 28, 28)),
    "resnet20": (resnet20, (3, 32, 32)),
    "resnet18": (resnet18, (3, 64, 64)),
    "gpt-tiny": (gpt_tiny, (128,)),
}
