#!/usr/bin/python3
"""Generates engine/tests/data/torch_refs.json: forward and backward of each layer kind computed
by PyTorch (Debian's python3-torch 1.13, CPU, float64 then rounded to float32), the independent
implementation the engine's layers are compared with (engine/tests/torch_ref_test.cc).

Run with Debian's system interpreter (the pyenv one first on PATH has no torch):
    /usr/bin/python3 engine/tests/gen_torch_refs.py
Each case stores its inputs (x, params, dout) so the C++ test needs no RNG agreement.
Parameter layout matches the engine: weight (PyTorch's layout) then bias, flattened."""
import json
import os

import torch
import torch.nn.functional as F

torch.manual_seed(1234)
cases = []


def flat(t):
    return [float("%.9g" % v) for v in t.detach().reshape(-1).tolist()]


def add(name, spec, in_dims, batch, fn, params=()):
    x = torch.randn(batch, *in_dims, dtype=torch.float64, requires_grad=True)
    ps = [p.detach().clone().double().requires_grad_(True) for p in params]
    y = fn(x, *ps)
    dout = torch.randn_like(y)
    y.backward(dout)
    cases.append({
        "name": name, "spec": spec, "in_dims": list(in_dims), "batch": batch,
        "x": flat(x), "params": flat(torch.cat([p.reshape(-1) for p in ps])) if ps else [],
        "dout": flat(dout), "y": flat(y), "dx": flat(x.grad),
        "dparams": flat(torch.cat([p.grad.reshape(-1) for p in ps])) if ps else [],
    })


def conv(name, cin, cout, k, stride, pad, groups, hw):
    w = torch.randn(cout, cin // groups, k, k) * 0.3
    b = torch.randn(cout) * 0.1
    add(name, {"kind": "conv2d", "out": cout, "kernel": k, "stride": stride, "pad": pad,
               "groups": groups}, (cin, hw[0], hw[1]), 2,
        lambda x, w_, b_: F.conv2d(x, w_, b_, stride=stride, padding=pad, groups=groups), (w, b))


add("linear", {"kind": "linear", "out": 7}, (3, 2, 2), 3,
    lambda x, w, b: F.linear(x.reshape(x.shape[0], -1), w, b),
    (torch.randn(7, 12) * 0.3, torch.randn(7) * 0.1))
conv("conv", 3, 4, 3, 1, 0, 1, (6, 5))
conv("conv_stride_pad", 2, 3, 3, 2, 1, 1, (7, 6))
conv("conv_groups", 4, 6, 3, 1, 1, 2, (5, 5))
conv("conv_alexnet_like", 3, 4, 5, 3, 2, 1, (11, 11))
add("maxpool", {"kind": "maxpool", "kernel": 3, "stride": 2}, (2, 7, 7), 2,
    lambda x: F.max_pool2d(x, 3, 2))
add("avgpool", {"kind": "avgpool", "kernel": 2, "stride": 2}, (3, 6, 6), 2,
    lambda x: F.avg_pool2d(x, 2, 2))
add("relu", {"kind": "relu"}, (3, 4, 4), 2, lambda x: F.relu(x))
add("lrn", {"kind": "lrn", "size": 5, "alpha": 0.5, "beta": 0.75, "k": 1.0}, (7, 3, 3), 2,
    lambda x: F.local_response_norm(x, 5, alpha=0.5, beta=0.75, k=1.0))
add("lrn_alexnet", {"kind": "lrn", "size": 5, "alpha": 1e-4, "beta": 0.75, "k": 1.0}, (6, 3, 3),
    2, lambda x: F.local_response_norm(x * 10, 5, alpha=1e-4, beta=0.75, k=1.0) / 10)
# The alexnet LRN case feeds x*10 (typical activation scale); undo the scaling in the test.
cases[-1]["input_scale"] = 10.0

# Softmax cross-entropy (mean over the batch).
z = torch.randn(4, 10, dtype=torch.float64, requires_grad=True) * 3
z.retain_grad()
labels = torch.tensor([3, 0, 9, 5])
loss = F.cross_entropy(z, labels)
loss.backward()
loss_case = {"logits": flat(z), "labels": labels.tolist(), "loss": float(loss),
             "dlogits": flat(z.grad)}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "torch_refs.json")
with open(out, "w") as f:
    json.dump({"generator": "torch " + torch.__version__, "layers": cases,
               "softmax_cross_entropy": loss_case}, f)
print("wrote", out, os.path.getsize(out), "bytes")
