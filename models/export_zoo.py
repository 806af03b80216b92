#!/usr/bin/env python3
"""Exports the Spillway model zoo to ONNX with seeded random weights.

Run through `models/export.sh` (it makes the pinned venv). Writes models/zoo/<name>.onnx and
models/zoo/manifest.json. No pretrained weights are downloaded: every model is built from its
library constructor with `weights=None` and initialized from torch.manual_seed(SEED), so re-exports
are byte-identical. See models/README.md for each model's provenance.

    python models/export_zoo.py [--only NAME[,NAME]] [--skip-existing] [--list]
"""
import argparse
import collections
import datetime
import hashlib
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass, field

import onnx
import torch
import torchvision
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import det_heads  # noqa: E402
import photos  # noqa: E402
from randwire import RandWire  # noqa: E402

SEED = 20261122
OPSET = 17
OUT_DIR = os.path.join(HERE, "zoo")
MANIFEST = os.path.join(OUT_DIR, "manifest.json")


@dataclass
class Export:
    """What torch.onnx.export needs for one model, plus notes for the manifest."""

    model: nn.Module
    args: tuple
    input_names: list
    output_names: list
    dynamic_axes: dict
    provenance: str
    extra: dict = field(default_factory=dict)


def classifier(ctor, size, provenance):
    def build():
        model = ctor().eval()
        x = torch.rand(1, 3, size, size)
        return Export(model, (x,), ["input"], ["logits"], {"input": {0: "batch"}, "logits": {0: "batch"}},
                      provenance)
    return build


def tv(name, **kw):
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


def randwire():
    model = RandWire(seed=SEED).eval()
    x = torch.rand(1, 3, 224, 224)
    edges = model.stage_edges()
    return Export(model, (x,), ["input"], ["logits"], {"input": {0: "batch"}, "logits": {0: "batch"}},
                  "spillway models/randwire.py: RandWire small regime (Xie et al. 2019), N=32, C=78, "
                  "WS(k=4, p=0.75) per stage, nodes ReLU-SepConv3x3-BN with sum aggregation",
                  {"stage_edges": [len(e) for e in edges], "graph_seed": SEED})


def nasnet():
    import timm
    model = timm.create_model("nasnetalarge", pretrained=False, num_classes=1000).eval()
    x = torch.rand(1, 3, 331, 331)
    return Export(model, (x,), ["input"], ["logits"], {"input": {0: "batch"}, "logits": {0: "batch"}},
                  "timm.create_model('nasnetalarge', pretrained=False)")


# --- transformers -----------------------------------------------------------------------------

SEQ = 128
DEC_SEQ = 32


class _Bert(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        out = self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)
        return out[0], out[1]


def bert():
    from transformers import BertConfig, BertModel
    cfg = BertConfig()  # bert-base: 12 layers, hidden 768, 12 heads, vocab 30522
    cfg._attn_implementation = "eager"
    model = _Bert(BertModel(cfg, add_pooling_layer=True)).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, SEQ))
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
           "last_hidden_state": {0: "batch", 1: "seq"}, "pooler_output": {0: "batch"}}
    return Export(model, (ids, mask), ["input_ids", "attention_mask"],
                  ["last_hidden_state", "pooler_output"], dyn,
                  "transformers.BertModel(BertConfig()) (bert-base-uncased sizes), random init")


def _t5():
    from transformers import T5Config, T5ForConditionalGeneration
    # t5-small's config.json numbers, written out (from_pretrained needs the hub).
    cfg = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6,
                   num_decoder_layers=6, num_heads=8, relative_attention_num_buckets=32,
                   relative_attention_max_distance=128, dropout_rate=0.1, layer_norm_epsilon=1e-6,
                   initializer_factor=1.0, feed_forward_proj="relu", is_encoder_decoder=True,
                   tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                   use_cache=False)
    cfg._attn_implementation = "eager"
    return T5ForConditionalGeneration(cfg).eval(), cfg


class _T5Encoder(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.encoder = m.encoder

    def forward(self, input_ids, attention_mask):
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]


