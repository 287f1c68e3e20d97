#!/usr/bin/python3
"""A training run's TensorBoard event files, decoded independently of dltune: the TFRecord
framing with a CRC-32C written here from its definition (checked against its published test
vector first), the Event / Summary protobufs with python3-protobuf from their published field
numbers (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto) declared
through the descriptor API, and every scalar against metrics.jsonl.

usage: tensorboard_test.py DLTUNE_WORKER
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError:
    print("SKIP: python3-protobuf is not installed (apt-get install python3-protobuf)")
    sys.exit(77)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class():
    """Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
    Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; }"""
    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="dltune_event_test.proto", package="tbtest",
                                            syntax="proto3")

    def message(name, fields):
        m = fd.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message("Value", [("tag", 1, F.TYPE_STRING, opt, None),
                      ("simple_value", 2, F.TYPE_FLOAT, opt, None)])
    message("Summary", [("value", 1, F.TYPE_MESSAGE, rep, ".tbtest.Value")])
    message("Event", [("wall_time", 1, F.TYPE_DOUBLE, opt, None),
                      ("step", 2, F.TYPE_INT64, opt, None),
                      ("file_version", 3, F.TYPE_STRING, opt, None),
                      ("summary", 5, F.TYPE_MESSAGE, opt, ".tbtest.Summary")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    desc = pool.FindMessageTypeByName("tbtest.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def records(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        assert len(data) - at >= 12, "a truncated record header"
        (length,) = struct.unpack_from("<Q", data, at)
        (len_crc,) = struct.unpack_from("<I", data, at + 8)
        assert len_crc == masked(crc32c(data[at:at + 8])), "length CRC mismatch at %d" % at
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        assert body_crc == masked(crc32c(body)), "data CRC mismatch at %d" % at
        yield body
        at += 12 + length + 4


def main():
    worker = sys.argv[1]
    assert crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C
    Event = event_class()
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run")
        os.makedirs(run)
        # 512 samples to train on, 128 held out: 16 steps an epoch, evaluated after each.
        recipe = ("model: lenet5\ndata: {kind: synthetic-digits, samples: 640, heldout: 0.2}\n"
                  "training: {steps: 24, batch: {global: 32}, scaling: strong,\n"
                  "           optimizer: {kind: sgd, lr: 0.05}, seed: 3}\n")
        with open(os.path.join(tmp, "recipe.yaml"), "w") as f:
            f.write(recipe)
        config = {"metrics_path": os.path.join(run, "metrics.jsonl")}
        out = subprocess.run([worker, "train", "--recipe", os.path.join(tmp, "recipe.yaml"),
                              "--metrics", config["metrics_path"]],
                             capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stderr + out.stdout
        files = glob.glob(os.path.join(run, "tb", "events.out.tfevents.*"))
        assert len(files) == 1, files
        events = []
        for body in records(files[0]):
            e = Event()
            e.ParseFromString(body)
            events.append(e)
        assert events[0].file_version == "brain.Event:2", events[0]
        assert all(e.wall_time > 1.6e9 for e in events), "wall times are not Unix seconds"
        lines = [json.loads(l) for l in open(config["metrics_path"])]
        logged = [l for l in lines if l["event"] in ("step", "eval")]
        scalars = events[1:]
        assert len(scalars) == len(logged), (len(scalars), len(logged))
        names = {"step": {"train/loss": "loss", "train/learning_rate": "lr",
                          "train/samples_per_s": "samples_per_s", "step_time/total_s": "step_s",
                          "step_time/compute_s": "compute_s",
                          "step_time/exposed_comm_s": "comm_s",
                          "step_time/data_wait_s": "data_s"},
                 "eval": {"heldout/accuracy": "heldout_accuracy", "heldout/loss": "heldout_loss"}}
        for e, l in zip(scalars, logged):
            assert e.step == l["step"], (e.step, l)
            values = {v.tag: v.simple_value for v in e.summary.value}
            want = names[l["event"]]
            assert set(values) == set(want), (values, want)
            for tag, key in want.items():
                # simple_value is a float32: equal to the JSON double rounded to float32.
                expect = struct.unpack("<f", struct.pack("<f", l[key]))[0]
                assert values[tag] == expect, (tag, values[tag], l[key])
        losses = [l["loss"] for l in logged if l["event"] == "step"]
        assert len(losses) == 24, losses
        evals = [e for e in scalars if any(v.tag == "heldout/accuracy" for v in e.summary.value)]
        assert [e.step for e in evals] == [16, 24], [e.step for e in evals]  # an epoch, the end
        print("ok: %d events (%d steps, %d evaluations), CRCs and values as metrics.jsonl"
              % (len(events), len(losses), len(evals)))


if __name__ == "__main__":
    main()
