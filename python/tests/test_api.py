"""onnxruntime's Python API, one script per behaviour, run on onnxruntime and on spillway.

The expected values are NumPy's arithmetic or onnxruntime's own behaviour (the same assertion
passes on onnxruntime); the models are built here with onnx.helper.
"""

from __future__ import annotations

import json
import os
import pathlib
import threading

import numpy as np
import pytest
from conftest import errors, make_model, matmul_model, mul_model, tensor
from onnx import TensorProto, helper, numpy_helper

X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)


def test_inputs_outputs_and_run(rt, mul_path):
    sess = rt.InferenceSession(str(mul_path), providers=["CPUExecutionProvider"])
    (inp,) = sess.get_inputs()
    (out,) = sess.get_outputs()
    assert (inp.name, inp.shape, inp.type) == ("X", [3, 2], "tensor(float)")
    assert (out.name, out.shape, out.type) == ("Y", [3, 2], "tensor(float)")
    (res,) = sess.run([out.name], {inp.name: X})
    assert res.dtype == np.float32
    np.testing.assert_allclose(res, X * X, rtol=1e-6)


def test_model_from_bytes_and_path_object(rt, mul_path):
    for source in (mul_model(), pathlib.Path(mul_path), str(mul_path)):
        sess = rt.InferenceSession(source, providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(sess.run(None, {"X": X})[0], X * X)


def test_symbolic_and_unknown_dims(rt):
    sess = rt.InferenceSession(matmul_model("batch"))
    assert sess.get_inputs()[0].shape == ["batch", 2]
    assert sess.get_outputs()[0].shape == ["batch", 1]
    for rows in (1, 3, 7):
        x = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
        np.testing.assert_allclose(sess.run(None, {"X": x})[0], x @ np.array([[1.0], [2.0]], np.float32))
    unknown = rt.InferenceSession(matmul_model(None))
    assert unknown.get_inputs()[0].shape[1] == 2
    assert unknown.get_inputs()[0].shape[0] in (None, "None") or isinstance(unknown.get_inputs()[0].shape[0], str)


def two_outputs_model() -> bytes:
    return make_model(
        [helper.make_node("Add", ["A", "B"], ["sum"]), helper.make_node("Sub", ["A", "B"], ["diff"])],
        [tensor("A", TensorProto.FLOAT, [2]), tensor("B", TensorProto.FLOAT, [2])],
        [tensor("sum", TensorProto.FLOAT, [2]), tensor("diff", TensorProto.FLOAT, [2])],
    )


def test_output_names_select_and_order(rt):
    sess = rt.InferenceSession(two_outputs_model())
    a, b = np.array([5.0, 7.0], np.float32), np.array([1.0, 2.0], np.float32)
    feed = {"A": a, "B": b}
    assert [o.name for o in sess.get_outputs()] == ["sum", "diff"]
    for names in (None, []):
        s, d = sess.run(names, feed)
        np.testing.assert_array_equal(s, a + b)
        np.testing.assert_array_equal(d, a - b)
    d, s = sess.run(["diff", "sum"], feed)
    np.testing.assert_array_equal(d, a - b)
    np.testing.assert_array_equal(s, a + b)
    (d,) = sess.run(["diff"], feed)
    np.testing.assert_array_equal(d, a - b)


DTYPES = [
    (np.float32, TensorProto.FLOAT, "tensor(float)"),
    (np.float64, TensorProto.DOUBLE, "tensor(double)"),
    (np.float16, TensorProto.FLOAT16, "tensor(float16)"),
    (np.int8, TensorProto.INT8, "tensor(int8)"),
    (np.int16, TensorProto.INT16, "tensor(int16)"),
    (np.int32, TensorProto.INT32, "tensor(int32)"),
    (np.int64, TensorProto.INT64, "tensor(int64)"),
    (np.uint8, TensorProto.UINT8, "tensor(uint8)"),
    (np.uint16, TensorProto.UINT16, "tensor(uint16)"),
    (np.uint32, TensorProto.UINT32, "tensor(uint32)"),
    (np.uint64, TensorProto.UINT64, "tensor(uint64)"),
    (np.bool_, TensorProto.BOOL, "tensor(bool)"),
]


@pytest.mark.parametrize("np_type,onnx_type,type_string", DTYPES, ids=[d[2] for d in DTYPES])
def test_every_numeric_dtype_round_trips(rt, np_type, onnx_type, type_string):
    model = make_model(
        [helper.make_node("Identity", ["x"], ["y"])],
        [tensor("x", onnx_type, [2, 3])],
        [tensor("y", onnx_type, [2, 3])],
    )
    sess = rt.InferenceSession(model)
    assert sess.get_inputs()[0].type == type_string
    assert sess.get_outputs()[0].type == type_string
    x = (np.arange(6).reshape(2, 3) % 2 == 0) if np_type is np.bool_ else np.arange(6).reshape(2, 3).astype(np_type)
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == np.dtype(np_type)
    assert y.shape == (2, 3)
    np.testing.assert_array_equal(y, x)


def test_scalar_and_empty_tensors(rt):
    model = make_model(
        [helper.make_node("Neg", ["x"], ["y"])],
        [tensor("x", TensorProto.FLOAT, None)],
        [tensor("y", TensorProto.FLOAT, None)],
    )
    sess = rt.InferenceSession(model)
    for x in (np.array(3.5, np.float32), np.zeros((0, 4), np.float32), np.ones((2, 0, 3), np.float32)):
        (y,) = sess.run(None, {"x": x})
        assert y.shape == x.shape
        np.testing.assert_array_equal(y, -x)


def identity_string_model() -> bytes:
    return make_model(
        [helper.make_node("Identity", ["input:0"], ["output:0"])],
        [tensor("input:0", TensorProto.STRING, [2, 2])],
        [tensor("output:0", TensorProto.STRING, [2, 2])],
    )


@pytest.mark.parametrize(
    "make_input",
    [
        lambda: np.array(["this", "is", "identity", "test"], dtype=str).reshape(2, 2),
        lambda: np.array(["Olá", "你好", "여보세요", "hello"], dtype=str).reshape(2, 2),
        lambda: np.array(["this", "is", "identity", "test"], dtype=object).reshape(2, 2),
        lambda: np.array(["this", "is", "identity", "test"], dtype=str).reshape(2, 2).tolist(),
    ],
    ids=["str", "unicode", "object", "list"],
)
def test_string_tensors(rt, make_input):
    sess = rt.InferenceSession(identity_string_model())
    assert sess.get_inputs()[0].type == "tensor(string)"
    x = make_input()
    (y,) = sess.run(None, {"input:0": x})
    assert y.dtype == object
    np.testing.assert_array_equal(y, np.asarray(x, dtype=object))


def test_bytes_string_input(rt):
    sess = rt.InferenceSession(identity_string_model())
    x = np.array([b"this", b"is", b"identity", b"test"]).reshape(2, 2)
    (y,) = sess.run(None, {"input:0": x})
    np.testing.assert_array_equal(y.astype("|S8"), x)


def test_list_input_takes_the_declared_type(rt, mul_path):
    sess = rt.InferenceSession(str(mul_path))
    (y,) = sess.run([], {"X": X.tolist()})
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, X * X)


