#!/usr/bin/env python3
"""Loads every exported zoo model in onnxruntime, runs it, prints output shapes and timing.

For the detectors it also counts, on real photos (scikit-image samples), the boxes entering each
NonMaxSuppression node (by exposing the NMS score inputs as extra graph outputs) and the
detections coming out, and it runs every model with dynamic axes once more at a second input size.
Results go to models/zoo/check.json. Run with the zoo venv: `models/export.sh --check [--only ..]`.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import photos  # noqa: E402

ZOO = os.path.join(HERE, "zoo")
# Values for symbolic dimensions: (first run, second run at another size).
DIMS = {"batch": (1, 1), "seq": (128, 64), "dec_seq": (32, 8), "height": (480, 512), "width": (640, 512)}
DTYPES = {"float": np.float32, "int64": np.int64, "int32": np.int32}


def feeds(entry, run, rng):
    out = {}
    for i in entry["inputs"]:
        shape = [DIMS[d][run] if isinstance(d, str) else d for d in i["shape"]]
        dt = DTYPES[i["dtype"]]
        if "mask" in i["name"]:
            out[i["name"]] = np.ones(shape, dt)
        elif dt != np.float32:
            out[i["name"]] = rng.integers(0, 1000, shape).astype(dt)
        else:
            out[i["name"]] = rng.random(shape, dtype=np.float32)
    return out


def session(model_or_path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    so.log_severity_level = 3
    src = model_or_path if isinstance(model_or_path, str) else model_or_path.SerializeToString()
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def timed(sess, feed):
    t0 = time.perf_counter()
    outs = sess.run(None, feed)
    return outs, time.perf_counter() - t0


def _nms_score_inputs(graph, top_level):
    """Top-level value names holding the scores that enter each NonMaxSuppression node. torchvision
    puts NMS in the else branch of an If (`boxes.numel() == 0`), so from the node's scores input we
    follow first inputs back (Unsqueeze, Reshape...) to the value that comes from the outer graph."""
    found = []
    produced = {o: n for n in graph.node for o in n.output}
    for n in graph.node:
        if n.op_type == "NonMaxSuppression":
            name = n.input[1]
            while name in produced and name not in top_level:
                name = produced[name].input[0]
            found.append(name)
        for a in n.attribute:
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                found += _nms_score_inputs(g, top_level)
    return found


def nms_counts(path, entry):
    """Per photo: boxes into each NMS node, detections out, top scores."""
    m = onnx.load(path)
    top_level = {o for n in m.graph.node for o in n.output}
    names = _nms_score_inputs(m.graph, top_level)
    for n in names:
        m.graph.output.append(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None))
    sess = session(m)
    out_names = [o.name for o in sess.get_outputs()]
    res = {}
    for p in photos.CALIBRATION + photos.HELD_OUT:
        img = photos.photo(p).numpy()
        outs = dict(zip(out_names, sess.run(None, {entry["inputs"][0]["name"]: img})))
        scores = outs["scores"]
        res[p] = {
            "held_out": p in photos.HELD_OUT,
            "nms_inputs": [int(outs[n].shape[-1]) for n in names],
            "detections": int(scores.shape[0]),
            "score_max": round(float(scores.max()), 3) if scores.size else None,
            "detections_score_ge_0.5": int((scores >= 0.5).sum()),
            "labels": sorted({int(x) for x in outs["labels"]}),
        }
        print(f"    {p:10s} NMS in {res[p]['nms_inputs']}  detections {res[p]['detections']}"
              f"  (>=0.5: {res[p]['detections_score_ge_0.5']}, max {res[p]['score_max']})", flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="comma-separated model names")
    a = ap.parse_args()
    with open(os.path.join(ZOO, "manifest.json")) as f:
        entries = json.load(f)["models"]
    if a.only:
        keep = set(a.only.split(","))
        entries = [e for e in entries if e["name"] in keep]
    report_path = os.path.join(ZOO, "check.json")
    report = {}
    if os.path.exists(report_path):
        with open(report_path) as f:
            report = json.load(f)
    report["onnxruntime"] = ort.__version__
    report.setdefault("models", {})
    failed = []
    for e in entries:
        path = os.path.join(ZOO, e["file"])
        r = {}
        try:
            t0 = time.perf_counter()
            sess = session(path)
            r["load_seconds"] = round(time.perf_counter() - t0, 2)
            rng = np.random.default_rng(0)
            if e["inputs"][0]["name"] == "image":
                feed = {"image": photos.photo(photos.CALIBRATION[0]).numpy()}
            else:
                feed = feeds(e, 0, rng)
            outs, dt = timed(sess, feed)
            r["first_run_seconds"] = round(dt, 3)
            _, dt = timed(sess, feed)
            r["second_run_seconds"] = round(dt, 3)
            r["input_shapes"] = {k: list(v.shape) for k, v in feed.items()}
            r["output_shapes"] = {o.name: list(v.shape) for o, v in zip(sess.get_outputs(), outs)}
            named = dict(zip([o.name for o in sess.get_outputs()], outs))
            if "labels" in named and named["labels"].dtype != np.int64:
                raise ValueError(f"output 'labels' is {named['labels'].dtype}: outputs misnamed")
            r["outputs_finite"] = all(np.isfinite(v).all() for v in outs if v.dtype.kind == "f")
            print(f"[ok] {e['name']}: load {r['load_seconds']} s, run {r['second_run_seconds']} s, "
                  f"outputs {r['output_shapes']}", flush=True)
            if any(isinstance(d, str) and d != "batch" for i in e["inputs"] for d in i["shape"]):
                feed2 = feeds(e, 1, rng)
                outs2, dt = timed(sess, feed2)
                r["second_size"] = {"inputs": {k: list(v.shape) for k, v in feed2.items()},
                                    "outputs": {o.name: list(v.shape) for o, v in zip(sess.get_outputs(), outs2)},
                                    "seconds": round(dt, 3)}
                print(f"    second size {r['second_size']['inputs']} -> {r['second_size']['outputs']}", flush=True)
            if e["inputs"][0]["name"] == "image":
                r["counts"] = nms_counts(path, e)
        except Exception as ex:
            r["error"] = f"{type(ex).__name__}: {ex}"
            failed.append(e["name"])
            print(f"[FAILED] {e['name']}: {r['error']}", flush=True)
        report["models"][e["name"]] = r
        with open(report_path, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    print(f"{len(entries) - len(failed)} passed, {len(failed)} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