class _T5Decoder(nn.Module):
    """One full (no KV cache) decoder pass plus the tied LM head, as in T5ForConditionalGeneration."""

    def __init__(self, m):
        super().__init__()
        self.decoder = m.decoder
        self.lm_head = m.lm_head
        self.scale = m.model_dim ** -0.5

    def forward(self, decoder_input_ids, encoder_hidden_states, encoder_attention_mask):
        h = self.decoder(input_ids=decoder_input_ids, encoder_hidden_states=encoder_hidden_states,
                         encoder_attention_mask=encoder_attention_mask, use_cache=False,
                         return_dict=False)[0]
        return self.lm_head(h * self.scale)


T5_PROV = ("transformers.T5ForConditionalGeneration(T5Config(<t5-small numbers>)), random init; "
           "encoder and decoder of the same seeded model")


def t5_encoder():
    m, cfg = _t5()
    ids = torch.randint(0, cfg.vocab_size, (1, SEQ))
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
           "last_hidden_state": {0: "batch", 1: "seq"}}
    return Export(_T5Encoder(m), (ids, mask), ["input_ids", "attention_mask"], ["last_hidden_state"],
                  dyn, T5_PROV)


def t5_decoder():
    m, cfg = _t5()
    ids = torch.randint(0, cfg.vocab_size, (1, DEC_SEQ))
    enc = torch.randn(1, SEQ, cfg.d_model)
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    dyn = {"decoder_input_ids": {0: "batch", 1: "dec_seq"},
           "encoder_hidden_states": {0: "batch", 1: "seq"},
           "encoder_attention_mask": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "dec_seq"}}
    return Export(_T5Decoder(m), (ids, enc, mask),
                  ["decoder_input_ids", "encoder_hidden_states", "encoder_attention_mask"], ["logits"],
                  dyn, T5_PROV)


# --- detection --------------------------------------------------------------------------------

def detection(name, n_active, fraction, masks=False):
    def build():
        ctor = getattr(torchvision.models.detection, name)
        model = ctor(weights=None, weights_backbone=None, num_classes=91).eval()
        calib = [photos.photo(p) for p in photos.CALIBRATION]
        info = det_heads.calibrate(name, model, calib, SEED, n_active, fraction)
        info["calibration_photos"] = photos.CALIBRATION
        # The order of the keys of torchvision's result dicts: SSD's and RetinaNet's differ from
        # the R-CNNs'.
        if name.startswith(("ssd", "retinanet")):
            outs = ["boxes", "scores", "labels"]
        else:
            outs = ["boxes", "labels", "scores"] + (["masks"] if masks else [])
        dyn = {"image": {1: "height", 2: "width"}}
        dyn.update({o: {0: "detections"} for o in outs})
        example = photos.photo(photos.CALIBRATION[0])
        return Export(model, ([example],), ["image"], outs, dyn,
                      f"torchvision.models.detection.{name}(weights=None, weights_backbone=None, "
                      "num_classes=91), heads re-initialized by models/det_heads.py",
                      {"head_init": info})
    return build


# Small and fast first, the big ones last.
MODELS = collections.OrderedDict([
    ("squeezenet1_1", classifier(tv("squeezenet1_1"), 224, "torchvision.models.squeezenet1_1(weights=None)")),
    ("googlenet", classifier(tv("googlenet", aux_logits=False, init_weights=True), 224,
                             "torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)")),
    ("resnet50", classifier(tv("resnet50"), 224, "torchvision.models.resnet50(weights=None)")),
    ("randwire", randwire),
    ("inception_v3", classifier(tv("inception_v3", aux_logits=False, init_weights=True), 299,
                                "torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)")),
    ("bert_base", bert),
    ("t5_small_encoder", t5_encoder),
    ("t5_small_decoder", t5_decoder),
    ("ssdlite320_mobilenet_v3_large", detection("ssdlite320_mobilenet_v3_large", 6, 0.01)),
    ("fasterrcnn_mobilenet_v3_large_320_fpn", detection("fasterrcnn_mobilenet_v3_large_320_fpn", 6, 0.08)),
    ("ssd300_vgg16", detection("ssd300_vgg16", 6, 0.004)),
    ("retinanet_resnet50_fpn", detection("retinanet_resnet50_fpn", 6, 0.0005)),
    ("fasterrcnn_resnet50_fpn", detection("fasterrcnn_resnet50_fpn", 6, 0.03)),
    ("maskrcnn_resnet50_fpn", detection("maskrcnn_resnet50_fpn", 6, 0.03, masks=True)),
    ("nasnetalarge", nasnet),
])


