#!/usr/bin/env python3
"""PyTorch's latency on the GPU for the issue's models: eager and CUDA Graph (sequential capture,
the Opara paper's baseline), batch 1, float32 with TF32 off (Spillway's default), random weights
and random inputs (never zeros). Timed with CUDA events around each forward after warm-up;
medians of 200 runs. Writes OUT/torch_baseline.md and OUT/torch_baseline.json.

    python3 scripts/torch_gpu_bench.py OUT_DIR [--runs N] [--models a,b]
"""
import argparse
import json
import os
import statistics

import torch

MODELS = {
    "googlenet": ("torchvision", "googlenet", 224),
    "inception_v3": ("torchvision", "inception_v3", 299),
    "resnet50": ("torchvision", "resnet50", 224),
    "nasnetalarge": ("timm", "nasnetalarge", 331),
}


def build(source, name):
    if source == "torchvision":
        import torchvision

        kwargs = {"weights": None}
        if name in ("googlenet", "inception_v3"):
            kwargs.update(aux_logits=False, init_weights=True)
        return getattr(torchvision.models, name)(**kwargs)
    import timm

    return timm.create_model(name, pretrained=False)


def time_ms(fn, runs, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    device = torch.device("cuda")
    rows = []
    for name in args.models.split(","):
        source, arch, size = MODELS[name]
        try:
            model = build(source, arch).eval().to(device)
        except Exception as e:  # a missing package is reported, not fatal
            rows.append({"model": name, "error": repr(e)})
            print(name, "skipped:", e)
            continue
        x = torch.randn(1, 3, size, size, device=device)
        with torch.inference_mode():
            eager_med, eager_min = time_ms(lambda: model(x), args.runs, 20)
        static_x = x.clone()
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.inference_mode(), torch.cuda.stream(stream):
            for _ in range(3):
                model(static_x)
        torch.cuda.current_stream().wait_stream(stream)
        with torch.inference_mode(), torch.cuda.graph(graph):
            static_y = model(static_x)
        graph_med, graph_min = time_ms(graph.replay, args.runs, 20)
        del static_y
        row = {
            "model": name,
            "input": [1, 3, size, size],
            "eager_ms_median": eager_med,
            "eager_ms_min": eager_min,
            "cuda_graph_ms_median": graph_med,
            "cuda_graph_ms_min": graph_min,
        }
        rows.append(row)
        print(f"{name:14s} eager {eager_med:7.3f} ms   cuda graph {graph_med:7.3f} ms")
        del model, graph
        torch.cuda.empty_cache()
    gpu = torch.cuda.get_device_name(0)
    meta = {
        "gpu": gpu,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "tf32": False,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "runs": args.runs,
    }
    with open(os.path.join(args.out, "torch_baseline.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=2)
    lines = [
        "# PyTorch on the GPU: eager and CUDA Graph (the peers of issue 7)",
        "",
        f"GPU {gpu}; torch {meta['torch']} (CUDA {meta['cuda']}, cuDNN {meta['cudnn']}); float32, "
        f"TF32 off, batch 1, random weights and inputs; median of {args.runs} forwards timed with "
        "CUDA events after 20 warm-ups. `python3 scripts/torch_gpu_bench.py OUT` (run by "
        "`scripts/gpu_run.sh`).",
        "",
        "| model | input | eager ms (median) | CUDA Graph ms (median) | eager / graph |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | | | | skipped: {r['error']} |")
            continue
        lines.append(
            f"| {r['model']} | {r['input']} | {r['eager_ms_median']:.3f} | "
            f"{r['cuda_graph_ms_median']:.3f} | {r['eager_ms_median'] / r['cuda_graph_ms_median']:.2f} |"
        )
    with open(os.path.join(args.out, "torch_baseline.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
