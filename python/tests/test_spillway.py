"""What spillway adds to onnxruntime's API, and where it differs on purpose: `devices=`,
`placement=`, `placement_report()`, no silent fallback from a missing GPU, outputs that own
their buffers. The expected values are NumPy's or onnxruntime's."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import spillway
from conftest import BUNDLED_MODEL, matmul_model, mul_model

X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)


def test_cuda_provider_without_a_gpu_is_an_error_not_a_fallback():
    if spillway.get_device() == "GPU" and "cuda" in " ".join(spillway.InferenceSession(mul_model()).devices()):
        pytest.skip("a GPU is present")
    try:
        sess = spillway.InferenceSession(mul_model(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    except spillway.EPFail as e:
        assert "cuda0" in str(e) and "unavailable" in str(e)
    else:
        # A build with the CUDA backend on a machine with a GPU: it runs there.
        assert sess.get_providers()[0] == "CUDAExecutionProvider"


def test_unknown_provider_is_refused():
    with pytest.raises(ValueError):
        spillway.InferenceSession(mul_model(), providers=["NoSuchExecutionProvider"])


@pytest.mark.parametrize(
    "devices,placement",
    [
        (["cpu:2"], "greedy"),
        ("cpu:2", "auto"),
        (["cpu:1", "virtual:1"], "heft"),
        (["cpu:2", "virtual:2"], "hios-lp"),
    ],
)
def test_devices_and_placement_match_onnxruntime(devices, placement):
    if placement.replace("-", "").lower() not in [p.lower() for p in spillway.placement_policies()]:
        pytest.skip(f"no policy {placement}")
    path = str(BUNDLED_MODEL)
    sess = spillway.InferenceSession(path, devices=devices, placement=placement)
    report = sess.placement_report()
    assert report is not None
    assert report["nodes"], "the report names where each node runs"
    placed = {device for _, _, device, _ in report["nodes"]}
    assert placed <= set(sess.devices())
    assert sess.gantt_svg().lstrip().startswith("<")
    reference = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    feed = {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32) for i in reference.get_inputs()}
    for got, want in zip(sess.run(None, feed), reference.run(None, feed)):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_one_lane_session_has_no_placement_report():
    assert spillway.InferenceSession(mul_model()).placement_report() is None
    assert spillway.InferenceSession(mul_model()).devices() == ["cpu"]


def test_parallel_execution_mode_uses_cpu_lanes():
    so = spillway.SessionOptions()
    so.execution_mode = spillway.ExecutionMode.ORT_PARALLEL
    so.inter_op_num_threads = 2
    sess = spillway.InferenceSession(str(BUNDLED_MODEL), sess_options=so)
    assert sess.placement_report() is not None


def test_unknown_placement_and_bad_devices_are_errors():
    with pytest.raises(spillway.InvalidArgument, match="unknown placement"):
        spillway.InferenceSession(mul_model(), placement="fastest")
    with pytest.raises(ValueError):
        spillway.InferenceSession(mul_model(), devices=["tpu:0"])


def test_big_endian_input():
    # onnxruntime 1.31.1 reads the bytes of a '>f4' array as native floats (wrong values);
    # spillway converts the byte order first.
    sess = spillway.InferenceSession(matmul_model("batch"))
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    (y,) = sess.run(None, {"X": x.astype(">f4")})
    np.testing.assert_allclose(y, x @ np.array([[1.0], [2.0]], np.float32))


def test_outputs_own_their_buffers():
    sess = spillway.InferenceSession(mul_model())
    (y,) = sess.run(None, {"X": X})
    assert y.flags.writeable and y.flags.c_contiguous
    assert y.base is not None  # the Rust buffer, handed over without a copy
    y[0, 0] = 42.0
    np.testing.assert_allclose(sess.run(None, {"X": X})[0], X * X)


def test_engine_messages_reach_python():
    sess = spillway.InferenceSession(matmul_model(3))
    with pytest.raises(spillway.InvalidArgument, match="input 'X' has shape"):
        sess.run(None, {"X": np.ones((3, 3), np.float32)})
    with pytest.raises(spillway.InvalidArgument, match="missing input 'X'"):
        sess.run(None, {})
    with pytest.raises(spillway.InvalidArgument, match="unknown output 'nope'"):
        sess.run(["nope"], {"X": X})


def test_unsupported_operator_names_the_node():
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Foo", ["x"], ["y"], name="the_node", domain="com.example")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    model.ir_version = 8
    with pytest.raises(spillway.Fail) as info:
        spillway.InferenceSession(model.SerializeToString())
    assert "Foo" in str(info.value)
    assert isinstance(info.value, RuntimeError)


def test_bfloat16_through_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = spillway.InferenceSession(model.SerializeToString())
    assert sess.get_inputs()[0].type == "tensor(bfloat16)"
    x = np.array([1.0, -2.5, 3.0], dtype=ml_dtypes.bfloat16)
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), x.astype(np.float32))
