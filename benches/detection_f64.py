"""Which engine is nearer the exact result: the zoo's detectors in float64 as the reference.

Where Spillway and ONNX Runtime disagree by a little more than the detection check's tolerance
(scores 1e-4, boxes 1e-3 relative), neither float32 result is the right one. This study rebuilds
each detector in PyTorch exactly as `models/export_zoo.py` does (same seed, same head
calibration: the exported files are byte-deterministic, so these are the same weights), runs it
in float64 on each photo, and measures four float32 results against it on the same input tensor:

- Spillway (`spillway run --output-dir`, one thread),
- ONNX Runtime with all graph optimizations and without any (one thread each),
- PyTorch itself in float32.

Detections are matched to the float64 ones greedily, best reference score first: same label,
highest IoU, IoU >= 0.5. Reported per engine: detections (engine / reference), unmatched ones
on either side, the largest score difference and box difference (relative, as in the check:
|a - b| / max(|b|, 1)) over the matched pairs, and for Mask R-CNN the smallest mask IoU
(binarized at 0.5).

Usage (from the repository root, after `models/export.sh` and `cargo build --release`):
    .venv-zoo/bin/python benches/detection_f64.py [--only a,b] [--photos a,b] \
        [--spillway target/release/spillway] [--out benches/results]
"""

import argparse
import copy
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "models"))
import export_zoo  # noqa: E402  (the zoo's own builders: same seed, same heads)

DETECTORS = [
    "ssdlite320_mobilenet_v3_large",
    "fasterrcnn_mobilenet_v3_large_320_fpn",
    "ssd300_vgg16",
    "retinanet_resnet50_fpn",
    "fasterrcnn_resnet50_fpn",
    "maskrcnn_resnet50_fpn",
]
MATCH_IOU = 0.5
SCORE_TOLERANCE = 1e-4
BOX_TOLERANCE = 1e-3
MASK_IOU = 0.99


def load_photo(path):
    """The photo as the detection check reads it: 3xHxW float32 in [0, 1], RGB."""
    img = np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255.0
    return np.ascontiguousarray(img.transpose(2, 0, 1))


def as_dict(names, arrays):
    """One engine's detections by output name, masks binarized at 0.5."""
    d = {n: np.asarray(a) for n, a in zip(names, arrays)}
    if "masks" in d:
        d["masks"] = d["masks"] > 0.5
    return d


def torch_run(model, image, dtype):
    with torch.no_grad():
        out = model([torch.from_numpy(image).to(dtype)])[0]
    return as_dict(out.keys(), [v.double() if v.is_floating_point() else v for v in out.values()])


def spillway_run(binary, model_path, image, names):
    with tempfile.TemporaryDirectory() as tmp:
        inp = os.path.join(tmp, "image.npy")
        np.save(inp, image)
        out = os.path.join(tmp, "out")
        env = dict(os.environ, RAYON_NUM_THREADS="1")
        subprocess.run([binary, "run", model_path, "--input", f"image={inp}", "--repeat", "1",
                        "--output-dir", out], check=True, env=env, stdout=subprocess.DEVNULL)
        return as_dict(names, [np.load(os.path.join(out, f"{n}.npy")) for n in names])


def ort_session(path, optimize):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def iou(a, b):
    lt = np.maximum(a[:2], b[:2])
    rb = np.minimum(a[2:], b[2:])
    inter = np.prod(np.clip(rb - lt, 0, None))
    area = lambda x: np.prod(np.clip(x[2:] - x[:2], 0, None))  # noqa: E731
    union = area(a) + area(b) - inter
    return inter / union if union > 0 else 0.0


def against(ref, got):
    """Greedy one-to-one matching of `got` to `ref` (best reference score first)."""
    order = np.argsort(-ref["scores"], kind="stable")
    free = set(range(len(got["scores"])))
    score_d, box_d, mask_iou, unmatched = 0.0, 0.0, 1.0, 0
    for i in order:
        cands = [(iou(ref["boxes"][i], got["boxes"][j]), j) for j in free
                 if got["labels"][j] == ref["labels"][i]]
        best = max(cands, default=(0.0, None))
        if best[0] < MATCH_IOU:
            unmatched += 1
            continue
        j = best[1]
        free.discard(j)
        score_d = max(score_d, abs(float(got["scores"][j]) - float(ref["scores"][i])))
        scale = np.maximum(np.abs(ref["boxes"][i]), 1.0)
        box_d = max(box_d, float(np.max(np.abs(got["boxes"][j] - ref["boxes"][i]) / scale)))
        if "masks" in ref:
            a, b = ref["masks"][i], got["masks"][j]
            union = np.logical_or(a, b).sum()
            mask_iou = min(mask_iou, np.logical_and(a, b).sum() / union if union else 1.0)
    row = {"count": len(got["scores"]), "ref_count": len(ref["scores"]), "unmatched_ref": unmatched,
           "unmatched": len(free), "max_score_diff": score_d, "max_box_rel": box_d}
    if "masks" in ref:
        row["min_mask_iou"] = float(mask_iou)
    row["within_check"] = (unmatched == 0 and not free and score_d <= SCORE_TOLERANCE
                           and box_d <= BOX_TOLERANCE and row.get("min_mask_iou", 1.0) >= MASK_IOU)
    return row


