"""Builds the quantized differential-test models: small float models (random-weight Conv,
MatMul and Gemm graphs, and the bundled inception block) quantized by
onnxruntime.quantization, statically (QDQ, per tensor and per channel, a seeded random
calibration reader) and dynamically. Nothing here is committed: the test writes the models to
a scratch folder.

Usage: python make_quantized.py OUT_DIR
Writes OUT_DIR/<name>.onnx and OUT_DIR/manifest.json: for each model its file and, for QDQ
models, the scale of each output's final DequantizeLinear (one quantization step).
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def weight(rng, name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def conv_net(rng):
    """Conv -> Relu -> strided Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm."""
    inits = [
        weight(rng, "w1", (8, 3, 3, 3)),
        weight(rng, "b1", (8,), 0.1),
        weight(rng, "w2", (16, 8, 3, 3), 0.2),
        weight(rng, "b2", (16,), 0.1),
        weight(rng, "wg", (10, 16), 0.3),
        weight(rng, "bg", (10,), 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wg", "bg"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def conv_wide(rng):
    """Two 3x3 Convs of 32 -> 64 -> 64 channels on 28x28 (the speed comparison's model)."""
    inits = [
        weight(rng, "w1", (64, 32, 3, 3), 0.1),
        weight(rng, "b1", (64,), 0.1),
        weight(rng, "w2", (64, 64, 3, 3), 0.05),
        weight(rng, "b2", (64,), 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 28, 28])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 28, 28])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def matmul_net(rng):
    """MatMul -> Add -> Relu -> MatMul, a transformer block's feed-forward shape."""
    inits = [
        weight(rng, "w1", (32, 48), 0.2),
        weight(rng, "b1", (48,), 0.1),
        weight(rng, "w2", (48, 24), 0.2),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "matmul_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 24])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class Reader(CalibrationDataReader):
    """Eight seeded normal inputs per model input."""

    def __init__(self, model, seed):
        rng = np.random.default_rng(seed)
        shapes = {
            i.name: [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
            for i in model.graph.input
        }
        self.batches = iter(
            [{n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()} for _ in range(8)]
        )

    def get_next(self):
        return next(self.batches, None)


def output_steps(path):
    """Scale of the DequantizeLinear that makes each graph output, when one does."""
    m = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    steps = {}
    for o in m.graph.output:
        for n in m.graph.node:
            if o.name in n.output and n.op_type == "DequantizeLinear" and n.input[1] in inits:
                steps[o.name] = float(np.max(inits[n.input[1]]))
    return steps


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    floats = {
        "conv_net": conv_net(rng),
        "matmul_net": matmul_net(rng),
        "conv_wide": conv_wide(rng),
        "inception_block": onnx.load(os.path.join(ROOT, "models/small/inception_block.onnx")),
    }
    manifest = {}
    for name, model in floats.items():
        fp = os.path.join(out, f"{name}_float.onnx")
        onnx.save(model, fp)
        variants = {
            "qdq_s8": dict(per_channel=False, activation_type=QuantType.QInt8),
            "qdq_u8_per_channel": dict(per_channel=True, activation_type=QuantType.QUInt8),
        }
        for suffix, kw in variants.items():
            qp = os.path.join(out, f"{name}_{suffix}.onnx")
            quantize_static(
                fp,
                qp,
                Reader(model, 11),
                quant_format=QuantFormat.QDQ,
                weight_type=QuantType.QInt8,
                **kw,
            )
            manifest[f"{name}_{suffix}"] = {"file": qp, "steps": output_steps(qp)}
        for wt in (QuantType.QInt8, QuantType.QUInt8):
            qp = os.path.join(out, f"{name}_dynamic_{wt.name.lower()}.onnx")
            quantize_dynamic(fp, qp, weight_type=wt)
            manifest[f"{name}_dynamic_{wt.name.lower()}"] = {"file": qp, "steps": {}}
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
