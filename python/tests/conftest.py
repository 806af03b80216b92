"""Shared fixtures: the module under test (onnxruntime or spillway), the ONNX test data, and
small models built with onnx.helper.

Every test that takes ``rt`` runs twice, once per module, with the same script: what it checks
holds for onnxruntime, so a failure on spillway is a difference from onnxruntime.
"""

from __future__ import annotations

import importlib
import pathlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxruntime

# onnxruntime's own warnings (opset 6 models, transpose optimizer) go to stderr unasked.
onnxruntime.set_default_logger_severity(3)

ROOT = pathlib.Path(__file__).resolve().parents[2]
ONNX_DATA = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data"
BUNDLED_MODEL = ROOT / "models" / "small" / "inception_block.onnx"

MODULES = ["onnxruntime", "spillway"]


@pytest.fixture(params=MODULES)
def rt(request):
    """The module under test: ``onnxruntime`` or ``spillway``."""
    return importlib.import_module(request.param)


def errors(rt):
    """Where the module's exception classes live."""
    if rt.__name__ == "onnxruntime":
        return importlib.import_module("onnxruntime.capi.onnxruntime_pybind11_state")
    return rt


def make_model(nodes, inputs, outputs, initializers=(), opset=17, **model_fields) -> bytes:
    """A serialized model of one graph (IR version 8, default-domain opset ``opset``)."""
    graph = helper.make_graph(list(nodes), "test_graph", list(inputs), list(outputs), initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **model_fields)
    model.ir_version = 8
    return model.SerializeToString()


def tensor(name, dtype, shape):
    """A tensor value info."""
    return helper.make_tensor_value_info(name, dtype, shape)


def mul_model() -> bytes:
    """Y = X * X for X of shape [3, 2] (onnxruntime's mul_1 test model)."""
    return make_model(
        [helper.make_node("Mul", ["X", "X"], ["Y"])],
        [tensor("X", TensorProto.FLOAT, [3, 2])],
        [tensor("Y", TensorProto.FLOAT, [3, 2])],
    )


def matmul_model(batch="batch") -> bytes:
    """Y = X @ [[1], [2]] with X of shape [batch, 2]."""
    return make_model(
        [helper.make_node("MatMul", ["X", "W"], ["Y"])],
        [tensor("X", TensorProto.FLOAT, [batch, 2])],
        [tensor("Y", TensorProto.FLOAT, [batch, 1])],
        [numpy_helper.from_array(np.array([[1.0], [2.0]], np.float32), "W")],
    )


@pytest.fixture
def mul_path(tmp_path) -> pathlib.Path:
    """The Mul model written to a file."""
    path = tmp_path / "mul_1.onnx"
    path.write_bytes(mul_model())
    return path


def redraw_weights(model: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """The onnx wheel's ``light_*`` models keep only their structure: every weight is one value
    repeated by a ``ConstantOfShape``, so their outputs do not depend on the input. This gives
    the weights of ``Conv``, ``Gemm`` and ``MatMul`` seeded values of He's scale, biases small
    values, and normalizations scales and variances around one, as ``Constant`` nodes; the
    logits before a final ``Softmax`` become an output."""
    rng = np.random.default_rng(seed)
    initializers = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in model.graph.node:
        for k, name in enumerate(node.input):
            readers.setdefault(name, []).append((node, k))
    nodes = []
    for node in model.graph.node:
        shape = initializers.get(node.input[0]) if node.op_type == "ConstantOfShape" and node.input else None
        uses = readers.get(node.output[0], []) if node.op_type == "ConstantOfShape" else []
        if shape is None or not uses:
            nodes.append(node)
            continue
        shape = [int(d) for d in shape]
        # Per-channel scales and shifts reach their Mul / Add through an Unsqueeze.
        uses = [
            use
            for r, k in uses
            for use in (readers.get(r.output[0], []) if r.op_type == "Unsqueeze" else [(r, k)])
        ]
        weight = [(r, k) for r, k in uses if r.op_type in ("Conv", "Gemm", "MatMul") and k == 1]
        if weight:
            reader = weight[0][0]
            trans_b = any(a.name == "transB" and a.i for a in reader.attribute)
            fan_in = {"Conv": int(np.prod(shape[1:])), "Gemm": shape[1] if trans_b else shape[0], "MatMul": shape[0]}[reader.op_type]
            values = rng.standard_normal(shape) * np.sqrt(2.0 / max(fan_in, 1))
        elif any(r.op_type == "BatchNormalization" and k in (1, 4) or r.op_type == "Mul" for r, k in uses):
            values = rng.uniform(0.5, 1.5, shape)
        elif all(r.op_type in ("Conv", "Gemm", "BatchNormalization", "Add") for r, _ in uses):
            values = rng.standard_normal(shape) * 0.1
        else:
            nodes.append(node)
            continue
        value = numpy_helper.from_array(values.astype(np.float32), node.output[0] + "_redrawn")
        nodes.append(helper.make_node("Constant", [], [node.output[0]], value=value))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    # A softmax that ends the graph saturates (one-hot) on deep nets with drawn weights: its
    # input, the logits, becomes an output too.
    outputs = {o.name for o in model.graph.output}
    for node in model.graph.node:
        if node.op_type == "Softmax" and node.output[0] in outputs and node.input[0] not in outputs:
            model.graph.output.append(helper.make_empty_tensor_value_info(node.input[0]))
    return model
