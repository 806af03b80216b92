#!/usr/bin/env python3
"""Builds the small multi-branch CNN that ships in models/small/ (the CLI's default model).

An Inception-like block so the default run exercises parallel branches: a stem conv with
BatchNorm, three branches (1x1 conv; 1x1 -> 3x3 conv; 3x3 max-pool -> 1x1 conv), a Concat,
global average pooling and a classifier with Softmax. Weights are seeded random numbers;
run with the project venv: `.venv/bin/python models/make_small.py`.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(20261122)


def weight(name, *shape, scale=None):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    scale = scale or np.sqrt(2.0 / fan_in)
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def bias(name, n):
    return numpy_helper.from_array((rng.standard_normal(n) * 0.05).astype(np.float32), name)


inits = [
    weight("stem_w", 16, 3, 3, 3), bias("stem_b", 16),
    numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype(np.float32), "bn_scale"),
    numpy_helper.from_array(rng.standard_normal(16).astype(np.float32) * 0.1, "bn_bias"),
    numpy_helper.from_array(rng.standard_normal(16).astype(np.float32) * 0.1, "bn_mean"),
    numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype(np.float32), "bn_var"),
    weight("b1_w", 8, 16, 1, 1), bias("b1_b", 8),
    weight("b2a_w", 8, 16, 1, 1), bias("b2a_b", 8),
    weight("b2b_w", 12, 8, 3, 3), bias("b2b_b", 12),
    weight("b3_w", 8, 16, 1, 1), bias("b3_b", 8),
    weight("fc_w", 10, 28), bias("fc_b", 10),
]
nodes = [
    helper.make_node("Conv", ["input", "stem_w", "stem_b"], ["stem"], name="stem_conv", pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("BatchNormalization", ["stem", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["stem_bn"], name="stem_bn"),
    helper.make_node("Relu", ["stem_bn"], ["stem_relu"], name="stem_relu"),
    helper.make_node("Conv", ["stem_relu", "b1_w", "b1_b"], ["b1"], name="branch1_conv1x1"),
    helper.make_node("Relu", ["b1"], ["b1_relu"], name="branch1_relu"),
    helper.make_node("Conv", ["stem_relu", "b2a_w", "b2a_b"], ["b2a"], name="branch2_reduce"),
    helper.make_node("Relu", ["b2a"], ["b2a_relu"], name="branch2_reduce_relu"),
    helper.make_node("Conv", ["b2a_relu", "b2b_w", "b2b_b"], ["b2b"], name="branch2_conv3x3", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["b2b"], ["b2b_relu"], name="branch2_relu"),
    helper.make_node("MaxPool", ["stem_relu"], ["b3p"], name="branch3_pool", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
    helper.make_node("Conv", ["b3p", "b3_w", "b3_b"], ["b3"], name="branch3_conv1x1"),
    helper.make_node("Relu", ["b3"], ["b3_relu"], name="branch3_relu"),
    helper.make_node("Concat", ["b1_relu", "b2b_relu", "b3_relu"], ["cat"], name="concat", axis=1),
    helper.make_node("GlobalAveragePool", ["cat"], ["gap"], name="gap"),
    helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
    helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="classifier", transB=1),
    helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
]
graph = helper.make_graph(
    nodes,
    "spillway_small_inception",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 64, 64])],
    [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10])],
    inits,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="spillway/models/make_small.py")
model.ir_version = 8
onnx.checker.check_model(model, full_check=True)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "small", "inception_block.onnx")
onnx.save(model, out)
print(f"wrote {out}")
