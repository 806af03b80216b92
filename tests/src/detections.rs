//! Two engines' detections compared as a detection benchmark compares them: same count,
//! labels equal, scores within 1e-4 absolute, boxes within 1e-3 relative
//! (|a - b| <= 1e-3 · max(|b|, 1)), masks binarized at 0.5 with IoU >= 0.99. Where the order
//! is ambiguous — reference scores closer than twice the score tolerance, ties included, may
//! come out in either order — the run is compared as a set. A mask whose box, within
//! tolerance, lands on the other side of a pixel boundary than the reference's is pasted at
//! other pixels (see [`paste_box`]); it is counted apart instead of compared pixel by pixel.

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

/// Scores may differ by this much (absolute).
pub const SCORE_TOLERANCE: f32 = 1e-4;
/// Boxes may differ by this much, relative (`|a - b| <= BOX_TOLERANCE · max(|b|, 1)`).
pub const BOX_TOLERANCE: f64 = 1e-3;
/// Masks binarized at 0.5 must overlap by at least this IoU.
pub const MASK_IOU: f64 = 0.99;

/// Side of the square mask a Mask R-CNN head predicts per detection (torchvision's 28).
const MASK_SIDE: f32 = 28.0;

/// The pixels torchvision's `paste_masks_in_image` pastes a detection's mask into: the box
/// widened about its centre by one mask pixel on each side (× 30/28), computed in `f32` as the
/// exported graph computes it, each corner truncated to an integer. Two boxes well within the
/// box tolerance give different pixels where a widened corner lies on a pixel boundary: the
/// mask is then resampled to another size at another place (on `coffee`, a corner at 352.00003
/// against 351.99994 moved 9% of a mask's pixels, and ONNX Runtime differs from itself there).
pub fn paste_box(b: &[f32]) -> [i64; 4] {
    let scale = (MASK_SIDE + 2.0) / MASK_SIDE;
    let (w, h) = ((b[2] - b[0]) * 0.5 * scale, (b[3] - b[1]) * 0.5 * scale);
    let (cx, cy) = ((b[2] + b[0]) * 0.5, (b[3] + b[1]) * 0.5);
    [cx - w, cy - h, cx + w, cy + h].map(|v| v as i64)
}

/// Worst differences over matched detections.
#[derive(Debug, Default)]
pub struct Comparison {
    /// Largest box difference, relative.
    pub max_box_rel: f64,
    /// Largest score difference.
    pub max_score_abs: f64,
    /// Smallest mask IoU (1 without masks) of the masks pasted at the same pixels.
    pub min_mask_iou: f64,
    /// The IoUs of the masks below the bound whose boxes (within tolerance) are pasted at
    /// other pixels than the reference's ([`paste_box`]).
    pub paste_shifted: Vec<f64>,
    /// Detections in runs whose order is ambiguous (reference scores within twice the score
    /// tolerance of a neighbour's).
    pub ties: usize,
}

fn box_rel(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).abs() / f64::from(y).abs().max(1.0))
        .fold(0.0, f64::max)
}

/// The end of the run of reference scores from `start` whose order another engine may
/// change: each score may move by [`SCORE_TOLERANCE`], so two detections whose scores are
/// closer than twice that may come out in either order (exact ties included).
fn ambiguous_run(scores: &[f32], start: usize) -> usize {
    let mut end = start + 1;
    while end < scores.len()
        && f64::from((scores[end - 1] - scores[end]).abs()) <= 2.0 * f64::from(SCORE_TOLERANCE)
    {
        end += 1;
    }
    end
}

