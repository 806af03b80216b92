"""Single-operator models, Spillway against ONNX Runtime on one thread (or `--threads N`),
rounds interleaved.

Builds one-node (or node + Relu) models of the shapes where the zoo's CPU profiles showed
Spillway behind ONNX Runtime (depthwise convolutions, strided max pools, 3x3 / 1x7 / 1x1
convolutions), then times, round by round and engine by engine: `spillway run MODEL --repeat N`
(its printed median; with RAYON_NUM_THREADS=1) for each Spillway binary given, and ORT's
sequential executor with one intra-op thread in this process (median of N runs). Writes
NAME.md and NAME.json with the median over rounds of each engine's median and the ratio to ORT.

Both figures include a fixed per-run cost (Spillway: the hand-off of a run to its kernel
pool, ~15-20 us here; ORT: the Python call, ~5-8 us); the `relu` row shows it.

Usage (from the repository root, after `cargo build --release -p spillway`):
    .venv/bin/python benches/single_ops.py --spillway target/release/spillway \
        [--baseline OLD_BINARY] [--rounds 3] [--repeat 200] --out benches/results/NAME
"""

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


# Threads each engine runs with (`--threads`).
THREADS = 1


def model(path, x_shape, nodes, inits):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", [x], [y], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def conv(path, cin, cout, hw, kernel, stride, pad, group=1, relu=True, dilation=1,
         residual=False):
    rng = np.random.default_rng(7)
    kh, kw = kernel
    w = (rng.random((cout, cin // group, kh, kw), dtype=np.float32) - 0.5) * 0.1
    b = rng.random(cout, dtype=np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    attrs = dict(kernel_shape=[kh, kw], pads=[pad[0], pad[1], pad[0], pad[1]],
                 strides=[stride, stride], group=group, dilations=[dilation, dilation])
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if relu else "y"], **attrs)]
    if residual:
        # A residual input the size of the output (as ResNet's bottleneck adds its shortcut).
        oh = (hw + 2 * pad[0] - dilation * (kh - 1) - 1) // stride + 1
        r = rng.random((1, cout, oh, oh), dtype=np.float32)
        inits.append(numpy_helper.from_array(r, "r"))
        nodes[0].output[0] = "s"
        nodes.append(helper.make_node("Add", ["s", "r"], ["c" if relu else "y"]))
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    model(path, [1, cin, hw, hw], nodes, inits)


def max_pool(path, c, hw, k, s, ceil):
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[k, k], strides=[s, s],
                            ceil_mode=ceil)
    model(path, [1, c, hw, hw], [node], [])


def relu(path, c, hw):
    model(path, [1, c, hw, hw], [helper.make_node("Relu", ["x"], ["y"])], [])


def matmul_bias(path, m, k, n, trans_b=False):
    """`x [1, m, k]` times a weight matrix plus a bias (a transformer's projection: MatMul + Add),
    or with `trans_b` a `Gemm` of `x [m, k]` and a `[n, k]` weight (a box head's classifier)."""
    rng = np.random.default_rng(7)
    b = rng.random(n, dtype=np.float32)
    if trans_b:
        w = (rng.random((n, k), dtype=np.float32) - 0.5) * 0.1
        inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
        model(path, [m, k], [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], inits)
        return
    w = (rng.random((k, n), dtype=np.float32) - 0.5) * 0.1
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "b"], ["y"])]
    model(path, [1, m, k], nodes, inits)