@pytest.mark.parametrize(
    "layout",
    ["transposed", "strided", "fortran", "read-only"],
)
def test_non_contiguous_inputs(rt, layout):
    sess = rt.InferenceSession(matmul_model("batch"))
    base = np.arange(24, dtype=np.float32).reshape(6, 4)
    x = {
        "transposed": base[:2, :].T,
        "strided": base[::2, 1:3],
        "fortran": np.asfortranarray(base[:, :2]),
        "read-only": np.require(base[:, :2], requirements="C"),
    }[layout]
    if layout == "read-only":
        x = x.copy()
        x.flags.writeable = False
    (y,) = sess.run(None, {"X": x})
    np.testing.assert_allclose(y, np.asarray(x, np.float32) @ np.array([[1.0], [2.0]], np.float32))


def test_boolean_inputs(rt):
    model = make_model(
        [helper.make_node("And", ["input1:0", "input:0"], ["output:0"])],
        [tensor("input1:0", TensorProto.BOOL, [2, 2]), tensor("input:0", TensorProto.BOOL, [2, 2])],
        [tensor("output:0", TensorProto.BOOL, [2, 2])],
    )
    sess = rt.InferenceSession(model)
    assert [i.name for i in sess.get_inputs()] == ["input1:0", "input:0"]
    a = np.array([[True, True], [False, False]])
    b = np.array([[True, False], [True, False]])
    (y,) = sess.run(None, {"input1:0": a, "input:0": b})
    np.testing.assert_array_equal(y, a & b)


