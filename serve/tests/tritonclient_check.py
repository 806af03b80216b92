"""Drives a running `spillway serve` with NVIDIA's `tritonclient` (HTTP and gRPC, JSON and
binary tensors) and writes what it sent and received as JSON for the Rust test
(serve/tests/tritonclient.rs) to compare with a direct `Session::run`.

Usage: tritonclient_check.py --http HOST:PORT --grpc HOST:PORT --out RESULT.json

Models expected: `inception_block` (input `input` FP32 [N,3,64,64], output `probabilities`)
and `dtypes` (`x_<t>` -> Identity -> `y_<t>` for the datatypes below: every one the
protocol has but BF16, which tritonclient sends only as binary data).
Exits non-zero, with the reason on stderr, when anything the protocol promises does not hold.
"""

import argparse
import json
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

# name suffix -> (protocol datatype, numpy dtype)
DTYPES = {
    "f32": ("FP32", np.float32),
    "f16": ("FP16", np.float16),
    "f64": ("FP64", np.float64),
    "i8": ("INT8", np.int8),
    "i16": ("INT16", np.int16),
    "i32": ("INT32", np.int32),
    "i64": ("INT64", np.int64),
    "u8": ("UINT8", np.uint8),
    "u16": ("UINT16", np.uint16),
    "u32": ("UINT32", np.uint32),
    "u64": ("UINT64", np.uint64),
    "bool": ("BOOL", np.bool_),
    "str": ("BYTES", np.object_),
}


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def make_inputs(rng):
    image = rng.random((2, 3, 64, 64), dtype=np.float32)
    typed = {}
    for suffix, (dt, np_dtype) in DTYPES.items():
        if dt == "BYTES":
            arr = np.array([[b"a", b"bc", "d\u00e9f".encode()], [b"", b"xyz", b"0"]], dtype=np.object_)
        elif dt == "BOOL":
            arr = rng.random((2, 3)) > 0.5
        elif np.issubdtype(np_dtype, np.floating):
            arr = (rng.standard_normal((2, 3)) * 10).astype(np_dtype)
        else:
            info = np.iinfo(np_dtype)
            arr = rng.integers(max(info.min, -1000), min(info.max, 1000), size=(2, 3)).astype(np_dtype)
            arr[0, 0] = info.max  # the extremes travel exactly
            arr[0, 1] = info.min
        typed["x_" + suffix] = (dt, arr)
    return image, typed


def to_json(dt, arr):
    flat = arr.flatten()
    if dt == "BYTES":
        data = [x.decode() if isinstance(x, bytes) else str(x) for x in flat]
    else:
        data = [x.item() for x in flat]
    return {"datatype": dt, "shape": list(arr.shape), "data": data}


def http_infer(client, model, inputs, outputs, binary):
    ins = []
    for name, (dt, arr) in inputs.items():
        i = httpclient.InferInput(name, list(arr.shape), dt)
        i.set_data_from_numpy(arr, binary_data=binary)
        ins.append(i)
    outs = [httpclient.InferRequestedOutput(o, binary_data=binary) for o in outputs]
    r = client.infer(model, ins, outputs=outs, request_id="req-http")
    check(r.get_response()["id"] == "req-http", "HTTP: the response carries the request id")
    got = {}
    for o in outputs:
        meta = r.get_output(o)
        got[o] = to_json(meta["datatype"], r.as_numpy(o))
    return got


def grpc_infer(client, model, inputs, outputs):
    ins = []
    for name, (dt, arr) in inputs.items():
        i = grpcclient.InferInput(name, list(arr.shape), dt)
        i.set_data_from_numpy(arr)
        ins.append(i)
    outs = [grpcclient.InferRequestedOutput(o) for o in outputs]
    r = client.infer(model, ins, outputs=outs, request_id="req-grpc")
    check(r.get_response().id == "req-grpc", "gRPC: the response carries the request id")
    got = {}
    for o in outputs:
        meta = r.get_output(o)
        got[o] = to_json(meta.datatype, r.as_numpy(o))
    return got


