"""Realistic initialization of randomly initialized torchvision detection heads.

With random weights every class score of a detector is about the same (about 1/91 after a
softmax), so nearly every (anchor or proposal, class) pair passes the score threshold and the
post-processing sorts and suppresses tens of thousands of boxes, which no trained detector does.
This module re-initializes the last classification layer of each head so that, as in a trained
detector, most classes are never above the threshold and a few classes are confident on a small
fraction of the anchors/proposals.

The method (data-driven, seeded, run once before export on calibration photos):

1. Run the random model on the calibration photos and record the raw class logits z (the layer's
   output minus its bias) of the classification layer(s), per class.
2. Pick `n_active` classes at random (seeded). For each active class c, rescale its weights by a
   and set its bias b (an affine map of its logit) so that the (1 - f) quantile of z_c lands
   on the score threshold (so a fraction f of the anchors/proposals pass it; the quantile is
   taken per photo and averaged over the photos) and the largest z_c of all the photos lands on
   logit +3 (score about 0.95, like a trained detector's top detections) — unless that would
   spread the class's logits on this layer wider than MAX_SPREAD (their standard deviation over
   the photos' anchors/proposals): then a is that cap, and the top stays below +3.
   Without the cap, layers with few anchors (SSD's 1x1 and 3x3 feature maps: 4 to 36 anchors
   per photo, nearly equal raw logits) got scales up to 95,000 and logit spreads up to 3,000,
   which multiplied float rounding into score differences of 4e-3 between two runs of ONNX
   Runtime itself; a trained head's logits spread by a few units.
3. Every other class is normalized to unit logit spread and its bias puts its largest calibration
   logit 4 spreads below the threshold: it keeps its (random) computation but is never detected.
4. For softmax heads (Faster/Mask R-CNN, SSD, SSDlite) the background row gets weight 0 and bias 0,
   so the background logit is 0 and a class's probability is about sigmoid(its logit); RetinaNet's
   sigmoid head scores every class independently.
0. First the BatchNorm running statistics are recomputed on the calibration photos (BN layers in
   training mode, cumulative average, no gradient): a random network's BN layers have mean 0 and
   variance 1, so in eval mode they normalize nothing and activations vanish or explode (SSDlite's
   random backbone, initialized N(0, 0.03), gives features of 1e-13). With measured statistics the
   features have a trained network's scale. Weights stay seeded random.
   Before that, the last BatchNorm of every residual branch (ResNet's bottleneck `bn3`, the
   projection of MobileNetV3's inverted residuals) gets the scale RESIDUAL_GAIN instead of 1, as
   trained residual networks keep their branches small beside the identity path (torchvision's
   `zero_init_residual` starts them at 0). With gain 1 a random ResNet-50 multiplied float32
   rounding about 100 times over its 16 blocks: PyTorch's own float32 scores differed from its
   float64 ones by up to 2.6e-3 on the photos (Faster R-CNN), so float32 engines could not agree
   to 1e-4; with 0.2, by at most 1.4e-4 (benches/results/detection-f64-2026-12-01.md), and the
   engines agree with one another to 5e-5.
5. The box-regression layers are scaled so their raw deltas have the spread of a trained model's
   small refinements (std 1 with box-coder weights 10/5, i.e. about 0.1 box size; RetinaNet 0.1),
   so decoded boxes stay near their anchors/proposals instead of being clipped to the border.
6. Mask R-CNN's mask logits (after the classes above, on the detections they give): the mean
   direction of the layer's input features is projected out of its weights (it moved a whole
   mask's logits together, so a random mask was nearly all or nothing of its box), then each
   class's 28x28 logits are centred (median 0 over the calibration detections' pixels) and scaled
   to a spread of MASK_SPREAD. A mask then covers about half its box, as a trained mask head's
   covers its object; the random head gave masks of a few pixels (median 21 on `astronaut`).
"""
import math

import torch

# Logit the most confident calibration anchor of an active class is mapped to (score ~0.95).
TOP_LOGIT = 3.0
# How many spreads below the threshold an inactive class's largest calibration logit lands.
INACTIVE_MARGIN = 4.0
# The widest spread (standard deviation over a layer's calibration anchors) of an active class's
# logits.
MAX_SPREAD = 4.0
# The spread of each class's mask logits.
MASK_SPREAD = 4.0
# The scale of the last BatchNorm of each residual branch.
RESIDUAL_GAIN = 0.2


