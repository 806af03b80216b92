"""Writes the ml_dtypes conversions that `tests/tests/low_precision_ml_dtypes.rs` checks
Spillway's float8/float4 conversions against (ml_dtypes writes the ONNX reference outputs).

Usage: low_precision_table.py OUT

OUT (little-endian): u32 N, then N float32 inputs (every float16 value, a stride over all
float32 bit patterns, dense random samples around the float8 range, and the exact midpoints
between neighbouring float8/float4 values with their float32 neighbours); then, for each of
E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, N codes without saturation (ml_dtypes' astype) and N codes
with saturation (the ONNX reference's clip-then-astype); then N float4 E2M1 codes; then, for
each of those five formats, the float32 bits of all 256 codes.
"""

import struct
import sys

import ml_dtypes as md
import numpy as np

FLOAT8 = [md.float8_e4m3fn, md.float8_e4m3fnuz, md.float8_e5m2, md.float8_e5m2fnuz]
ALL = FLOAT8 + [md.float4_e2m1fn]


def inputs() -> np.ndarray:
    rng = np.random.default_rng(20240917)
    parts = [np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)]
    parts.append(np.arange(0, 1 << 32, 65521, dtype=np.uint64).astype(np.uint32).view(np.float32))
    sign = rng.integers(0, 2, 400_000, dtype=np.uint32) << 31
    exp = rng.integers(100, 146, 400_000, dtype=np.uint32) << 23
    mant = rng.integers(0, 1 << 23, 400_000, dtype=np.uint32)
    parts.append((sign | exp | mant).view(np.float32))
    for t in ALL:
        codes = np.arange(256 if t in FLOAT8 else 16, dtype=np.uint8)
        v = codes.view(t).astype(np.float64)
        v = np.unique(v[np.isfinite(v)])
        mid = ((v[1:] + v[:-1]) / 2).astype(np.float32)
        ends = np.array([v[-1] * 1.0625, v[-1] * 1.125, -v[-1] * 1.0625], np.float32)
        for m in (mid, ends):
            parts += [m, np.nextafter(m, np.float32(np.inf)), np.nextafter(m, np.float32(-np.inf))]
    return np.concatenate(parts).astype(np.float32)


def main() -> None:
    x = inputs()
    with np.errstate(all="ignore"):
        blocks = [struct.pack("<I", x.size), x.tobytes()]
        for t in FLOAT8:
            info = md.finfo(t)
            blocks.append(x.astype(t).view(np.uint8).tobytes())
            sat = np.clip(x, np.float32(info.min), np.float32(info.max)).astype(t)
            blocks.append(sat.view(np.uint8).tobytes())
        blocks.append(x.astype(md.float4_e2m1fn).view(np.uint8).tobytes())
        for t in ALL:
            codes = np.arange(256, dtype=np.uint8)
            if t not in FLOAT8:
                codes = codes & 0x0F
            blocks.append(codes.view(t).astype(np.float32).view(np.uint32).tobytes())
    with open(sys.argv[1], "wb") as f:
        f.write(b"".join(blocks))


if __name__ == "__main__":
    main()