/// Matches the detections `s` to the reference `o`: in order, except inside runs whose order
/// is ambiguous (neighbouring reference scores within twice [`SCORE_TOLERANCE`]), which are
/// compared as sets (a one-to-one matching of equal labels, scores and boxes within
/// tolerance, in order where order matches). The error names the first detection that has
/// no match.
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
            && (o.scores[i] - s.scores[j]).abs() <= SCORE_TOLERANCE
            && box_rel(&s.boxes[4 * j..4 * j + 4], &o.boxes[4 * i..4 * i + 4]) <= BOX_TOLERANCE
    };
    let mut start = 0;
    while start < n {
        let end = ambiguous_run(&o.scores, start);
        if end - start > 1 {
            cmp.ties += end - start;
        }
        let matched = match_run(start..end, &ok).map_err(|i| {
            format!(
                "detection {i}: reference label {} score {} box {:?}; compared label {} score {} box {:?}",
                o.labels[i], o.scores[i], &o.boxes[4 * i..4 * i + 4],
                s.labels[i], s.scores[i], &s.boxes[4 * i..4 * i + 4]
            )
        })?;
        for (i, j) in (start..end).zip(matched) {
            cmp.max_score_abs = cmp
                .max_score_abs
                .max(f64::from((o.scores[i] - s.scores[j]).abs()));
            cmp.max_box_rel = cmp.max_box_rel.max(box_rel(
                &s.boxes[4 * j..4 * j + 4],
                &o.boxes[4 * i..4 * i + 4],
            ));
            if let (Some(om), Some(sm)) = (&o.masks, &s.masks) {
                let v = iou(&om[i], &sm[j]);
                if v < MASK_IOU
                    && paste_box(&o.boxes[4 * i..4 * i + 4])
                        != paste_box(&s.boxes[4 * j..4 * j + 4])
                {
                    cmp.paste_shifted.push(v);
                    continue;
                }
                cmp.min_mask_iou = cmp.min_mask_iou.min(v);
                if v < MASK_IOU {
                    return Err(format!("detection {i}: mask IoU {v:.4} < {MASK_IOU}"));
                }
            }
        }
        start = end;
    }
    Ok(cmp)
}

/// A one-to-one matching of the detections `run` of the reference to the same positions of
/// the compared output, where `ok(i, j)` says that reference `i` may be compared `j`
/// (augmenting paths: a greedy choice could take the one match another detection needs).
/// Each detection tries its own position first. Returns each reference detection's match,
/// or the first detection left without one.
fn match_run(
    run: std::ops::Range<usize>,
    ok: &impl Fn(usize, usize) -> bool,
) -> Result<Vec<usize>, usize> {
    let (first, len) = (run.start, run.len());
    // taken[j]: the reference detection (offset in the run) compared position j has.
    let mut taken: Vec<Option<usize>> = vec![None; len];
    fn augment(
        i: usize,
        first: usize,
        ok: &impl Fn(usize, usize) -> bool,
        taken: &mut [Option<usize>],
        seen: &mut [bool],
    ) -> bool {
        let len = taken.len();
        for j in std::iter::once(i).chain((0..len).filter(|&j| j != i)) {
            if seen[j] || !ok(first + i, first + j) {
                continue;
            }
            seen[j] = true;
            if taken[j].is_none_or(|other| augment(other, first, ok, taken, seen)) {
                taken[j] = Some(i);
                return true;
            }
        }
        false
    }
    for i in 0..len {
        let mut seen = vec![false; len];
        if !augment(i, first, ok, &mut taken, &mut seen) {
            return Err(first + i);
        }
    }
    let mut matched = vec![0; len];
    for (j, i) in taken.into_iter().enumerate() {
        // Every reference detection was matched, so every position was taken.
        matched[i.expect("a perfect matching")] = first + j;
    }
    Ok(matched)
}

#[cfg(test)]
mod tests {
    use super::{Detections, compare, paste_box};

    /// Detections of one label with these scores, each box `[i, i, i + 10, i + 10]` for its
    /// entry `i` of `boxes`.
    fn detections(scores: &[f32], boxes: &[f32]) -> Detections {
        Detections {
            boxes: boxes
                .iter()
                .flat_map(|&b| [b, b, b + 10.0, b + 10.0])
                .collect(),
            scores: scores.to_vec(),
            labels: vec![1; scores.len()],
            masks: None,
        }
    }

    #[test]
    fn equal_detections_match_in_order() {
        let o = detections(&[0.9, 0.5, 0.2], &[1.0, 20.0, 40.0]);
        let cmp = compare(&o, &detections(&[0.90005, 0.5, 0.2], &[1.0, 20.0, 40.0])).unwrap();
        assert_eq!(cmp.ties, 0);
        assert!((cmp.max_score_abs - 5e-5).abs() < 1e-6, "{cmp:?}");
    }

    #[test]
    fn scores_closer_than_twice_the_tolerance_may_swap() {
        // 0.80010 and 0.79995 may come out in either order once each moves by 1e-4.
        let o = detections(&[0.80010, 0.79995, 0.3], &[1.0, 20.0, 40.0]);
        let s = detections(&[0.80002, 0.80004, 0.3], &[20.0, 1.0, 40.0]);
        let cmp = compare(&o, &s).unwrap();
        assert_eq!(cmp.ties, 2);
    }

