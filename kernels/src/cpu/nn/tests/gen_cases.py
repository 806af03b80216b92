"""Generates cases.json: nn-family test cases whose expected outputs come from the onnx reference
implementation (onnx.reference.ReferenceEvaluator), never from Spillway.

Run from the repository root with the project venv:
    /work/main/.venv/bin/python kernels/src/cpu/nn/tests/gen_cases.py
"""

import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

rng = np.random.default_rng(7)
cases = []


def rnd(*shape, dtype=np.float32, lo=-2.0, hi=2.0):
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -20), min(info.max, 20), size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def case(name, op, opset, inputs, attrs=None, n_out=1, expected=None, oracle="reference"):
    """inputs: list of numpy arrays or None (omitted optional). oracle: "reference" or "ort"
    (onnxruntime, for the few ops whose onnx reference implementation is wrong)."""
    attrs = attrs or {}
    in_names = [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)]
    out_names = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, in_names, out_names, **attrs)
    if expected is None:
        graph_inputs = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(in_names, inputs)
            if a is not None
        ]
        out_type = TensorProto.UNDEFINED if oracle != "ort" else helper.np_dtype_to_tensor_dtype(inputs[0].dtype)
        graph_outputs = [
            helper.make_tensor_value_info(n, out_type if i == 0 or op != "MaxPool" else TensorProto.INT64, None)
            for i, n in enumerate(out_names)
        ]
        graph = helper.make_graph([node], name, graph_inputs, graph_outputs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        feeds = {n: a for n, a in zip(in_names, inputs) if a is not None}
        if oracle == "ort":
            import onnxruntime

            sess = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            expected = sess.run(None, feeds)
        else:
            expected = ReferenceEvaluator(model).run(None, feeds)
    enc_attrs = {}
    for k, v in attrs.items():
        if isinstance(v, float):
            enc_attrs[k] = {"f": v}
        elif isinstance(v, int):
            enc_attrs[k] = {"i": v}
        elif isinstance(v, str):
            enc_attrs[k] = {"s": v}
        elif all(isinstance(x, int) for x in v):
            enc_attrs[k] = {"ints": list(v)}
        else:
            enc_attrs[k] = {"floats": list(v)}

    def enc(a):
        if a is None:
            return None
        a = np.asarray(a)
        if a.dtype == np.float32:
            # Shortest decimal that round-trips to the same float32 (keeps the file small).
            data = [float(np.format_float_positional(x, unique=True)) for x in a.ravel()]
        else:
            data = [float(x) for x in a.ravel()]
        return {"dtype": a.dtype.name, "shape": list(a.shape), "data": data}

    cases.append({
        "name": name, "op": op, "opset": opset, "attrs": enc_attrs,
        "inputs": [enc(a) for a in inputs], "outputs": [enc(a) for a in expected],
    })


# Conv
x = rnd(1, 3, 7, 6)
case("conv_basic_pad1", "Conv", 22, [x, rnd(4, 3, 3, 3), rnd(4)], {"pads": [1, 1, 1, 1]})
case("conv_stride2_asym", "Conv", 11, [x, rnd(4, 3, 3, 2)], {"strides": [2, 2], "pads": [1, 0, 0, 1]})
case("conv_dilated", "Conv", 22, [rnd(2, 2, 9, 9), rnd(3, 2, 3, 3)], {"dilations": [2, 3], "pads": [2, 1, 0, 1]})
case("conv_group2", "Conv", 22, [rnd(2, 4, 5, 5), rnd(6, 2, 3, 3), rnd(6)], {"group": 2, "pads": [1, 1, 1, 1]})
case("conv_depthwise", "Conv", 22, [rnd(2, 3, 8, 7), rnd(3, 1, 3, 3), rnd(3)],
     {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]})
case("conv_depthwise_mult2_dil", "Conv", 22, [rnd(1, 2, 8, 8), rnd(4, 1, 3, 3)],
     {"group": 2, "dilations": [2, 1], "pads": [0, 2, 1, 0]})
