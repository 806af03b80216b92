"""ONNX Runtime's own time for one convolution, as `conv_rate` measures Spillway's: GFLOP/s
of the convolution alone, between neighbours that keep ORT's blocked (NCHWc) layout.

The model is Conv 1x1 (C <- C) + Relu, then the measured Conv (M <- C, K x K, stride S,
padding K // 2) + Relu, then Relu: ORT's graph optimizer fuses each Conv with its Relu and
runs both on its NCHWc kernels, so the measured node reads a blocked image and writes a
blocked output, as Spillway's blocked convolutions do in a model. The time is the median of
ORT's profiler entries for that node (its kernel alone, no Python call).

Usage (from the repository root), the arguments as `conv_rate`'s:
    .venv/bin/python benches/ort_conv_rate.py M C K SIDE [STRIDE]
Environment: T=N intra-op threads (default 1); COLD=1 writes 64 MiB before each run, so that
the measured node's weights come from memory (its image, the previous node's output, stays
warm), as `conv_rate`'s `COLD=1 WARM_INPUT=1`.
"""

import json
import os
import sys
import tempfile

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

# Runs before timing, and timed runs (fewer with COLD=1, each of which writes 64 MiB first).
WARMUP = 10
RUNS = {False: 200, True: 60}


def main():
    args = [int(a) for a in sys.argv[1:]]
    if len(args) not in (4, 5):
        sys.exit(__doc__)
    m, c, k, side = args[:4]
    stride = args[4] if len(args) == 5 else 1
    threads = int(os.environ.get("T", "1"))
    cold = os.environ.get("COLD") == "1"
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((c, c, 1, 1)).astype(np.float32) * 0.05, "w0"),
        numpy_helper.from_array(rng.standard_normal((m, c, k, k)).astype(np.float32) * 0.05, "w"),
        numpy_helper.from_array(np.zeros(m, np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["h"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["h"], ["h_relu"]),
        helper.make_node("Conv", ["h_relu", "w", "b"], ["y_conv"], kernel_shape=[k, k],
                         pads=[k // 2] * 4, strides=[stride] * 2),
        helper.make_node("Relu", ["y_conv"], ["y_relu"]),
        helper.make_node("Relu", ["y_relu"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, side, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "profile")
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    x = rng.random((1, c, side, side), dtype=np.float32)
    flush = np.zeros(16 << 20, np.float32) if cold else None
    for _ in range(WARMUP + RUNS[cold]):
        if cold:
            flush += 1.0
        session.run(None, {"x": x})
    with open(session.end_profiling()) as f:
        events = json.load(f)

    # The fused node of the measured Conv is named after the Relu output it produces.
    times = [e["dur"] for e in events
             if e.get("cat") == "Node" and e["name"] == "y_relu_nchwc_kernel_time"]
    if len(times) <= WARMUP:
        sys.exit("ort_conv_rate: the measured node was not found in ORT's profile "
                 "(did its optimizer keep the NCHWc convolution?)")
    median_us = float(np.median(times[WARMUP:]))
    out = (side + 2 * (k // 2) - k) // stride + 1
    flops = 2 * m * c * k * k * out * out
    print(f"ort m {m} k {c * k * k} n {out * out}: {median_us:8.1f} us, "
          f"{flops / median_us / 1e3:7.1f} GFLOP/s")


if __name__ == "__main__":
    main()
