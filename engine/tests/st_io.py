"""Minimal safetensors reading and writing for the reference scripts (the format: an 8-byte
little-endian header length, a JSON header of dtype / shape / data_offsets, raw little-endian
data). Debian has no python3-safetensors; the format is small enough to write out here."""
import json
import struct

import torch


def write(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        if t.dtype in (torch.int64, torch.long):
            data, dtype = t.numpy().astype("<i8").tobytes(), "I64"
        else:
            data, dtype = t.float().numpy().astype("<f4").tobytes(), "F32"
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read(path):
    """{name: float32 tensor}; the metadata is ignored."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        assert t["dtype"] == "F32", t["dtype"]
        out[name] = torch.frombuffer(bytearray(body[b:e]), dtype=torch.float32).reshape(t["shape"])
    return out