CASES = [
    ("relu 156x14x14 (per-run cost)", lambda p: relu(p, 156, 14)),
    ("depthwise 3x3 s1, 156 ch, 14x14", lambda p: conv(p, 156, 156, 14, (3, 3), 1, (1, 1), 156, False)),
    ("depthwise 3x3 s1, 312 ch, 7x7", lambda p: conv(p, 312, 312, 7, (3, 3), 1, (1, 1), 312, False)),
    ("depthwise 3x3 s2, 78 ch, 56x56", lambda p: conv(p, 78, 78, 56, (3, 3), 2, (1, 1), 78, False)),
    ("depthwise 3x3 s1, 78 ch, 28x28", lambda p: conv(p, 78, 78, 28, (3, 3), 1, (1, 1), 78, False)),
    ("maxpool 3x3 s2 ceil, 64 ch, 112x112", lambda p: max_pool(p, 64, 112, 3, 2, 1)),
    ("maxpool 3x3 s2 ceil, 192 ch, 56x56", lambda p: max_pool(p, 192, 56, 3, 2, 1)),
    ("maxpool 3x3 s2 ceil, 480 ch, 28x28", lambda p: max_pool(p, 480, 28, 3, 2, 1)),
    ("maxpool 3x3 s2 ceil, 832 ch, 14x14", lambda p: max_pool(p, 832, 14, 3, 2, 1)),
    ("conv 3x3 96<-96 + relu, 35x35", lambda p: conv(p, 96, 96, 35, (3, 3), 1, (1, 1))),
    ("conv 3x3 96<-64 + relu, 35x35", lambda p: conv(p, 64, 96, 35, (3, 3), 1, (1, 1))),
    ("conv 1x7 160<-160 + relu, 17x17", lambda p: conv(p, 160, 160, 17, (1, 7), 1, (0, 3))),
    ("conv 1x1 192<-768 + relu, 17x17", lambda p: conv(p, 768, 192, 17, (1, 1), 1, (0, 0))),
    ("conv 3x3 192<-80 + relu, 73x73", lambda p: conv(p, 80, 192, 73, (3, 3), 1, (0, 0))),
    ("conv 3x3 s2 64<-3 + relu, 224x224 (squeezenet stem)",
     lambda p: conv(p, 3, 64, 224, (3, 3), 2, (0, 0))),
    ("conv 7x7 s2 64<-3 + relu, 224x224 (resnet stem)",
     lambda p: conv(p, 3, 64, 224, (7, 7), 2, (3, 3))),
    ("conv 3x3 512<-512 + relu, 7x7", lambda p: conv(p, 512, 512, 7, (3, 3), 1, (1, 1))),
    ("conv 1x1 2048<-512 + relu, 7x7", lambda p: conv(p, 512, 2048, 7, (1, 1), 1, (0, 0))),
    ("conv 3x3 208<-96 + relu, 14x14", lambda p: conv(p, 96, 208, 14, (3, 3), 1, (1, 1))),
    ("conv 1x1 160<-512 + relu, 14x14", lambda p: conv(p, 512, 160, 14, (1, 1), 1, (0, 0))),
    ("conv 3x3 384<-192 + relu, 7x7", lambda p: conv(p, 192, 384, 7, (3, 3), 1, (1, 1))),
    ("conv 1x1 384<-832 + relu, 7x7", lambda p: conv(p, 832, 384, 7, (1, 1), 1, (0, 0))),
    ("maxpool 2x2 s2, 64 ch, 300x300 (ssd300)", lambda p: max_pool(p, 64, 300, 2, 2, 0)),
    ("maxpool 2x2 s2 ceil, 256 ch, 75x75 (ssd300)", lambda p: max_pool(p, 256, 75, 2, 2, 1)),
    ("conv 3x3 64<-64 + relu, 300x300 (ssd300)", lambda p: conv(p, 64, 64, 300, (3, 3), 1, (1, 1))),
    ("conv 3x3 256<-256 + relu, 75x75 (ssd300)", lambda p: conv(p, 256, 256, 75, (3, 3), 1, (1, 1))),
    ("conv 3x3 dil 6 1024<-512 + relu, 19x19 (ssd300)",
     lambda p: conv(p, 512, 1024, 19, (3, 3), 1, (6, 6), dilation=6)),
    ("conv 3x3 256<-256 + relu, 100x100 (retinanet head)",
     lambda p: conv(p, 256, 256, 100, (3, 3), 1, (1, 1))),
    ("conv 1x1 256<-64 + relu, 56x56 (resnet50)", lambda p: conv(p, 64, 256, 56, (1, 1), 1, (0, 0))),
    ("conv 1x1 256<-64 + add + relu, 56x56 (resnet50)",
     lambda p: conv(p, 64, 256, 56, (1, 1), 1, (0, 0), residual=True)),
    ("conv 1x1 64<-256 + relu, 56x56 (resnet50)", lambda p: conv(p, 256, 64, 56, (1, 1), 1, (0, 0))),
    ("conv 3x3 64<-64 + relu, 56x56 (resnet50)", lambda p: conv(p, 64, 64, 56, (3, 3), 1, (1, 1))),
    ("conv 3x3 256<-256 + relu, 14x14 (resnet50)",
     lambda p: conv(p, 256, 256, 14, (3, 3), 1, (1, 1))),
    ("conv 3x3 192<-64 + relu, 56x56 (googlenet)",
     lambda p: conv(p, 64, 192, 56, (3, 3), 1, (1, 1))),
    ("conv 3x3 192<-128 + relu, 28x28 (googlenet)",
     lambda p: conv(p, 128, 192, 28, (3, 3), 1, (1, 1))),
    ("conv 3x3 320<-160 + relu, 14x14 (googlenet)",
     lambda p: conv(p, 160, 320, 14, (3, 3), 1, (1, 1))),
    ("conv 1x1 160<-832 + relu, 7x7 (googlenet)",
     lambda p: conv(p, 832, 160, 7, (1, 1), 1, (0, 0))),
    ("conv 1x1 256<-528 + relu, 14x14 (googlenet)",
     lambda p: conv(p, 528, 256, 14, (1, 1), 1, (0, 0))),
    ("conv 1x1 168<-1008, 42x42 (nasnet)",
     lambda p: conv(p, 1008, 168, 42, (1, 1), 1, (0, 0), relu=False)),
    ("conv 1x1 168<-168, 42x42 (nasnet)",
     lambda p: conv(p, 168, 168, 42, (1, 1), 1, (0, 0), relu=False)),
    ("conv 1x1 336<-336, 21x21 (nasnet)",
     lambda p: conv(p, 336, 336, 21, (1, 1), 1, (0, 0), relu=False)),
    ("conv 1x1 672<-4032, 11x11 (nasnet)",
     lambda p: conv(p, 4032, 672, 11, (1, 1), 1, (0, 0), relu=False)),
    ("depthwise 5x5 s1, 168 ch, 42x42 (nasnet)",
     lambda p: conv(p, 168, 168, 42, (5, 5), 1, (2, 2), 168, False)),
    ("depthwise 3x3 s1, 168 ch, 42x42 (nasnet)",
     lambda p: conv(p, 168, 168, 42, (3, 3), 1, (1, 1), 168, False)),
    ("depthwise 3x3 s1, 336 ch, 21x21 (nasnet)",
     lambda p: conv(p, 336, 336, 21, (3, 3), 1, (1, 1), 336, False)),
    ("depthwise 3x3 s1, 672 ch, 11x11 (nasnet)",
     lambda p: conv(p, 672, 672, 11, (3, 3), 1, (1, 1), 672, False)),
    ("depthwise 5x5 s1, 672 ch, 11x11 (nasnet)",
     lambda p: conv(p, 672, 672, 11, (5, 5), 1, (2, 2), 672, False)),
    ("matmul 128x768 . 768x3072 + bias (bert ffn in)", lambda p: matmul_bias(p, 128, 768, 3072)),
    ("matmul 128x3072 . 3072x768 + bias (bert ffn out)", lambda p: matmul_bias(p, 128, 3072, 768)),
    ("matmul 128x768 . 768x768 + bias (bert projection)", lambda p: matmul_bias(p, 128, 768, 768)),
    ("gemm 1000x1024 . 1024x91 transB (frcnn box classes)",
     lambda p: matmul_bias(p, 1000, 1024, 91, trans_b=True)),
    ("gemm 1000x1024 . 1024x364 transB (frcnn box deltas)",
     lambda p: matmul_bias(p, 1000, 1024, 364, trans_b=True)),
    ("gemm 1000x12544 . 12544x1024 transB (frcnn box head fc6)",
     lambda p: matmul_bias(p, 1000, 12544, 1024, trans_b=True)),
]


