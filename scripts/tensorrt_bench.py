#!/usr/bin/env python3
"""TensorRT beside Spillway and ONNX Runtime: builds a TensorRT engine from an ONNX file and
prints its median latency as one JSON line (for the bench tables).

    python scripts/tensorrt_bench.py MODEL.onnx [--shape NAME=D0xD1x...]... [--runs N] [--fp16]

Where TensorRT is not installed (neither the `tensorrt` Python package nor `trtexec` on PATH),
it prints one line saying so and exits 0, so bench scripts can call it unconditionally.
Written against TensorRT 10's documented Python API (Builder, OnnxParser,
build_serialized_network, execute_async_v3) and trtexec's command line; inputs and outputs
live in PyTorch CUDA tensors.
"""

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys


def parse_shapes(items):
    shapes = {}
    for item in items:
        name, _, dims = item.partition("=")
        if not name or not dims:
            raise SystemExit(f"--shape wants NAME=D0xD1x..., got {item!r}")
        shapes[name] = tuple(int(d) for d in dims.split("x"))
    return shapes


def with_python_api(trt, model, shapes, runs, fp16):
    import numpy as np
    import torch

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    with open(model, "rb") as f:
        if not parser.parse(f.read()):
            errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
            raise SystemExit(f"TensorRT cannot parse {model}: {errors}")
    config = builder.create_builder_config()
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    profile = builder.create_optimization_profile()
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        shape = shapes.get(tensor.name) or tuple(max(d, 1) for d in tensor.shape)
        profile.set_shape(tensor.name, shape, shape, shape)
    config.add_optimization_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise SystemExit(f"TensorRT could not build an engine for {model}")
    engine = trt.Runtime(logger).deserialize_cuda_engine(serialized)
    context = engine.create_execution_context()
    buffers = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            shape = shapes.get(name) or tuple(max(d, 1) for d in engine.get_tensor_shape(name))
            context.set_input_shape(name, shape)
            buffers[name] = torch.rand(shape, device="cuda")
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            shape = tuple(max(d, 1) for d in context.get_tensor_shape(name))
            dtype = torch.from_numpy(np.empty(0, trt.nptype(engine.get_tensor_dtype(name)))).dtype
            buffers[name] = torch.empty(shape, dtype=dtype, device="cuda")
    for name, t in buffers.items():
        context.set_tensor_address(name, t.data_ptr())
    stream = torch.cuda.Stream()
    times = []
    for r in range(runs + 3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        context.execute_async_v3(stream.cuda_stream)
        end.record(stream)
        end.synchronize()
        if r >= 3:
            times.append(start.elapsed_time(end))
    return {"median_ms": statistics.median(times), "runs": runs, "via": "tensorrt python"}


def with_trtexec(trtexec, model, shapes, runs, fp16):
    cmd = [trtexec, f"--onnx={model}", f"--iterations={runs}", "--warmUp=200"]
    if shapes:
        spec = ",".join(f"{n}:{'x'.join(map(str, s))}" for n, s in shapes.items())
        cmd.append(f"--shapes={spec}")
    if fp16:
        cmd.append("--fp16")
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"trtexec failed ({out.returncode}): {out.stderr[-2000:]}")
    # "GPU Compute Time: min = …ms, max = …ms, mean = …ms, median = …ms, …"
    m = re.search(r"GPU Compute Time:.*?median = ([0-9.]+) ms", out.stdout)
    if not m:
        raise SystemExit("trtexec printed no GPU compute time")
    return {"median_ms": float(m.group(1)), "runs": runs, "via": "trtexec"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--shape", action="append", default=[], metavar="NAME=D0xD1x...")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--fp16", action="store_true")
    args = ap.parse_args()
    shapes = parse_shapes(args.shape)
    try:
        import tensorrt as trt
    except ImportError:
        trt = None
    trtexec = shutil.which("trtexec")
    if trt is None and trtexec is None:
        print("TensorRT is not installed (no `tensorrt` Python package, no `trtexec` on PATH): skipped.")
        return 0
    if trt is not None:
        result = with_python_api(trt, args.model, shapes, args.runs, args.fp16)
    else:
        result = with_trtexec(trtexec, args.model, shapes, args.runs, args.fp16)
    result["model"] = args.model
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
