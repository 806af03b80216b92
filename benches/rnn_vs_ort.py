"""LSTM, GRU and RNN nodes, Spillway against ONNX Runtime, rounds interleaved.

Builds one-node models with random constant weights (the shapes below: batch 1 and larger
batches, hidden 128 to 512, one and two directions), then times, round by round:
`spillway run MODEL --repeat N` (its printed median, RAYON_NUM_THREADS=THREADS) and ORT's
sequential executor with THREADS intra-op threads in this process (median of N runs). Prints a
Markdown table with the median over rounds of each engine's median and Spillway's time over
ORT's (below 1: Spillway faster).

Usage (from the repository root, after `cargo build --release -p spillway`):
    .venv/bin/python benches/rnn_vs_ort.py --spillway target/release/spillway \
        [--threads 1] [--rounds 3] [--repeat 50]
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}

# (op, seq, batch, input, hidden, direction, extra attributes)
SHAPES = [
    ("LSTM", 100, 1, 128, 256, "forward", {}),
    ("LSTM", 50, 16, 256, 512, "forward", {}),
    ("LSTM", 50, 8, 128, 128, "bidirectional", {}),
    ("GRU", 100, 1, 128, 256, "forward", {}),
    ("GRU", 50, 16, 256, 512, "forward", {"linear_before_reset": 1}),
    ("GRU", 50, 8, 128, 128, "bidirectional", {}),
    ("RNN", 100, 4, 128, 256, "forward", {}),
]


def build(path, op, seq, batch, inp, hidden, direction, extra):
    rng = np.random.default_rng(3)
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    w = (rng.random((dirs, g * hidden, inp), dtype=np.float32) - 0.5) / np.sqrt(inp)
    r = (rng.random((dirs, g * hidden, hidden), dtype=np.float32) - 0.5) / np.sqrt(hidden)
    b = (rng.random((dirs, 2 * g * hidden), dtype=np.float32) - 0.5) * 0.2
    inits = [numpy_helper.from_array(a, n) for a, n in [(w, "W"), (r, "R"), (b, "B")]]
    node = helper.make_node(op, ["x", "W", "R", "B"], ["y", "y_h"], hidden_size=hidden,
                            direction=direction, **extra)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, inp])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["y", "y_h"]]
    m = helper.make_model(helper.make_graph([node], "g", [x], outs, inits),
                          opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.save(m, path)


def time_spillway(binary, path, repeat, threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    out = subprocess.run([binary, "run", path, "--repeat", str(repeat)], env=env,
                         capture_output=True, text=True, check=True)
    return float(re.search(r"median latency: ([0-9.]+) ms", out.stdout + out.stderr).group(1))


def time_ort(path, repeat, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    shape = [d.dim_value for d in onnx.load(path).graph.input[0].type.tensor_type.shape.dim]
    feed = {"x": np.random.default_rng(1).random(shape, dtype=np.float32)}
    s.run(None, feed)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        s.run(None, feed)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spillway", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    print(f"threads {args.threads}, {args.rounds} rounds of {args.repeat} runs, "
          f"onnxruntime {ort.__version__}")
    print("| node | spillway ms | ORT ms | spillway / ORT |\n| --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for op, seq, batch, inp, hidden, direction, extra in SHAPES:
            path = os.path.join(tmp, "m.onnx")
            build(path, op, seq, batch, inp, hidden, direction, extra)
            ours, theirs = [], []
            for _ in range(args.rounds):
                ours.append(time_spillway(args.spillway, path, args.repeat, args.threads))
                theirs.append(time_ort(path, args.repeat, args.threads))
            a, b = statistics.median(ours), statistics.median(theirs)
            label = f"{op} seq {seq} batch {batch} in {inp} hidden {hidden} {direction}"
            label += "".join(f" {k}={v}" for k, v in extra.items())
            print(f"| {label} | {a:.3f} | {b:.3f} | {a / b:.2f} |")


if __name__ == "__main__":
    main()