def time_spillway(binary, path, repeat):
    env = dict(os.environ, RAYON_NUM_THREADS=str(THREADS))
    out = subprocess.run([binary, "run", path, "--repeat", str(repeat)], env=env,
                         capture_output=True, text=True, check=True)
    return float(re.search(r"median latency: ([0-9.]+) ms", out.stdout + out.stderr).group(1))


def time_ort(path, repeat):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    x = np.random.default_rng(1).random(inp.shape, dtype=np.float32)
    sess.run(None, {inp.name: x})
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, {inp.name: x})
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spillway", required=True)
    ap.add_argument("--baseline", help="an older spillway binary, timed alongside")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for both engines (RAYON_NUM_THREADS, intra_op_num_threads)")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--out", required=True, help="output path without extension")
    ap.add_argument("--cases", help="run only the cases whose label contains one of these "
                    "comma-separated words")
    args = ap.parse_args()
    global THREADS
    THREADS = args.threads
    engines = [("spillway", args.spillway)]
    if args.baseline:
        engines.append(("baseline", args.baseline))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, build) in enumerate(CASES):
            if args.cases and not any(w in label for w in args.cases.split(",")):
                continue
            path = os.path.join(tmp, f"case{i}.onnx")
            build(path)
            samples = {name: [] for name, _ in engines}
            samples["ort"] = []
            for _ in range(args.rounds):
                for name, binary in engines:
                    samples[name].append(time_spillway(binary, path, args.repeat))
                samples["ort"].append(time_ort(path, args.repeat))
            med = {k: statistics.median(v) for k, v in samples.items()}
            rows.append({"case": label, "median_ms": med, "samples_ms": samples,
                         "ratio_to_ort": {k: med[k] / med["ort"] for k in med if k != "ort"}})
            print(f"{label}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in med.items()), flush=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    meta = {"machine": f"{cpu} ({os.cpu_count()} logical CPUs)", "threads": THREADS,
            "rounds": args.rounds, "repeat": args.repeat, "onnxruntime": ort.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    with open(args.out + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    names = [n for n, _ in engines]
    head = " | ".join(f"{n} (ms)" for n in names)
    ratios = " | ".join(f"{n} / ORT" for n in names)
    lines = [f"| case | {head} | ORT (ms) | {ratios} |",
             "|---|" + "---|" * (2 * len(names) + 1)]
    for r in rows:
        m = r["median_ms"]
        lines.append(f"| {r['case']} | " + " | ".join(f"{m[n]:.3f}" for n in names)
                     + f" | {m['ort']:.3f} | "
                     + " | ".join(f"{r['ratio_to_ort'][n]:.2f}×" for n in names) + " |")
    with open(args.out + ".md", "w") as f:
        threads = "1 thread" if THREADS == 1 else f"{THREADS} threads"
        f.write(f"# Single operators, Spillway vs ONNX Runtime, {threads}\n\n")
        f.write(f"- Machine: {meta['machine']}; {meta['date']}; ONNX Runtime {ort.__version__}\n")
        f.write(f"- {args.rounds} interleaved rounds of {args.repeat} runs per engine; the "
                "median over rounds of each round's median. Command: `.venv/bin/python "
                "benches/single_ops.py --spillway target/release/spillway"
                + (" --baseline OLD" if args.baseline else "")
                + (f" --threads {THREADS}" if THREADS != 1 else "")
                + (f" --cases {args.cases}" if args.cases else "") + f" --out {args.out}`\n")
        f.write("- Both include a fixed per-run cost (see the relu row).\n\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
