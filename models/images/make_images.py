"""Regenerates the committed test photos in this folder from scikit-image's bundled samples.

Each photo is resized to 640 x 480 (width x height, the size the detection zoo was exported and
calibrated at: see models/photos.py) with Pillow's bicubic filter and saved as a baseline JPEG,
lowering the quality until the file is at most 100 KB. Run with any Python that has scikit-image
and Pillow, e.g. the zoo's venv: `.venv-zoo/bin/python models/images/make_images.py`.
"""
import io
from pathlib import Path

import numpy as np
import skimage.data
from PIL import Image

WIDTH, HEIGHT = 640, 480
MAX_BYTES = 100_000
NAMES = ["astronaut", "coffee", "chelsea", "rocket"]
HERE = Path(__file__).resolve().parent


def encode(img: Image.Image) -> bytes:
    """The highest JPEG quality (from 90 down) whose file fits in MAX_BYTES."""
    for quality in range(90, 20, -5):
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=quality, optimize=True)
        if buf.tell() <= MAX_BYTES:
            return buf.getvalue()
    raise SystemExit("no JPEG quality fits the size limit")


def main() -> None:
    for name in NAMES:
        arr = getattr(skimage.data, name)()
        if arr.ndim == 2:
            arr = np.stack([arr] * 3, axis=-1)
        img = Image.fromarray(np.ascontiguousarray(arr[..., :3])).convert("RGB")
        img = img.resize((WIDTH, HEIGHT), Image.Resampling.BICUBIC)
        data = encode(img)
        (HERE / f"{name}.jpg").write_bytes(data)
        print(f"{name}.jpg {len(data)} bytes")


if __name__ == "__main__":
    main()