case("conv_pointwise", "Conv", 22, [rnd(2, 5, 4, 3), rnd(3, 5, 1, 1), rnd(3)])
case("conv_same_upper_s2", "Conv", 22, [rnd(1, 2, 7, 8), rnd(2, 2, 4, 3)], {"auto_pad": "SAME_UPPER", "strides": [2, 2]})
case("conv_same_lower", "Conv", 22, [rnd(1, 2, 6, 5), rnd(2, 2, 4, 4)], {"auto_pad": "SAME_LOWER"})
case("conv_valid", "Conv", 22, [rnd(1, 2, 6, 5), rnd(2, 2, 3, 2)], {"auto_pad": "VALID", "strides": [2, 1]}, oracle="ort")
case("conv_1d", "Conv", 22, [rnd(2, 3, 11), rnd(4, 3, 3), rnd(4)], {"strides": [2], "pads": [1, 2], "dilations": [2]})
case("conv_depthwise_1d", "Conv", 22, [rnd(1, 4, 10), rnd(4, 1, 3)], {"group": 4, "pads": [1, 1]})
case("conv_3d", "Conv", 22, [rnd(1, 2, 5, 4, 6), rnd(3, 2, 2, 3, 2)], {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 2]})
case("conv_f64", "Conv", 22, [rnd(1, 2, 5, 5, dtype=np.float64), rnd(2, 2, 3, 3, dtype=np.float64)], {"pads": [1, 1, 1, 1]})

# ConvTranspose
case("convt_basic", "ConvTranspose", 22, [rnd(1, 2, 3, 3), rnd(2, 3, 3, 3)])
case("convt_strides_outpad", "ConvTranspose", 22, [rnd(1, 2, 3, 4), rnd(2, 2, 3, 3), rnd(2)],
     {"strides": [2, 3], "output_padding": [1, 1]})
case("convt_pads", "ConvTranspose", 22, [rnd(2, 2, 4, 4), rnd(2, 3, 3, 3)], {"strides": [2, 2], "pads": [1, 2, 0, 1]})
case("convt_group2", "ConvTranspose", 22, [rnd(1, 4, 3, 3), rnd(4, 2, 2, 2), rnd(4)], {"group": 2, "strides": [2, 2]}, oracle="ort")
case("convt_dilations", "ConvTranspose", 22, [rnd(1, 1, 3, 3), rnd(1, 1, 2, 2)], {"dilations": [2, 2]})
case("convt_output_shape", "ConvTranspose", 22, [rnd(1, 1, 3, 3), rnd(1, 2, 3, 3)],
     {"strides": [3, 2], "output_shape": [10, 8]})
case("convt_same_upper", "ConvTranspose", 22, [rnd(1, 1, 3, 3), rnd(1, 2, 3, 3)], {"auto_pad": "SAME_UPPER", "strides": [2, 2]})
case("convt_1d", "ConvTranspose", 22, [rnd(1, 1, 5), rnd(1, 2, 3)])
case("convt_3d", "ConvTranspose", 22, [rnd(1, 1, 3, 4, 5), rnd(1, 2, 3, 3, 3)])

# Gemm
a, b = rnd(3, 5), rnd(5, 4)
case("gemm_all_attrs", "Gemm", 13, [rnd(5, 3), rnd(4, 5), rnd(1, 4)],
     {"transA": 1, "transB": 1, "alpha": 0.25, "beta": 0.35})
case("gemm_vector_c", "Gemm", 13, [a, b, rnd(4)])
case("gemm_scalar_c", "Gemm", 13, [a, b, np.array(3.5, dtype=np.float32)], {"beta": 2.0})
case("gemm_col_c", "Gemm", 7, [a, b, rnd(3, 1)])
case("gemm_no_c", "Gemm", 13, [a, b])
case("gemm_f64", "Gemm", 13, [rnd(2, 3, dtype=np.float64), rnd(3, 2, dtype=np.float64), rnd(2, 2, dtype=np.float64)], {"alpha": 2.0})
case("gemm_gemv", "Gemm", 13, [rnd(1, 200), rnd(30, 200), rnd(30)], {"transB": 1})