def expect_error(what, call, status):
    try:
        call()
    except InferenceServerException as e:
        check(str(e.status()) == status, f"{what}: status {e.status()!r}, expected {status!r} ({e})")
        return str(e.status())
    raise AssertionError(f"{what}: no error")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http", required=True)
    ap.add_argument("--grpc", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    rng = np.random.default_rng(7)
    image, typed = make_inputs(rng)
    image_inputs = {"input": ("FP32", image)}
    # FP16 and BYTES also travel as JSON; every datatype travels binary and over gRPC.
    results = {}
    errors = {}

    h = httpclient.InferenceServerClient(a.http)
    check(h.is_server_live(), "HTTP: server live")
    check(h.is_server_ready(), "HTTP: server ready")
    check(h.is_model_ready("inception_block"), "HTTP: model ready")
    check(not h.is_model_ready("no_such_model"), "HTTP: an unknown model is not ready")
    meta = h.get_server_metadata()
    check(meta["name"] == "spillway", f"HTTP: server metadata {meta}")
    check("binary_tensor_data" in meta["extensions"], f"HTTP: extensions {meta}")
    mm = h.get_model_metadata("inception_block")
    check(mm["inputs"][0] == {"name": "input", "datatype": "FP32", "shape": [-1, 3, 64, 64]}, f"HTTP: model metadata {mm}")
    check(mm["outputs"][0]["name"] == "probabilities", f"HTTP: model metadata {mm}")
    cfg = h.get_model_config("inception_block")
    check(cfg["input"][0]["data_type"] == "TYPE_FP32", f"HTTP: model config {cfg}")
    check(cfg["instance_group"][0]["count"] == 2, f"HTTP: model config {cfg}")

    typed_outputs = ["y_" + s for s in DTYPES]
    for binary in (False, True):
        key = "http_binary" if binary else "http_json"
        results[key] = {
            "inception_block": http_infer(h, "inception_block", image_inputs, ["probabilities"], binary),
            "dtypes": http_infer(h, "dtypes", typed, typed_outputs, binary),
        }

    errors["http_unknown_model"] = expect_error(
        "HTTP unknown model", lambda: http_infer(h, "no_such_model", image_inputs, ["probabilities"], True), "404"
    )
    bad = {"input": ("FP32", image[:, :2])}
    errors["http_wrong_shape"] = expect_error(
        "HTTP wrong shape", lambda: http_infer(h, "inception_block", bad, ["probabilities"], True), "400"
    )
    errors["http_expired"] = expect_error(
        "HTTP expired deadline",
        lambda: h.infer("inception_block", [_http_input(image)], timeout=1),
        "504",
    )

    g = grpcclient.InferenceServerClient(a.grpc)
    check(g.is_server_live(), "gRPC: server live")
    check(g.is_server_ready(), "gRPC: server ready")
    check(g.is_model_ready("dtypes"), "gRPC: model ready")
    gm = g.get_model_metadata("dtypes", as_json=True)
    check(gm["name"] == "dtypes" and len(gm["inputs"]) == len(DTYPES), f"gRPC: model metadata {gm}")
    sm = g.get_server_metadata(as_json=True)
    check(sm["name"] == "spillway", f"gRPC: server metadata {sm}")
    results["grpc"] = {
        "inception_block": grpc_infer(g, "inception_block", image_inputs, ["probabilities"]),
        "dtypes": grpc_infer(g, "dtypes", typed, typed_outputs),
    }
    errors["grpc_unknown_model"] = expect_error(
        "gRPC unknown model",
        lambda: grpc_infer(g, "no_such_model", image_inputs, ["probabilities"]),
        "StatusCode.NOT_FOUND",
    )
    errors["grpc_wrong_dtype"] = expect_error(
        "gRPC wrong datatype",
        lambda: grpc_infer(g, "inception_block", {"input": ("FP64", image.astype(np.float64))}, ["probabilities"]),
        "StatusCode.INVALID_ARGUMENT",
    )
    errors["grpc_expired"] = expect_error(
        "gRPC expired deadline",
        lambda: g.infer("inception_block", [_grpc_input(image)], timeout=1),
        "StatusCode.DEADLINE_EXCEEDED",
    )

    sent = {"inception_block": {"input": to_json("FP32", image)}, "dtypes": {n: to_json(dt, arr) for n, (dt, arr) in typed.items()}}
    with open(a.out, "w") as f:
        json.dump({"inputs": sent, "results": results, "errors": errors}, f)
    print(f"tritonclient: {sum(len(r) for r in results.values())} inferences over 3 paths, {len(errors)} error checks: ok")


def _http_input(image):
    i = httpclient.InferInput("input", list(image.shape), "FP32")
    i.set_data_from_numpy(image, binary_data=True)
    return i


def _grpc_input(image):
    i = grpcclient.InferInput("input", list(image.shape), "FP32")
    i.set_data_from_numpy(image)
    return i


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"tritonclient check failed: {e}", file=sys.stderr)
        sys.exit(1)
