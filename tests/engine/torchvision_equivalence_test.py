#!/usr/bin/python3
"""dltune's built-in ResNet-18/50, VGG-16 and GoogLeNet against torchvision 0.14 (Debian's
python3-torchvision): with seeded torchvision weights (batch-norm statistics randomised, so
evaluation mode is not the identity there) and a random 2x3x224x224 input, `dltune model
forward` must reproduce torchvision's evaluation-mode logits within 1e-3 relative to the
largest logit. The weights go in as torchvision's state_dict, unchanged, in a safetensors file.

usage: torchvision_equivalence_test.py DLTUNE [MODEL...]
Exits 77 (a skip for ctest) with the reason when torchvision is not installed."""
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torchvision
except ImportError as e:
    print(f"SKIP: python3-torchvision is not installed ({e}); the README's test command "
          "installs it")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "engine", "tests"))
import st_io  # noqa: E402

torch.set_num_threads(1)
DLTUNE = sys.argv[1]
MODELS = sys.argv[2:] or ["resnet18", "resnet50", "vgg16", "googlenet"]


def make(name):
    torch.manual_seed(0)
    if name == "googlenet":
        m = torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)
    else:
        m = getattr(torchvision.models, name)(weights=None)
    for mod in m.modules():  # batch norm in evaluation mode must do something
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.normal_(0, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.normal_(0, 0.1)
            mod.num_batches_tracked.fill_(7)
    return m.eval()


failures = 0
with tempfile.TemporaryDirectory(prefix="dltune-tv-") as tmp:
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    st_io.write(os.path.join(tmp, "x.safetensors"), {"input": x})
    for name in MODELS:
        m = make(name)
        with torch.no_grad():
            want = m(x)
        weights = os.path.join(tmp, name + ".safetensors")
        st_io.write(weights, m.state_dict())
        del m
        out = os.path.join(tmp, name + "-logits.safetensors")
        r = subprocess.run([DLTUNE, "model", "forward", name, "--weights", weights, "--input",
                            os.path.join(tmp, "x.safetensors"), "-o", out],
                           capture_output=True, text=True)
        os.unlink(weights)
        if r.returncode != 0:
            print(f"FAIL {name}: dltune model forward exited {r.returncode}: {r.stderr.strip()}")
            failures += 1
            continue
        got = st_io.read(out)["logits"]
        err = ((got - want).abs().max() / want.abs().max()).item()
        ok = got.shape == want.shape and err < 1e-3
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: logits {tuple(got.shape)}, max |dltune - "
              f"torchvision| / max |logit| = {err:.2e}")
sys.exit(1 if failures else 0)
