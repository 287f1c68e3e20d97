"""PyTorch twins of dltune's built-in models, by the name a recipe uses (`model: NAME`).

bench/engine measures each case of its CASES list (model name, per-rank batch) on both sides;
adding a model to the benchmark is its entry here plus one line in CASES. The twins follow the
built-ins as recipes/README.md describes them (same layers, shapes and parameter counts)."""
import torch.nn as nn


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                         nn.ReLU(), nn.Linear(256, 10))


def lenet5():
    # recipes/README.md: LeNet-5 with ReLU (conv 6 5x5 pad 2, avgpool 2, conv 16 5x5, avgpool 2,
    # linear 120, 84). (The engine's own built-in of that name has max pools; a recipe naming
    # lenet5 runs the recipe's layers, and that is what bench/engine launches.)
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.AvgPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


def lenet():
    # Caffe's MNIST LeNet: conv 20 5x5, maxpool 2, conv 50 5x5, maxpool 2, linear 500, relu.
    return nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2), nn.Conv2d(20, 50, 5),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                         nn.Linear(500, 10))


# name -> (constructor, per-sample input shape)
MODELS = {
    "mlp": (mlp, (1, 28, 28)),
    "lenet5": (lenet5, (1, 28, 28)),
    "lenet": (lenet, (1, 28, 28)),
}
