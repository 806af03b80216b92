//! Two engines' detections compared as a detection benchmark compares them: same count,
//! labels equal, scores within 1e-4 absolute, boxes within 1e-3 relative
//! (|a - b| <= 1e-3 · max(|b|, 1)), masks binarized at 0.5 with IoU >= 0.99; where the
//! reference's scores tie (within 1e-6) the tied run is compared as a set.

use anyhow::{Context, Result};
use spillway::Tensor;

/// One engine's detections on one photo (the outputs `boxes`, `scores`, `labels`, and
/// `masks` when the model has it).
pub struct Detections {
    /// `[x0, y0, x1, y1]` per detection.
    pub boxes: Vec<f32>,
    /// Per detection.
    pub scores: Vec<f32>,
    /// Per detection.
    pub labels: Vec<i64>,
    /// Binarized masks, one `H·W` plane per detection.
    pub masks: Option<Vec<Vec<bool>>>,
}

pub fn extract(names: &[String], tensors: &[Tensor]) -> Result<Detections> {
    let get = |n: &str| -> Result<&Tensor> {
        names
            .iter()
            .position(|x| x == n)
            .and_then(|i| tensors.get(i))
            .with_context(|| format!("no output '{n}'"))
    };
    let masks = match get("masks") {
        Ok(m) => {
            let v: Vec<f32> = m.view::<f32>()?.iter().copied().collect();
            let n = m.shape().first().copied().unwrap_or(0);
            let plane = v.len().checked_div(n).unwrap_or(0);
            Some(
                (0..n)
                    .map(|i| {
                        v[i * plane..(i + 1) * plane]
                            .iter()
                            .map(|&p| p > 0.5)
                            .collect()
                    })
                    .collect(),
            )
        }
        Err(_) => None,
    };
    Ok(Detections {
        boxes: get("boxes")?.view::<f32>()?.iter().copied().collect(),
        scores: get("scores")?.view::<f32>()?.iter().copied().collect(),
        labels: get("labels")?.view::<i64>()?.iter().copied().collect(),
        masks,
    })
}

fn iou(a: &[bool], b: &[bool]) -> f64 {
    let (mut inter, mut union) = (0usize, 0usize);
    for (&x, &y) in a.iter().zip(b) {
        inter += usize::from(x && y);
        union += usize::from(x || y);
    }
    if union == 0 {
        1.0
    } else {
        inter as f64 / union as f64
    }
}

/// Worst differences over matched detections.
#[derive(Debug, Default)]
pub struct Comparison {
    /// Largest box difference, relative.
    pub max_box_rel: f64,
    /// Largest score difference.
    pub max_score_abs: f64,
    /// Smallest mask IoU (1 without masks).
    pub min_mask_iou: f64,
    /// Detections in runs of tied reference scores.
    pub ties: usize,
}

fn box_rel(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).abs() / f64::from(y).abs().max(1.0))
        .fold(0.0, f64::max)
}

/// Matches the detections `s` to the reference `o`: in order, except inside runs of tied
/// reference scores, where each reference detection takes any unused one of that run. The
/// error names the first detection that has no match.
pub fn compare(o: &Detections, s: &Detections) -> Result<Comparison, String> {
    let n = o.scores.len();
    if s.scores.len() != n {
        return Err(format!("count: reference {n}, compared {}", s.scores.len()));
    }
    let mut cmp = Comparison {
        min_mask_iou: 1.0,
        ..Comparison::default()
    };
    let ok = |i: usize, j: usize| {
        o.labels[i] == s.labels[j]
            && (o.scores[i] - s.scores[j]).abs() <= 1e-4
            && box_rel(&s.boxes[4 * j..4 * j + 4], &o.boxes[4 * i..4 * i + 4]) <= 1e-3
    };
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n
            && (o.scores[end] - o.scores[start]).abs() <= 1e-6 * o.scores[start].abs().max(1.0)
        {
            end += 1;
        }
        if end - start > 1 {
            cmp.ties += end - start;
        }
        let mut used = vec![false; end - start];
        for i in start..end {
            let j = if ok(i, i) && !used[i - start] {
                i
            } else {
                (start..end).find(|&j| !used[j - start] && ok(i, j)).ok_or_else(|| {
                    format!(
                        "detection {i}: reference label {} score {} box {:?}; compared label {} score {} box {:?}",
                        o.labels[i], o.scores[i], &o.boxes[4 * i..4 * i + 4],
                        s.labels[i], s.scores[i], &s.boxes[4 * i..4 * i + 4]
                    )
                })?
            };
            used[j - start] = true;
            cmp.max_score_abs = cmp
                .max_score_abs
                .max(f64::from((o.scores[i] - s.scores[j]).abs()));
            cmp.max_box_rel = cmp.max_box_rel.max(box_rel(
                &s.boxes[4 * j..4 * j + 4],
                &o.boxes[4 * i..4 * i + 4],
            ));
            if let (Some(om), Some(sm)) = (&o.masks, &s.masks) {
                let v = iou(&om[i], &sm[j]);
                cmp.min_mask_iou = cmp.min_mask_iou.min(v);
                if v < 0.99 {
                    return Err(format!("detection {i}: mask IoU {v:.4} < 0.99"));
                }
            }
        }
        start = end;
    }
    Ok(cmp)
}
