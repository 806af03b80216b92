//! The boxes non-maximum suppression has kept so far, column by column, and the test of a
//! candidate against all of them in vectors. Each pair is computed with the same operations as
//! [`Corners::suppresses`], so the decisions are the same, for boxes whose corners and areas
//! are all finite: there, `max` and `min` by comparison agree with `f32::max` and `f32::min`,
//! and `!(a <= b)` is `a > b`.

use super::nms::Corners;

/// Kept boxes tested at a time, without a branch between them.
const CHUNK: usize = 16;

/// Boxes kept in one class, as columns.
#[derive(Debug, Default)]
pub(super) struct KeptBoxes {
    x_min: Vec<f32>,
    y_min: Vec<f32>,
    x_max: Vec<f32>,
    y_max: Vec<f32>,
    area: Vec<f32>,
}

impl KeptBoxes {
    /// Adds a kept box.
    pub(super) fn push(&mut self, c: &Corners) {
        self.x_min.push(c.x_min);
        self.y_min.push(c.y_min);
        self.x_max.push(c.x_max);
        self.y_max.push(c.y_max);
        self.area.push(c.area);
    }

    /// Whether a kept box overlaps `b` by more than `iou_threshold` (see
    /// [`Corners::suppresses`]); every kept box and `b` have finite corners and areas.
    pub(super) fn any_suppresses(&self, b: &Corners, iou_threshold: f32) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F.
                return unsafe { self.scan_avx512(b, iou_threshold) };
            }
            if is_x86_feature_detected!("avx") {
                // SAFETY: the CPU has AVX.
                return unsafe { self.scan_avx(b, iou_threshold) };
            }
        }
        self.scan(b, iou_threshold)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn scan_avx512(&self, b: &Corners, iou_threshold: f32) -> bool {
        self.scan(b, iou_threshold)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx")]
    fn scan_avx(&self, b: &Corners, iou_threshold: f32) -> bool {
        self.scan(b, iou_threshold)
    }

    /// [`KeptBoxes::any_suppresses`], a chunk of kept boxes at a time without branches (the
    /// compiler vectorizes the chunk for the instruction set of its caller).
    #[inline(always)]
    fn scan(&self, b: &Corners, iou_threshold: f32) -> bool {
        let max = |a: f32, c: f32| if a > c { a } else { c };
        let min = |a: f32, c: f32| if a < c { a } else { c };
        let n = self.area.len();
        let mut start = 0;
        while start < n {
            let end = (start + CHUNK).min(n);
            let (x0, y0) = (&self.x_min[start..end], &self.y_min[start..end]);
            let (x1, y1) = (&self.x_max[start..end], &self.y_max[start..end]);
            let area = &self.area[start..end];
            let mut hit = false;
            for j in 0..area.len() {
                let (ix_min, ix_max) = (max(x0[j], b.x_min), min(x1[j], b.x_max));
                let (iy_min, iy_max) = (max(y0[j], b.y_min), min(y1[j], b.y_max));
                let inter = (ix_max - ix_min) * (iy_max - iy_min);
                let union = area[j] + b.area - inter;
                hit |= (ix_max > ix_min)
                    & (iy_max > iy_min)
                    & (inter > 0.0)
                    & (area[j] > 0.0)
                    & (b.area > 0.0)
                    & (union > 0.0)
                    & (inter / union > iou_threshold);
            }
            if hit {
                return true;
            }
            start = end;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Boxes on a coarse grid of corners, so that many pairs touch, nest, coincide or are
    /// empty (zero width or height, or corners given in either order).
    fn boxes(count: usize, seed: u64) -> Vec<Corners> {
        let mut state = seed;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) % 9) as f32 * 2.5
        };
        (0..count)
            .map(|_| Corners::new(&[next(), next(), next(), next()], false))
            .collect()
    }

    #[test]
    fn the_vector_scan_decides_as_the_pairwise_test() {
        let all = boxes(400, 7);
        for threshold in [0.0, 0.3, 0.5, 0.7, 1.0] {
            for (split, candidates) in [(40, &all[..]), (3, &all[..]), (17, &all[..])] {
                let mut kept = KeptBoxes::default();
                for k in &all[..split] {
                    kept.push(k);
                }
                for b in candidates {
                    let want = all[..split].iter().any(|k| k.suppresses(b, threshold));
                    assert_eq!(kept.any_suppresses(b, threshold), want);
                    assert_eq!(kept.scan(b, threshold), want);
                }
            }
        }
    }
}
