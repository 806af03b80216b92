"""The overhead of spillway's Python front-end: `spillway.InferenceSession.run` against the
engine's own `Session::run` on the same session and inputs, in one process.

    .venv/bin/python python/bench/overhead.py [MODEL.onnx ...] [--repeats N]

Both loops run alternately in rounds (so that machine noise falls on both); the figure is the
ratio of medians. The Rust loop clones the prepared input tensors (reference counted, no copy of
the elements) and drops the outputs; the Python loop converts the NumPy inputs (one copy into
the engine's tensors) and hands the outputs to NumPy (no copy).
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import numpy as np
import spillway

ROOT = pathlib.Path(__file__).resolve().parents[2]


def feed_for(sess: spillway.InferenceSession) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
        for i in sess.get_inputs()
    }


def measure(path: str, repeats: int, rounds: int) -> tuple[float, float]:
    sess = spillway.InferenceSession(path)
    feed = feed_for(sess)
    for _ in range(3):
        sess.run(None, feed)
    native: list[float] = []
    python: list[float] = []
    for _ in range(rounds):
        native += sess._native._time_native_runs(feed, repeats)
        for _ in range(repeats):
            start = time.perf_counter()
            sess.run(None, feed)
            python.append(time.perf_counter() - start)
    return statistics.median(native), statistics.median(python)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=[str(ROOT / "models/small/inception_block.onnx")])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("| model | Session::run (ms, median) | InferenceSession.run (ms, median) | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for path in args.models:
        native, python = measure(path, args.repeats, args.rounds)
        print(f"| {pathlib.Path(path).name} | {native * 1e3:.3f} | {python * 1e3:.3f} | {python / native:.3f} |")


if __name__ == "__main__":
    main()
