"""PyTorch definitions of the networks dltune's built-ins are checked and benchmarked against,
written from their papers (He et al. 2016's CIFAR ResNets with option A shortcuts; GPT-2's
blocks as in nanoGPT), independently of dltune's graph builders. Parameter names match dltune's
(the contract: weights move between the two by name). Used by gen_torch_refs.py and
bench/engine/torch_models.py."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_attention(x, heads):
    # nanoGPT's CausalSelfAttention without the projections: x (B, T, 3C) of q, k, v.
    B, T, C3 = x.shape
    Cw = C3 // 3
    q, k, v = x.split(Cw, dim=2)
    q = q.view(B, T, heads, Cw // heads).transpose(1, 2)
    k = k.view(B, T, heads, Cw // heads).transpose(1, 2)
    v = v.view(B, T, heads, Cw // heads).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return (att @ v).transpose(1, 2).contiguous().view(B, T, Cw)


class CifarBlock(nn.Module):
    def __init__(self, inp, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.pad = (planes - inp) // 2 if (stride != 1 or inp != planes) else None

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        sc = x if self.pad is None else F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))
        return F.relu(out + sc)


class CifarResNet(nn.Module):  # He et al. 2016, section 4.2, option A shortcuts
    def __init__(self, depth, classes=10):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        inp = 16
        for stage, planes in enumerate([16, 32, 64]):
            blocks = []
            for i in range(n):
                blocks.append(CifarBlock(inp, planes, 2 if (i == 0 and stage > 0) else 1))
                inp = planes
            setattr(self, "layer%d" % (stage + 1), nn.Sequential(*blocks))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


class Block(nn.Module):  # GPT-2 / nanoGPT
    def __init__(self, C, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(C)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(C, 3 * C)
        self.attn.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(C, 4 * C)
        self.mlp.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        x = x + self.attn.c_proj(causal_attention(self.attn.c_attn(self.ln_1(x)), self.heads))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, context, C, blocks, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, C)
        self.wpe = nn.Embedding(context, C)
        self.h = nn.ModuleList([Block(C, heads) for _ in range(blocks)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe.weight[:T]
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))