    #[test]
    fn separated_scores_must_keep_their_order() {
        let o = detections(&[0.8, 0.7], &[1.0, 20.0]);
        let s = detections(&[0.7, 0.8], &[20.0, 1.0]);
        let err = compare(&o, &s).unwrap_err();
        assert!(err.starts_with("detection 0:"), "{err}");
    }

    #[test]
    fn a_run_is_matched_where_a_greedy_choice_would_fail() {
        // Compared position 0 suits both reference detections, position 1 only the first:
        // taking position 0 for the first (its own) would leave the second without a match.
        let o = detections(&[0.50010, 0.50000], &[1.0, 1.0]);
        let s = detections(&[0.50005, 0.50019], &[1.0, 1.0]);
        assert_eq!(compare(&o, &s).unwrap().ties, 2);
        // Without the position that suits only the first, the second has none.
        let s = detections(&[0.50005, 0.50030], &[1.0, 1.0]);
        let err = compare(&o, &s).unwrap_err();
        assert!(err.starts_with("detection 1:"), "{err}");
    }

    #[test]
    fn counts_labels_boxes_and_masks_are_checked() {
        let o = detections(&[0.9, 0.5], &[1.0, 20.0]);
        let err = compare(&o, &detections(&[0.9], &[1.0])).unwrap_err();
        assert_eq!(err, "count: reference 2, compared 1");
        let mut s = detections(&[0.9, 0.5], &[1.0, 20.0]);
        s.labels[1] = 2;
        assert!(compare(&o, &s).unwrap_err().starts_with("detection 1:"));
        // 2.1e-3 relative on a coordinate of 20 is past the box tolerance.
        let mut s = detections(&[0.9, 0.5], &[1.0, 20.0]);
        s.boxes[5] += 0.042;
        assert!(compare(&o, &s).unwrap_err().starts_with("detection 1:"));
        // Masks of 200 pixels shifted by one (IoU 199 / 201) pass, by two (198 / 202) not.
        let mask = |off: usize| (0..400).map(|p| (off..off + 200).contains(&p)).collect();
        let (mut om, mut sm) = (o, detections(&[0.9, 0.5], &[1.0, 20.0]));
        om.masks = Some(vec![mask(0), mask(50)]);
        sm.masks = Some(vec![mask(1), mask(50)]);
        let cmp = compare(&om, &sm).unwrap();
        assert!((cmp.min_mask_iou - 199.0 / 201.0).abs() < 1e-12, "{cmp:?}");
        sm.masks = Some(vec![mask(0), mask(52)]);
        assert!(
            compare(&om, &sm)
                .unwrap_err()
                .starts_with("detection 1: mask IoU")
        );
    }

    #[test]
    fn a_mask_pasted_at_other_pixels_is_counted_apart() {
        // Masks of 200 pixels shifted by two: IoU 198 / 202, below the bound.
        let mask = |off: usize| (0..400).map(|p| (off..off + 200).contains(&p)).collect();
        let o = Detections {
            masks: Some(vec![mask(0)]),
            ..detections(&[0.9], &[10.0])
        };
        let mut s = Detections {
            masks: Some(vec![mask(2)]),
            ..detections(&[0.9], &[10.0])
        };
        // [10, 10, 20, 20] and [10.004, 10, 20, 20] widen to x0 9.643 and 9.647: the same
        // pixels, so the masks are compared and fail.
        s.boxes[0] = 10.004;
        assert_eq!(paste_box(&o.boxes), paste_box(&s.boxes));
        assert!(
            compare(&o, &s)
                .unwrap_err()
                .starts_with("detection 0: mask IoU")
        );
        // x0 7.480 and 7.485 (6.7e-4 apart, relative: within the box tolerance) widen to
        // 6.997 and 7.002, on either side of pixel 7: counted apart.
        let mut o = o;
        o.boxes = vec![7.480, 10.0, 21.0, 22.0];
        s.boxes = vec![7.485, 10.0, 21.0, 22.0];
        assert_ne!(paste_box(&o.boxes), paste_box(&s.boxes));
        let cmp = compare(&o, &s).unwrap();
        assert_eq!(cmp.paste_shifted.len(), 1);
        assert!(
            (cmp.paste_shifted[0] - 198.0 / 202.0).abs() < 1e-12,
            "{cmp:?}"
        );
        assert_eq!(cmp.min_mask_iou, 1.0);
    }
}