def _value_info(v):
    t = v.type.tensor_type
    dims = [d.dim_param if d.dim_param else d.dim_value for d in t.shape.dim]
    return {"name": v.name, "shape": dims, "dtype": onnx.TensorProto.DataType.Name(t.elem_type).lower()}


def _ops(graph, hist):
    n = 0
    for node in graph.node:
        n += 1
        hist[node.op_type] += 1
        for a in node.attribute:
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                n += _ops(g, hist)
    return n


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def describe(name, path, exp, seconds):
    m = onnx.load(path)
    hist = collections.Counter()
    total = _ops(m.graph, hist)
    inits = {i.name for i in m.graph.initializer}
    versions = {"torch": torch.__version__, "torchvision": torchvision.__version__, "onnx": onnx.__version__}
    for mod in ("timm", "transformers"):
        try:
            versions[mod] = __import__(mod).__version__
        except ImportError:
            pass
    return {
        "name": name,
        "file": os.path.basename(path),
        "bytes": os.path.getsize(path),
        "sha256": _sha256(path),
        "provenance": exp.provenance,
        "weights": f"seeded random (torch.manual_seed({SEED})); no pretrained weights",
        "parameters": int(sum(p.numel() for p in exp.model.parameters())),
        "inputs": [_value_info(v) for v in m.graph.input if v.name not in inits],
        "outputs": [_value_info(v) for v in m.graph.output],
        "opset": OPSET,
        "seed": SEED,
        "exporter": "torch.onnx.export(dynamo=False) (TorchScript)",
        "exported_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "export_seconds": round(seconds, 1),
        "versions": versions,
        "node_count": len(m.graph.node),
        "node_count_with_subgraphs": total,
        "op_histogram": dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))),
        **exp.extra,
    }


def load_manifest():
    if os.path.exists(MANIFEST):
        with open(MANIFEST) as f:
            return {e["name"]: e for e in json.load(f)["models"]}
    return {}


def save_manifest(entries):
    ordered = [entries[n] for n in MODELS if n in entries]
    with open(MANIFEST, "w") as f:
        json.dump({"seed": SEED, "opset": OPSET, "models": ordered}, f, indent=1)
        f.write("\n")


def export_one(name):
    torch.manual_seed(SEED)
    t0 = time.time()
    exp = MODELS[name]()
    path = os.path.join(OUT_DIR, f"{name}.onnx")
    tmp = path + ".tmp"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(exp.model, exp.args, tmp, opset_version=OPSET, dynamo=False,
                          input_names=exp.input_names, output_names=exp.output_names,
                          dynamic_axes=exp.dynamic_axes, do_constant_folding=True)
    os.replace(tmp, path)
    return describe(name, path, exp, time.time() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--skip-existing", action="store_true", help="keep models whose .onnx exists")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    a = ap.parse_args()
    if a.list:
        print("\n".join(MODELS))
        return 0
    names = list(MODELS)
    if a.only:
        names = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in MODELS]
        if unknown:
            ap.error(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(MODELS)}")
    os.makedirs(OUT_DIR, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    entries = load_manifest()
    failed = {}
    for name in names:
        path = os.path.join(OUT_DIR, f"{name}.onnx")
        if a.skip_existing and os.path.exists(path) and name in entries:
            print(f"[skip] {name}: {path} exists", flush=True)
            continue
        print(f"[export] {name} ...", flush=True)
        try:
            entries[name] = export_one(name)
        except Exception as e:  # report and go on with the other models
            failed[name] = f"{type(e).__name__}: {e}"
            print(f"[FAILED] {name}: {failed[name]}", flush=True)
            continue
        e = entries[name]
        print(f"[ok] {name}: {e['bytes'] / 2**20:.1f} MiB, {e['node_count']} nodes, "
              f"{e['export_seconds']} s", flush=True)
        save_manifest(entries)
    if failed:
        print(f"{len(failed)} model(s) failed: {', '.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
