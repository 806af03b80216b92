"""Whole models, run on onnxruntime and on spillway.

- The ONNX test data that ships with expected outputs (the onnx wheel's ``pytorch-converted``,
  ``pytorch-operator`` and ``simple`` model tests): the same script runs on both modules and
  compares with the outputs stored beside each model.
- The onnx wheel's ``light_*`` models (weights redrawn: theirs make input-independent outputs)
  and the bundled model (``models/small``): spillway's outputs are compared with onnxruntime's
  on the same seeded inputs.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import pytest
from conftest import BUNDLED_MODEL, ONNX_DATA, errors, redraw_weights
from onnx import numpy_helper

MODEL_TEST_DIRS = sorted(
    d
    for kind in ("pytorch-converted", "pytorch-operator", "simple")
    for d in glob.glob(str(ONNX_DATA / kind / "test_*"))
    if os.path.isfile(os.path.join(d, "model.onnx"))
)


def read_value(path: str):
    """A serialized TensorProto, SequenceProto or OptionalProto as NumPy (lists for sequences)."""
    data = open(path, "rb").read()
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    if tensor.dims or tensor.data_type:
        return numpy_helper.to_array(tensor)
    sequence = onnx.SequenceProto()
    sequence.ParseFromString(data)
    return [numpy_helper.to_array(t) for t in sequence.tensor_values]


def graph_inputs(model: onnx.ModelProto) -> list[str]:
    initializers = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def expected_failures() -> dict[tuple[str, str], str]:
    """(module, test) -> reason, from expected_failures.txt."""
    listed = {}
    with open(os.path.join(os.path.dirname(__file__), "expected_failures.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                module, test, reason = line.split(None, 2)
                listed[(module, test)] = reason.strip()
    return listed


EXPECTED_FAILURES = expected_failures()


@pytest.mark.parametrize("test_dir", MODEL_TEST_DIRS, ids=[os.path.relpath(d, ONNX_DATA) for d in MODEL_TEST_DIRS])
def test_onnx_model_tests(rt, test_dir, request):
    test = os.path.relpath(test_dir, ONNX_DATA)
    reason = EXPECTED_FAILURES.get((rt.__name__, test))
    if reason is not None:
        err = errors(rt)
        refusals = (err.Fail, err.NotImplemented, err.InvalidGraph)
        request.applymarker(pytest.mark.xfail(reason=reason, raises=refusals, strict=True))
    model_path = os.path.join(test_dir, "model.onnx")
    model = onnx.load(model_path)
    sess = rt.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    input_names = graph_inputs(model)
    output_names = [o.name for o in model.graph.output]
    data_sets = sorted(glob.glob(os.path.join(test_dir, "test_data_set_*")))
    assert data_sets
    for data_set in data_sets:
        inputs = [read_value(p) for p in sorted(glob.glob(os.path.join(data_set, "input_*.pb")))]
        expected = [read_value(p) for p in sorted(glob.glob(os.path.join(data_set, "output_*.pb")))]
        outputs = sess.run(output_names, dict(zip(input_names, inputs)))
        assert len(outputs) == len(expected)
        for got, want in zip(outputs, expected):
            got, want = np.asarray(got), np.asarray(want)
            assert got.shape == want.shape
            if want.dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)
            else:
                np.testing.assert_array_equal(got, want)


LIGHT_MODELS = sorted(glob.glob(str(ONNX_DATA / "light" / "light_*.onnx")))
COMPARED_MODELS = LIGHT_MODELS + [str(BUNDLED_MODEL)]


@pytest.fixture
def compared_model(request, tmp_path) -> str:
    """A light model with its weights redrawn (written under tmp_path), or the bundled model."""
    path = request.param
    if os.path.basename(path).startswith("light_"):
        redrawn = tmp_path / os.path.basename(path)
        seed = LIGHT_MODELS.index(path) + 1
        onnx.save(redraw_weights(onnx.load(path), seed), str(redrawn))
        return str(redrawn)
    return path


def seeded_feed(sess, seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs for every input of the session (symbolic dims take 1)."""
    rng = np.random.default_rng(seed)
    feed = {}
    for inp in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        assert inp.type == "tensor(float)", f"{inp.name}: {inp.type}"
        feed[inp.name] = rng.standard_normal(shape).astype(np.float32)
    return feed


def relative_l2(got: np.ndarray, want: np.ndarray) -> float:
    scale = float(np.linalg.norm(want.astype(np.float64)))
    return float(np.linalg.norm(got.astype(np.float64) - want.astype(np.float64))) / max(scale, 1e-30)


@pytest.mark.parametrize("compared_model", COMPARED_MODELS, ids=[os.path.basename(p) for p in COMPARED_MODELS], indirect=True)
def test_model_matches_onnxruntime(compared_model):
    import onnxruntime
    import spillway

    model_path = compared_model
    ours = spillway.InferenceSession(model_path)
    theirs = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    assert [(i.name, i.shape, i.type) for i in ours.get_inputs()] == [(i.name, i.shape, i.type) for i in theirs.get_inputs()]
    assert [o.name for o in ours.get_outputs()] == [o.name for o in theirs.get_outputs()]
    feed = seeded_feed(theirs, 1)
    got = ours.run(None, feed)
    want = theirs.run(None, feed)
    # The outputs depend on the input (else the comparison checks little more than shapes).
    other = theirs.run(None, seeded_feed(theirs, 2))
    assert any(relative_l2(a, b) > 1e-6 for a, b in zip(want, other)), "outputs do not depend on the input"
    for g, w, o in zip(got, want, theirs.get_outputs()):
        assert g.dtype == w.dtype and g.shape == w.shape, o.name
        assert relative_l2(g, w) <= 1e-4, f"{o.name}: relative L2 error {relative_l2(g, w):.2e}"