def test_sequence_outputs_and_inputs(rt):
    construct = make_model(
        [helper.make_node("SequenceConstruct", ["tensor1", "tensor2"], ["output_sequence"])],
        [tensor("tensor1", TensorProto.INT64, [2, 3]), tensor("tensor2", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_sequence_value_info("output_sequence", TensorProto.INT64, None)],
    )
    sess = rt.InferenceSession(construct)
    assert sess.get_outputs()[0].type == "seq(tensor(int64))"
    t1 = np.array([1, 0, 3, 44, 23, 11], np.int64).reshape(2, 3)
    t2 = np.arange(1, 7, dtype=np.int64).reshape(2, 3)
    (seq,) = sess.run(None, {"tensor1": t1, "tensor2": t2})
    assert isinstance(seq, list) and len(seq) == 2
    np.testing.assert_array_equal(seq[0], t1)
    np.testing.assert_array_equal(seq[1], t2)

    length = make_model(
        [helper.make_node("SequenceLength", ["X"], ["Y"])],
        [helper.make_tensor_sequence_value_info("X", TensorProto.FLOAT, None)],
        [tensor("Y", TensorProto.INT64, [])],
    )
    sess = rt.InferenceSession(length)
    assert sess.get_inputs()[0].type == "seq(tensor(float))"
    (n,) = sess.run(None, {"X": [np.ones((2, 3), np.float32), np.zeros((1,), np.float32)]})
    assert n == 2

    insert = make_model(
        [helper.make_node("SequenceInsert", ["input_seq", "tensor"], ["output_sequence"])],
        [helper.make_tensor_sequence_value_info("input_seq", TensorProto.INT64, None), tensor("tensor", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_sequence_value_info("output_sequence", TensorProto.INT64, None)],
    )
    sess = rt.InferenceSession(insert)
    (seq,) = sess.run(None, {"tensor": t1, "input_seq": []})
    assert len(seq) == 1
    np.testing.assert_array_equal(seq[0], t1)


def test_outputs_do_not_alias_inputs(rt):
    model = make_model(
        [helper.make_node("Add", ["input_0", "ten"], ["plus_10"])],
        [tensor("input_0", TensorProto.FLOAT, [1, 2, 2, 2])],
        [tensor("plus_10", TensorProto.FLOAT, [1, 2, 2, 2]), tensor("input_0", TensorProto.FLOAT, [1, 2, 2, 2])],
        [numpy_helper.from_array(np.array(10, np.float32), "ten")],
    )
    sess = rt.InferenceSession(model)
    kept = []
    for i in range(4):
        x = np.full((1, 2, 2, 2), float(i), np.float32)
        outs = sess.run(None, {"input_0": x})
        assert not np.shares_memory(outs[1], x)
        kept.append(outs)
    for i, (plus, same) in enumerate(kept):
        np.testing.assert_array_equal(plus, np.full((1, 2, 2, 2), i + 10.0, np.float32))
        np.testing.assert_array_equal(same, np.full((1, 2, 2, 2), float(i), np.float32))


def test_errors_raise_the_same_exception_classes(rt, tmp_path):
    err = errors(rt)
    sess = rt.InferenceSession(matmul_model(3))
    with pytest.raises(err.InvalidArgument):
        sess.run(None, {"X": np.ones((3, 3), np.float32)})  # wrong shape
    with pytest.raises(err.InvalidArgument):
        sess.run(None, {"X": np.ones((3, 2), np.float64)})  # wrong element type
    with pytest.raises(err.InvalidArgument):
        sess.run(["nope"], {"X": np.ones((3, 2), np.float32)})  # unknown output
    with pytest.raises(ValueError):
        sess.run(None, {})  # missing input
    with pytest.raises(err.NoSuchFile):
        rt.InferenceSession(str(tmp_path / "missing.onnx"))
    with pytest.raises(err.InvalidProtobuf):
        rt.InferenceSession(b"this is not a model")
    # The session stays usable after failed runs.
    np.testing.assert_allclose(sess.run(None, {"X": X})[0], X @ np.array([[1.0], [2.0]], np.float32))


def test_model_metadata(rt):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "squeezenet_old",
        [tensor("x", TensorProto.FLOAT, [2])],
        [tensor("y", TensorProto.FLOAT, [2])],
        doc_string="graph doc",
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        producer_name="onnx-caffe2",
        domain="ai.example",
        model_version=7,
        doc_string="model doc",
    )
    model.ir_version = 8
    helper.set_model_props(model, {"author": "spillway", "license": "MIT"})
    meta = rt.InferenceSession(model.SerializeToString()).get_modelmeta()
    assert meta.producer_name == "onnx-caffe2"
    assert meta.graph_name == "squeezenet_old"
    assert meta.domain == "ai.example"
    assert meta.description == "model doc"
    assert meta.graph_description == "graph doc"
    assert meta.version == 7
    assert meta.custom_metadata_map == {"author": "spillway", "license": "MIT"}


def test_model_metadata_from_a_file(rt, mul_path):
    meta = rt.InferenceSession(str(mul_path)).get_modelmeta()
    assert meta.graph_name == "test_graph"
    assert meta.custom_metadata_map == {}


def test_profiling_writes_a_chrome_trace(rt, mul_path, tmp_path):
    so = rt.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "profile")
    sess = rt.InferenceSession(str(mul_path), sess_options=so)
    sess.run([], {"X": X})
    sess.run([], {"X": X})
    path = sess.end_profiling()
    assert path and os.path.isfile(path)
    with open(path) as f:
        trace = json.load(f)
    events = trace if isinstance(trace, list) else trace["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    assert complete, "no complete events in the trace"
    for event in complete:
        for key in ("pid", "dur", "ts", "name"):
            assert key in event
    os.remove(path)


def test_session_options(rt):
    model = make_model(
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"]),
        ],
        [tensor("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [tensor("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [
            numpy_helper.from_array(np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
            numpy_helper.from_array(np.random.default_rng(2).standard_normal(4).astype(np.float32), "b"),
        ],
    )
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    results = []
    so = rt.SessionOptions()
    assert so.graph_optimization_level == rt.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert so.execution_mode == rt.ExecutionMode.ORT_SEQUENTIAL
    for level in (
        rt.GraphOptimizationLevel.ORT_DISABLE_ALL,
        rt.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        rt.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        rt.GraphOptimizationLevel.ORT_ENABLE_ALL,
    ):
        for threads in (1, 2):
            so = rt.SessionOptions()
            so.graph_optimization_level = level
            so.intra_op_num_threads = threads
            results.append(rt.InferenceSession(model, sess_options=so).run(None, {"x": x})[0])
    so = rt.SessionOptions()
    so.add_session_config_entry("CONFIG_KEY", "CONFIG_VAL")
    assert so.get_session_config_entry("CONFIG_KEY") == "CONFIG_VAL"
    with pytest.raises(RuntimeError):
        so.get_session_config_entry("INVALID_KEY")
    for r in results[1:]:
        np.testing.assert_allclose(r, results[0], rtol=1e-4, atol=1e-5)
    assert (results[0] >= 0).all() and results[0].shape == (1, 4, 8, 8)


def test_run_options(rt, mul_path):
    sess = rt.InferenceSession(str(mul_path))
    ro = rt.RunOptions()
    ro.logid = "run"
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert ro.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    np.testing.assert_allclose(sess.run([], {"X": X}, ro)[0], X * X)
    np.testing.assert_allclose(sess.run([], {"X": X}, run_options=ro)[0], X * X)


def test_providers(rt, mul_path):
    assert "CPUExecutionProvider" in rt.get_available_providers()
    assert rt.get_all_providers()[-1] == "CPUExecutionProvider"
    sess = rt.InferenceSession(str(mul_path), providers=["CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert "CPU" in rt.get_device() or "GPU" in rt.get_device()
    assert rt.get_version_string()


def test_many_threads_share_one_session(rt):
    sess = rt.InferenceSession(matmul_model("batch"))
    w = np.array([[1.0], [2.0]], np.float32)
    failures = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(25):
            x = rng.standard_normal((int(rng.integers(1, 9)), 2)).astype(np.float32)
            y = sess.run(None, {"X": x})[0]
            if not np.allclose(y, x @ w, rtol=1e-5, atol=1e-6):
                failures.append(seed)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_set_providers_and_run_async(rt, mul_path):
    sess = rt.InferenceSession(str(mul_path), providers=["CPUExecutionProvider"])
    sess.set_providers(["CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    np.testing.assert_allclose(sess.run(None, {"X": X})[0], X * X)
    with pytest.raises(RuntimeError, match="Unknown Provider Type: InvalidProvider"):
        sess.set_providers(["InvalidProvider"])
    done = threading.Event()
    results = []

    def callback(outputs, data, error):
        results.append((outputs, data, error))
        done.set()

    sess = rt.InferenceSession(str(mul_path), providers=["CPUExecutionProvider"])
    sess.run_async(["Y"], {"X": X}, callback, "data")
    assert done.wait(60)
    ((outputs, data, error),) = results
    assert (data, error) == ("data", "")
    np.testing.assert_allclose(outputs[0], X * X)
