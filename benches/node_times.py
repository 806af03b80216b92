"""Where Spillway and ONNX Runtime part ways in time: per-node and per-op-type medians.

Runs MODEL in rounds, engine after engine: `spillway run MODEL --repeat N --trace T.json` (each
node's time in real runs, not alone) and ONNX Runtime's sequential executor with its profiler
on (`enable_profiling`: each kernel's time), both with the given number of threads. Prints the
per-op-type totals side by side and the nodes, matched by name, where Spillway loses most.
ORT names its optimized nodes after their outputs (`/conv1/Relu_output_0_nchwc`), so an ORT node
is matched to ours through the model: its output's producer, or that producer's first input's
producer and so on back through the nodes fused into it, until a node Spillway timed; unmatched
nodes appear only in the op-type totals.

Both engines get the same seeded inputs (floats uniform in [0, 1); int64 inputs: token ids in
[0, 1000), masks all ones), passed to Spillway as .npy
files: detection models' post-processing costs depend on how many boxes pass their thresholds,
so different inputs would time different work. Shapes come from `check.json` beside the model
(the zoo's verified shapes, e.g. 480x640 images) when it lists the model, else `--dim` (default
1) for every symbolic dimension.

Usage (from the repository root, after `cargo build --release -p spillway`):
    .venv/bin/python benches/node_times.py MODEL.onnx --spillway target/release/spillway \
        [--threads 1] [--rounds 3] [--repeat 10] [--top 25] [--pause-ms 0] [--json OUT.json]
"""

import argparse
import collections
import glob
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort


def make_feeds(model, dim):
    """Seeded inputs for `model`: shapes from the zoo's check.json when it lists the model."""
    graph = onnx.load(model, load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}
    check = os.path.join(os.path.dirname(model), "check.json")
    name = os.path.splitext(os.path.basename(model))[0]
    checked = {}
    if os.path.exists(check):
        with open(check) as f:
            checked = json.load(f).get("models", {}).get(name, {}).get("input_shapes", {})
    rng = np.random.default_rng(20261122)
    feeds = {}
    for i in graph.input:
        if i.name in initializers:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else dim for d in i.type.tensor_type.shape.dim]
        shape = checked.get(i.name, dims)
        if i.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            # Token ids in [0, 1000) and masks all ones, as spillway-bench feeds them.
            feeds[i.name] = (np.ones(shape, dtype=np.int64) if "mask" in i.name
                             else rng.integers(0, 1000, shape, dtype=np.int64))
        else:
            feeds[i.name] = rng.random(shape, dtype=np.float32)
    return feeds


def spillway_round(binary, model, repeat, threads, trace, inputs, pause_ms):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    given = [arg for name, path in inputs.items() for arg in ("--input", f"{name}={path}")]
    subprocess.run([binary, "run", model, "--repeat", str(repeat), "--trace", trace,
                    "--pause-ms", str(pause_ms)] + given,
                   check=True, env=env, stdout=subprocess.DEVNULL)
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    return [(e["name"], e["cat"], e["dur"]) for e in events if e.get("ph") == "X"]


def ort_round(model, repeat, threads, prefix, feeds, pause_ms):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.enable_profiling = True
    options.profile_file_prefix = prefix
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    session.run(None, feeds)  # warm-up, as `spillway run` does
    for _ in range(repeat):
        time.sleep(pause_ms / 1e3)
        session.run(None, feeds)
    path = session.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    runs = [e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"]
    first_timed = sorted(e["ts"] for e in runs)[1] if len(runs) > 1 else 0
    out = []
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time") or e["ts"] < first_timed:
            continue
        out.append((e["name"][: -len("_kernel_time")], e["args"].get("op_name", "?"), e["dur"]))
    return out


def ort_to_ours(model, theirs, ours):
    """ORT node name -> our node name: back from the ORT node's output through the fused nodes."""
    graph = onnx.load(model, load_external_data=False).graph
    producer = {o: n for n in graph.node for o in n.output}
    pairs = {}
    for name in theirs:
        tensor = name.removesuffix("_nchwc")
        node = producer.get(tensor)
        if node is None and name in ours:
            pairs[name] = name
        while node is not None:
            if node.name in ours:
                pairs[name] = node.name
                break
            node = producer.get(node.input[0]) if node.input else None
    return pairs


def medians(events, runs):
    by_name = collections.defaultdict(list)
    op_of = {}
    for name, op, dur in events:
        by_name[name].append(dur)
        op_of[name] = op
    # A node runs once per run: its per-run time is the median of its samples.
    return {n: statistics.median(d) for n, d in by_name.items()}, op_of


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--spillway", default="target/release/spillway")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--dim", type=int, default=1,
                        help="size of symbolic dimensions the zoo's check.json does not fix")
    parser.add_argument("--pause-ms", type=int, default=0,
                        help="sleep this long before every timed run (spillway-bench pauses 100)")
    parser.add_argument("--json", help="also write the per-node medians and the pairs here")
    args = parser.parse_args()
    ours, theirs = [], []
    feeds = make_feeds(args.model, args.dim)
    print("inputs:", ", ".join(f"{n} {list(v.shape)}" for n, v in feeds.items()))
    with tempfile.TemporaryDirectory() as tmp:
        inputs = {}
        for i, (name, value) in enumerate(feeds.items()):
            inputs[name] = os.path.join(tmp, f"input{i}.npy")
            np.save(inputs[name], value)
        for r in range(args.rounds):
            ours += spillway_round(args.spillway, args.model, args.repeat, args.threads,
                                   os.path.join(tmp, "trace.json"), inputs, args.pause_ms)
            theirs += ort_round(args.model, args.repeat, args.threads, os.path.join(tmp, "ort"),
                                feeds, args.pause_ms)
        for leftover in glob.glob(os.path.join(tmp, "ort*")):
            os.remove(leftover)
    n = args.rounds * args.repeat
    ours_t, ours_op = medians(ours, n)
    theirs_t, theirs_op = medians(theirs, n)

    def by_op(times, op_of):
        totals = collections.Counter()
        for name, t in times.items():
            totals[op_of[name]] += t
        return totals

    ours_ops, theirs_ops = by_op(ours_t, ours_op), by_op(theirs_t, theirs_op)
    print(f"{args.model}, {args.threads} thread(s), {n} runs each; sums of per-node medians (ms)")
    print(f"  spillway {sum(ours_t.values()) / 1e3:8.2f}   ort {sum(theirs_t.values()) / 1e3:8.2f}")
    print("\nby op type (ms)")
    for op in sorted(set(ours_ops) | set(theirs_ops), key=lambda o: -max(ours_ops[o], theirs_ops[o])):
        print(f"  {op:<24} spillway {ours_ops[op] / 1e3:8.2f}   ort {theirs_ops[op] / 1e3:8.2f}")
    pairs = [(b, a) for a, b in ort_to_ours(args.model, theirs_t, ours_t).items()]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "spillway": ours_t, "ort": theirs_t,
                       "op": ours_op, "pairs": pairs}, f, indent=1)
    matched = sorted(((ours_t[a] - theirs_t[b], a, b) for a, b in pairs), reverse=True)
    print(f"\nnodes matched: {len(matched)} of {len(ours_t)} (ours) / {len(theirs_t)} (ort);"
          f" where spillway loses most (us)")
    for diff, a, b in matched[: args.top]:
        print(f"  {a:<48} {ours_op[a]:<10} spillway {ours_t[a]:9.1f}  ort {theirs_t[b]:9.1f}"
              f"  ({ours_t[a] / max(theirs_t[b], 1e-9):.2f}x)")


if __name__ == "__main__":
    main()