def _logit(p):
    return math.log(p / (1.0 - p))


class _Capture:
    """Forward hooks that record the outputs (or, with `inputs`, the first inputs) of a set of
    modules (one list per module)."""

    def __init__(self, modules, inputs=False):
        self.inputs = inputs
        self.outputs = {id(m): [] for m in modules}
        self.handles = [m.register_forward_hook(self._hook) for m in modules]

    def _hook(self, module, inp, out):
        self.outputs[id(module)].append((inp[0] if self.inputs else out).detach().clone())

    def close(self):
        for h in self.handles:
            h.remove()


def _run(model, images):
    """Runs `model` on each image, one at a time, without gradients."""
    with torch.no_grad():
        for img in images:
            model([img])


def _class_logits(module, outs, k):
    """Raw logits (without bias) of a Linear [P, K] or Conv [1, A*K, H, W] layer as [K, M]."""
    cols = []
    for o in outs:
        o = o - module.bias.view(1, -1, *([1] * (o.dim() - 2)))
        if o.dim() == 2:
            cols.append(o.t())
        else:
            n, ak, h, w = o.shape
            cols.append(o.view(n, ak // k, k, h, w).permute(2, 0, 1, 3, 4).reshape(k, -1))
    return torch.cat(cols, dim=1)


def _set_class(module, k, c, scale, bias):
    """Scales class c's weights and sets its bias in a Linear or per-anchor Conv layer."""
    with torch.no_grad():
        rows = range(c, module.weight.shape[0], k)
        for r in rows:
            module.weight[r] *= scale
            module.bias[r] = bias


def _calibrate_layer(module, outs, k, active, threshold, fraction, softmax, n_images):
    z = _class_logits(module, outs, k)
    per = len(outs) // n_images
    z_img = [_class_logits(module, outs[i * per:(i + 1) * per], k) for i in range(n_images)]
    t_lo = _logit(threshold)
    info = {}
    for c in range(k):
        zc = z[c]
        if softmax and c == 0:
            _set_class(module, k, 0, 0.0, 0.0)
            continue
        if c in active:
            # The per-photo quantile averaged over the photos; the largest logit of all.
            q = sum(torch.quantile(zi[c], 1.0 - fraction).item() for zi in z_img) / n_images
            top = zc.max().item()
            a = min((TOP_LOGIT - t_lo) / max(top - q, 1e-6), MAX_SPREAD / max(zc.std().item(), 1e-12))
            _set_class(module, k, c, a, t_lo - a * q)
            info[c] = {"scale": round(a, 4), "bias": round(t_lo - a * q, 4)}
        else:
            a = 1.0 / max(zc.std().item(), 1e-6)
            _set_class(module, k, c, a, t_lo - INACTIVE_MARGIN - a * zc.max().item())
    return info


def _scale_to_std(module, outs, target):
    with torch.no_grad():
        y = torch.cat([(o - module.bias.view(1, -1, *([1] * (o.dim() - 2)))).flatten() for o in outs])
        s = target / max(y.std().item(), 1e-12)
        module.weight *= s
        module.bias.zero_()
    return s


def _calibrate_masks(model, images):
    """Step 6 of the module doc on Mask R-CNN's mask logits (run after the class layers are
    calibrated: the mask head sees their detections). Returns how many detections it saw."""
    layer = model.roi_heads.mask_predictor.mask_fcn_logits
    cap = _Capture([layer], inputs=True)
    _run(model, images)
    cap.close()
    x = torch.cat(cap.outputs[id(layer)])
    detections = x.shape[0]
    if detections == 0:
        raise ValueError("no detections on the calibration photos to calibrate the masks on")
    # The mean feature direction (the features are ReLU outputs, all >= 0) moves a whole mask's
    # logits together; without it the logits vary inside each mask.
    mean = x.mean(dim=(0, 2, 3))
    mean = mean / max(mean.norm().item(), 1e-12)
    with torch.no_grad():
        w = layer.weight[:, :, 0, 0]
        w -= (w @ mean)[:, None] * mean[None, :]
        # [detections, classes, 28, 28] -> [classes, detections * 28 * 28], without the bias.
        z = torch.einsum("dchw,kc->kdhw", x, w).reshape(w.shape[0], -1)
        for c in range(z.shape[0]):
            a = MASK_SPREAD / max(z[c].std().item(), 1e-12)
            layer.weight[c] *= a
            layer.bias[c] = -a * z[c].median().item()
    return detections


def _residual_branch_norms(model):
    """The last BatchNorm of each residual branch: ResNet bottlenecks' `bn3` and, in MobileNetV3
    blocks that add their input back, the projection's norm."""
    from torchvision.models.mobilenetv3 import InvertedResidual
    from torchvision.models.resnet import Bottleneck
    for m in model.modules():
        if isinstance(m, Bottleneck):
            yield m.bn3
        elif isinstance(m, InvertedResidual) and m.use_res_connect:
            yield m.block[-1][1]


def damp_residual_branches(model, gain):
    """Sets the scale of the last BatchNorm of every residual branch to `gain` (step 0 of the
    module doc); returns how many."""
    norms = list(_residual_branch_norms(model))
    with torch.no_grad():
        for bn in norms:
            bn.weight.fill_(gain)
    return len(norms)


def recalibrate_bn(model, images):
    """Recomputes every BatchNorm's running mean/variance from the images (model stays in eval)."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
        bn.train()
    # One batch (the photos and their mirror images), so even 1x1 feature maps have a variance.
    with torch.no_grad():
        model(list(images) + [img.flip(-1) for img in images])
    for bn in bns:
        bn.eval()
    return len(bns)


def head_layers(name, model):
    """(classification layers, box-regression layers, num classes, threshold, softmax?)"""
    if name.startswith(("fasterrcnn", "maskrcnn")):
        p = model.roi_heads.box_predictor
        return [p.cls_score], [(p.bbox_pred, 1.0)], p.cls_score.out_features, model.roi_heads.score_thresh, True
    if name.startswith("retinanet"):
        h = model.head
        k = h.classification_head.num_classes
        return [h.classification_head.cls_logits], [(h.regression_head.bbox_reg, 0.1)], k, model.score_thresh, False
    if name.startswith("ssdlite"):
        cls = [m[-1] for m in model.head.classification_head.module_list]
        reg = [(m[-1], 1.0) for m in model.head.regression_head.module_list]
        return cls, reg, model.head.classification_head.num_columns, model.score_thresh, True
    if name.startswith("ssd"):
        cls = list(model.head.classification_head.module_list)
        reg = [(m, 1.0) for m in model.head.regression_head.module_list]
        return cls, reg, model.head.classification_head.num_columns, model.score_thresh, True
    raise ValueError(f"no detection head known for {name}")


def calibrate(name, model, images, seed, n_active, fraction):
    """Re-initializes the heads of `model` (in eval mode) as described in the module doc.
    `images` is a list of 3xHxW float tensors in [0, 1]. Returns a JSON-able description."""
    n_damped = damp_residual_branches(model, RESIDUAL_GAIN)
    n_bn = recalibrate_bn(model, images)
    cls_layers, reg_layers, k, threshold, softmax = head_layers(name, model)
    g = torch.Generator().manual_seed(seed)
    active = sorted((torch.randperm(k - 1, generator=g)[:n_active] + 1).tolist())
    cap = _Capture(cls_layers + [m for m, _ in reg_layers])
    _run(model, images)
    cap.close()
    per_layer = []
    for m in cls_layers:
        per_layer.append(_calibrate_layer(m, cap.outputs[id(m)], k, active, threshold, fraction, softmax,
                                          len(images)))
    reg_scales = [round(_scale_to_std(m, cap.outputs[id(m)], t), 6) for m, t in reg_layers]
    masks = None
    if name.startswith("maskrcnn"):
        masks = {"spread": MASK_SPREAD, "calibration_detections": _calibrate_masks(model, images)}
    return {
        "active_classes": active,
        "fraction_above_threshold": fraction,
        "score_threshold": threshold,
        "top_logit": TOP_LOGIT,
        "softmax": softmax,
        "class_layers": len(cls_layers),
        "box_regression_scales": reg_scales,
        "max_spread": MAX_SPREAD,
        "mask_logits": masks,
        "batchnorm_layers_recalibrated": n_bn,
        "residual_branches_damped": n_damped,
        "residual_gain": RESIDUAL_GAIN,
    }