def fmt(row):
    s = f"{row['count']}/{row['ref_count']}"
    if row["unmatched_ref"] or row["unmatched"]:
        s += f" (unmatched {row['unmatched']}/{row['unmatched_ref']})"
    s += f", score {row['max_score_diff']:.1e}, box {row['max_box_rel']:.1e}"
    if "min_mask_iou" in row:
        s += f", mask IoU {row['min_mask_iou']:.3f}"
    return s + (" ✓" if row["within_check"] else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated detector names")
    ap.add_argument("--photos", help="comma-separated photo stems (default: all of models/images)")
    ap.add_argument("--spillway", default=os.path.join(ROOT, "target/release/spillway"))
    ap.add_argument("--zoo", default=os.path.join(ROOT, "models/zoo"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    models = a.only.split(",") if a.only else DETECTORS
    img_dir = os.path.join(ROOT, "models/images")
    photos = sorted(f for f in os.listdir(img_dir) if f.endswith((".jpg", ".png")))
    if a.photos:
        want = a.photos.split(",")
        photos = [p for p in photos if os.path.splitext(p)[0] in want]
    torch.set_num_threads(1)
    engines = ["spillway", "ort", "ort_unoptimized", "torch_f32"]
    rows = []
    for name in models:
        path = os.path.join(a.zoo, f"{name}.onnx")
        if not os.path.exists(path):
            print(f"{name}: not present at {path}", flush=True)
            continue
        print(f"{name}: rebuilding (seed {export_zoo.SEED})", flush=True)
        torch.manual_seed(export_zoo.SEED)
        exp = export_zoo.MODELS[name]()
        names = exp.output_names
        model32 = exp.model.eval()
        model64 = copy.deepcopy(model32).double().eval()
        sessions = {"ort": ort_session(path, True), "ort_unoptimized": ort_session(path, False)}
        for photo in photos:
            image = load_photo(os.path.join(img_dir, photo))
            ref = torch_run(model64, image, torch.float64)
            got = {
                "spillway": spillway_run(a.spillway, path, image, names),
                "ort": as_dict(names, sessions["ort"].run(names, {"image": image})),
                "ort_unoptimized": as_dict(names, sessions["ort_unoptimized"].run(names, {"image": image})),
                "torch_f32": torch_run(model32, image, torch.float32),
            }
            row = {"model": name, "photo": os.path.splitext(photo)[0]}
            row.update({e: against(ref, got[e]) for e in engines})
            rows.append(row)
            print(f"{name} {row['photo']}: " + "; ".join(f"{e} {fmt(row[e])}" for e in engines), flush=True)
    date = datetime.date.today().isoformat()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    md = [f"# Detections against a float64 reference ({date})", "",
          f"`.venv-zoo/bin/python benches/detection_f64.py` on {cpu}. Each detector rebuilt in "
          "PyTorch as the zoo exports it and run in float64 on the same input tensor; each float32 "
          "engine's detections matched to those (same label, IoU >= 0.5, best reference score "
          "first). Cells: detections engine/reference, largest score difference, largest box "
          "difference (relative), smallest mask IoU; ✓ where the detection check's tolerances "
          "(score 1e-4, box 1e-3, mask IoU 0.99, nothing unmatched) hold against float64.", "",
          "| model | photo | " + " | ".join(engines) + " |", "|---|---|" + "---|" * len(engines)]
    for r in rows:
        md.append(f"| {r['model']} | {r['photo']} | " + " | ".join(fmt(r[e]) for e in engines) + " |")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, f"detection-f64-{date}.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(a.out, f"detection-f64-{date}.json"), "w") as f:
        json.dump({"date": date, "cpu": cpu, "rows": rows}, f, indent=1)
    print("\n".join(md))


if __name__ == "__main__":
    main()