# MatMul
case("matmul_2d", "MatMul", 13, [rnd(3, 4), rnd(4, 5)])
case("matmul_1d_1d", "MatMul", 13, [rnd(4), rnd(4)])
case("matmul_1d_3d", "MatMul", 13, [rnd(4), rnd(2, 4, 3)])
case("matmul_3d_1d", "MatMul", 13, [rnd(2, 3, 4), rnd(4)])
case("matmul_bcast", "MatMul", 13, [rnd(2, 1, 3, 4), rnd(5, 4, 2)])
case("matmul_gemv_rows", "MatMul", 13, [rnd(30, 200), rnd(200, 1)])
case("matmul_gemv_cols", "MatMul", 13, [rnd(1, 200), rnd(200, 30)])
case("matmul_int32", "MatMul", 13, [rnd(2, 3, 4, dtype=np.int32), rnd(4, 2, dtype=np.int32)])
case("matmul_int64", "MatMul", 9, [rnd(3, 4, dtype=np.int64), rnd(4, 2, dtype=np.int64)])
case("matmul_f64", "MatMul", 13, [rnd(2, 3, 4, dtype=np.float64), rnd(2, 4, 2, dtype=np.float64)])

# MaxPool / AveragePool
x = rnd(1, 2, 7, 6)
case("maxpool_default", "MaxPool", 22, [x], {"kernel_shape": [3, 2]})
case("maxpool_pads_strides", "MaxPool", 22, [x], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 0], "strides": [2, 2]})
case("maxpool_ceil", "MaxPool", 22, [x], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1})
case("maxpool_dilations", "MaxPool", 22, [x], {"kernel_shape": [2, 2], "dilations": [2, 2]})
case("maxpool_same_upper", "MaxPool", 22, [x], {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"})
case("maxpool_same_lower", "MaxPool", 8, [x], {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"})
case("maxpool_indices", "MaxPool", 22, [rnd(2, 2, 5, 4)], {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0]}, n_out=2, oracle="ort")
case("maxpool_indices_colmajor", "MaxPool", 22, [rnd(1, 2, 5, 4)], {"kernel_shape": [2, 3], "storage_order": 1}, n_out=2, oracle="ort")
case("maxpool_uint8", "MaxPool", 22, [rnd(1, 1, 5, 5, dtype=np.uint8)], {"kernel_shape": [2, 2]})
case("maxpool_int8", "MaxPool", 12, [rnd(1, 1, 5, 5, dtype=np.int8)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, oracle="ort")
case("maxpool_1d", "MaxPool", 22, [rnd(1, 3, 9)], {"kernel_shape": [3], "strides": [2]})
case("maxpool_3d", "MaxPool", 22, [rnd(1, 1, 4, 5, 4)], {"kernel_shape": [2, 2, 2], "strides": [1, 2, 1]})
case("avgpool_exclude_pad", "AveragePool", 22, [x], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, oracle="ort")
case("avgpool_include_pad", "AveragePool", 7, [x], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1})
case("avgpool_ceil", "AveragePool", 22, [x], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1})
case("avgpool_same_upper", "AveragePool", 22, [x], {"kernel_shape": [2, 3], "auto_pad": "SAME_UPPER"})
case("avgpool_strides", "AveragePool", 11, [x], {"kernel_shape": [2, 2], "strides": [3, 2]})
case("avgpool_dilations", "AveragePool", 19, [rnd(1, 1, 6, 6)], {"kernel_shape": [2, 2], "dilations": [2, 2]})
case("avgpool_3d", "AveragePool", 22, [rnd(1, 2, 4, 4, 4)], {"kernel_shape": [2, 3, 2]})
case("globalavgpool", "GlobalAveragePool", 22, [rnd(2, 3, 4, 5)], oracle="ort")
case("globalmaxpool", "GlobalMaxPool", 22, [rnd(2, 3, 4, 5, 2)], oracle="ort")

# Normalisation
x = rnd(2, 3, 4, 5)
s, bb, m, v = rnd(3), rnd(3), rnd(3), rnd(3, lo=0.5, hi=2.0)
case("batchnorm_v15", "BatchNormalization", 15, [x, s, bb, m, v], {"epsilon": 1e-2})
case("batchnorm_v9", "BatchNormalization", 9, [x, s, bb, m, v], oracle="ort")
case("batchnorm_v7", "BatchNormalization", 7, [x, s, bb, m, v], oracle="ort")
case("batchnorm_training", "BatchNormalization", 15, [x, s, bb, m, v], {"training_mode": 1, "momentum": 0.8}, n_out=3)
case("instancenorm", "InstanceNormalization", 22, [x, s, bb], {"epsilon": 1e-3})
case("layernorm_default", "LayerNormalization", 17, [x, rnd(5), rnd(5)], n_out=3)
case("layernorm_axis1", "LayerNormalization", 17, [x, rnd(3, 4, 5), rnd(3, 4, 5)], {"axis": 1, "epsilon": 1e-3}, n_out=3)
case("layernorm_axis_neg2_nobias", "LayerNormalization", 17, [x, rnd(4, 5), None], {"axis": -2})
case("lrn_size3", "LRN", 13, [rnd(2, 5, 3, 3)], {"size": 3, "alpha": 0.01, "beta": 0.6, "bias": 2.0}, oracle="ort")


def lrn_spec(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    """The ONNX LRN formula in numpy (the onnx reference loops over the batch dim by mistake and
    onnxruntime rejects even sizes)."""
    c = x.shape[1]
    sq = np.zeros_like(x, dtype=np.float64)
    for ch in range(c):
        lo, hi = max(0, ch - (size - 1) // 2), min(c - 1, ch + -(-(size - 1) // 2))
        sq[:, ch] = (x[:, lo:hi + 1].astype(np.float64) ** 2).sum(axis=1)
    return (x / (bias + alpha / size * sq) ** beta).astype(x.dtype)


xl = rnd(1, 6, 2, 2)
case("lrn_size4", "LRN", 13, [xl], {"size": 4}, expected=[lrn_spec(xl, 4)])


# Einsum (expected from numpy.einsum, which the onnx reference wraps)
def einsum_case(name, eq, *ops):
    case(name, "Einsum", 12, list(ops), {"equation": eq}, expected=[np.einsum(eq, *ops)])


einsum_case("einsum_matmul", "ij,jk->ik", rnd(3, 4), rnd(4, 2))
einsum_case("einsum_batch_matmul", "bij,bjk->bik", rnd(2, 3, 4, dtype=np.float64), rnd(2, 4, 2, dtype=np.float64))
einsum_case("einsum_implicit", "ij,jk", rnd(3, 4), rnd(4, 2))
einsum_case("einsum_transpose", "ij->ji", rnd(3, 4))
einsum_case("einsum_trace", "ii", rnd(4, 4))
einsum_case("einsum_diag", "ii->i", rnd(4, 4))
einsum_case("einsum_batch_diag", "...ii->...i", rnd(2, 3, 3))
einsum_case("einsum_sum", "ij->i", rnd(3, 4))
einsum_case("einsum_total", "ij->", rnd(3, 4))
einsum_case("einsum_inner", "i,i", rnd(5), rnd(5))
einsum_case("einsum_outer", "i,j->ij", rnd(3), rnd(2))
einsum_case("einsum_ellipsis_bcast", "...ij,...jk->...ik", rnd(2, 1, 3, 4), rnd(5, 4, 2))
einsum_case("einsum_three", "ij,jk,kl->il", rnd(2, 3), rnd(3, 4), rnd(4, 2))
einsum_case("einsum_attention", "bhqd,bhkd->bhqk", rnd(1, 2, 3, 4), rnd(1, 2, 5, 4))
einsum_case("einsum_int64", "ij,jk->ik", rnd(2, 3, dtype=np.int64), rnd(3, 2, dtype=np.int64))

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases.json")
with open(out, "w") as f:
    json.dump(cases, f, separators=(",", ":"))
print(f"wrote {len(cases)} cases to {out}")
