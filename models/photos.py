"""Real photos for calibrating and measuring the detectors: scikit-image's bundled samples,
resized to the zoo's detection input size (3 x 480 x 640, float32 in [0, 1], RGB)."""
import numpy as np
import skimage.data
import torch
import torch.nn.functional as F

HEIGHT, WIDTH = 480, 640
# Used to calibrate the detection heads before export (all of scikit-image's bundled colour photos).
CALIBRATION = ["astronaut", "coffee", "chelsea", "rocket"]
# Not seen by the calibration (the grey cameraman photo, as three equal channels): measured too.
HELD_OUT = ["camera"]


def photo(name):
    """One scikit-image sample photo as a 3x480x640 float32 tensor in [0, 1]."""
    img = getattr(skimage.data, name)()
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    t = torch.from_numpy(np.ascontiguousarray(img[..., :3])).permute(2, 0, 1).float() / 255.0
    t = F.interpolate(t[None], size=(HEIGHT, WIDTH), mode="bilinear", align_corners=False)[0]
    return t.contiguous()
