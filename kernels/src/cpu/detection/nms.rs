//! NonMaxSuppression (opset 10, 11).

use rayon::prelude::*;

use super::nms_kept::KeptBoxes;
use super::util::{contiguous, nan_greatest_cmp, require_opset, tensor_from_vec};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{DType, Tensor};

/// Above this many (class × box) candidates the classes are processed in parallel.
const PARALLEL_THRESHOLD: usize = 1 << 14;

/// Greedy per-class non-maximum suppression, with ONNX Runtime's exact rules.
///
/// Boxes are visited by descending score, equal scores by lower box index; a box is kept when
/// its IoU with every box already kept in its class is `<= iou_threshold`. The output is int64
/// `[num_selected, 3]` rows `(batch, class, box)`, by batch, then class, then selection order.
#[derive(Debug)]
pub(crate) struct NonMaxSuppression {
    center_point_box: bool,
}

/// Builds NonMaxSuppression.
pub(crate) fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_opset(spec.opset, 10, "NonMaxSuppression")?;
    spec.attrs.only(&["center_point_box"])?;
    let center_point_box = spec.attrs.flag("center_point_box", false)?;
    Ok(Box::new(NonMaxSuppression { center_point_box }))
}

/// A box as corners plus area, computed once per box the way ONNX Runtime computes them per pair.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Corners {
    pub(super) x_min: f32,
    pub(super) y_min: f32,
    pub(super) x_max: f32,
    pub(super) y_max: f32,
    pub(super) area: f32,
}

impl Corners {
    pub(super) fn new(b: &[f32], center_point_box: bool) -> Self {
        let (x_min, x_max, y_min, y_max) = if center_point_box {
            let (hw, hh) = (b[2] / 2.0, b[3] / 2.0);
            (b[0] - hw, b[0] + hw, b[1] - hh, b[1] + hh)
        } else {
            (
                b[1].min(b[3]),
                b[1].max(b[3]),
                b[0].min(b[2]),
                b[0].max(b[2]),
            )
        };
        let area = (x_max - x_min) * (y_max - y_min);
        Corners {
            x_min,
            y_min,
            x_max,
            y_max,
            area,
        }
    }

    /// True when `self` and `other` overlap by more than `iou_threshold`.
    #[inline]
    pub(super) fn suppresses(&self, other: &Corners, iou_threshold: f32) -> bool {
        let ix_min = self.x_min.max(other.x_min);
        let ix_max = self.x_max.min(other.x_max);
        if ix_max <= ix_min {
            return false;
        }
        let iy_min = self.y_min.max(other.y_min);
        let iy_max = self.y_max.min(other.y_max);
        if iy_max <= iy_min {
            return false;
        }
        let inter = (ix_max - ix_min) * (iy_max - iy_min);
        if inter <= 0.0 {
            return false;
        }
        let union = self.area + other.area - inter;
        if self.area <= 0.0 || other.area <= 0.0 || union <= 0.0 {
            return false;
        }
        inter / union > iou_threshold
    }
}

/// Reads the first element of an optional scalar input; `None` when absent or empty.
fn first_f32(t: Option<&Tensor>) -> Result<Option<f32>> {
    match t {
        None => Ok(None),
        Some(t) => Ok(t.to_f64_vec()?.first().map(|&v| v as f32)),
    }
}

impl Kernel for NonMaxSuppression {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let boxes = input(inputs, 0)?;
        let scores = input(inputs, 1)?;
        for (i, t) in [(0, boxes), (1, scores)] {
            if t.dtype() != DType::F32 {
                return Err(KernelError::UnsupportedDType {
                    index: i,
                    dtype: t.dtype(),
                });
            }
        }
        let (bs, ss) = (boxes.shape(), scores.shape());
        let [batches, num_boxes, 4] = *bs else {
            return Err(KernelError::Shape(format!(
                "boxes must be [batches, boxes, 4], got {bs:?}"
            )));
        };
        let [score_batches, classes, score_boxes] = *ss else {
            return Err(KernelError::Shape(format!(
                "scores must be [batches, classes, boxes], got {ss:?}"
            )));
        };
        if score_batches != batches || score_boxes != num_boxes {
            return Err(KernelError::Shape(format!(
                "boxes {bs:?} and scores {ss:?} disagree on batches or boxes"
            )));
        }
        let max_out = match opt_input(inputs, 2) {
            Some(t) => t.to_i64_vec()?.first().copied().unwrap_or(0).max(0),
            None => 0,
        };
        let iou_threshold = first_f32(opt_input(inputs, 3))?.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&iou_threshold) {
            return Err(KernelError::InvalidValue(format!(
                "iou_threshold {iou_threshold} is outside [0, 1]"
            )));
        }
        let score_threshold = first_f32(opt_input(inputs, 4))?;
        let max_out = usize::try_from(max_out).unwrap_or(usize::MAX);

        let boxes = boxes.shared::<f32>()?;
        let scores = scores.shared::<f32>()?;
        let (boxes, scores) = (contiguous(&boxes), contiguous(&scores));
        let corners: Vec<Corners> = boxes
            .chunks_exact(4)
            .map(|b| Corners::new(b, self.center_point_box))
            .collect();
        // Kept boxes are tested in vectors when every corner and area is finite (see
        // `nms_kept`), one pair at a time otherwise.
        let finite = corners.iter().all(|c| {
            [c.x_min, c.y_min, c.x_max, c.y_max, c.area]
                .iter()
                .all(|v| v.is_finite())
        });

        let select = |bc: usize| -> Vec<usize> {
            if max_out == 0 {
                return Vec::new();
            }
            let batch = bc / classes;
            let class_scores = &scores[bc * num_boxes..][..num_boxes];
            let batch_boxes = &corners[batch * num_boxes..][..num_boxes];
            let mut candidates: Vec<(f32, usize)> = class_scores
                .iter()
                .copied()
                .enumerate()
                .filter(|&(_, s)| score_threshold.is_none_or(|t| s > t))
                .map(|(i, s)| (s, i))
                .collect();
            // Stable: equal scores keep ascending box order.
            candidates.sort_by(|a, b| nan_greatest_cmp(&b.0, &a.0));
            let mut kept: Vec<usize> = Vec::new();
            let mut kept_boxes = KeptBoxes::default();
            for &(_, i) in &candidates {
                if kept.len() >= max_out {
                    break;
                }
                let b = &batch_boxes[i];
                let suppressed = match finite {
                    true => kept_boxes.any_suppresses(b, iou_threshold),
                    false => (kept.iter()).any(|&j| batch_boxes[j].suppresses(b, iou_threshold)),
                };
                if !suppressed {
                    kept.push(i);
                    if finite {
                        kept_boxes.push(b);
                    }
                }
            }
            kept
        };
        let pairs = batches * classes;
        let per_class: Vec<Vec<usize>> = if pairs > 1 && pairs * num_boxes >= PARALLEL_THRESHOLD {
            (0..pairs).into_par_iter().map(select).collect()
        } else {
            (0..pairs).map(select).collect()
        };
        let total: usize = per_class.iter().map(Vec::len).sum();
        let mut out = Vec::with_capacity(total * 3);
        for (bc, kept) in per_class.iter().enumerate() {
            for &i in kept {
                out.extend_from_slice(&[(bc / classes) as i64, (bc % classes) as i64, i as i64]);
            }
        }
        Ok(vec![tensor_from_vec(&[total, 3], out)?])
    }
}
