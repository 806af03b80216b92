//! RoiAlign (opset 10, 16, 22), following ONNX Runtime's CPU kernel sample for sample.

use half::{bf16, f16};
use num_traits::{Float, NumCast};
use rayon::prelude::*;

use super::util::{contiguous, index_values, require_opset, tensor_from_vec};
use crate::Tensor;
use crate::cpu::transpose_block::transpose_parallel;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};

/// Above this many bilinear samples (rois × channels × bins × samples per bin) RoiAlign uses rayon.
const PARALLEL_THRESHOLD: usize = 1 << 16;
/// Refuse rois whose sample table would exceed this many entries (absurd adaptive grids).
const MAX_SAMPLES_PER_ROI: usize = 1 << 26;

/// Pools each region of interest of an `[N, C, H, W]` map to `[C, output_height, output_width]`.
///
/// `mode = max` is ONNX Runtime's (and the onnx reference's) definition: the maximum over the
/// samples of a bin of the largest *weighted* corner term `w_i * x_i`, not of the interpolated
/// value.
#[derive(Debug)]
pub(crate) struct RoiAlign {
    max_mode: bool,
    half_pixel: bool,
    pooled_h: usize,
    pooled_w: usize,
    sampling_ratio: usize,
    spatial_scale: f32,
}

fn positive(spec: &NodeSpec<'_>, name: &str, default: i64, min: i64) -> Result<usize> {
    let v = spec.attrs.int(name, default)?;
    if v < min {
        return Err(KernelError::BadAttribute {
            name: name.into(),
            reason: format!("{v} is below {min}"),
        });
    }
    usize::try_from(v).map_err(|_| KernelError::BadAttribute {
        name: name.into(),
        reason: format!("{v} is out of range"),
    })
}

/// Builds RoiAlign.
pub(crate) fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_opset(spec.opset, 10, "RoiAlign")?;
    let common = [
        "mode",
        "output_height",
        "output_width",
        "sampling_ratio",
        "spatial_scale",
    ];
    // Opset 10 has no coordinate_transformation_mode and behaves as output_half_pixel.
    let half_pixel = if spec.opset >= 16 {
        let mut known = common.to_vec();
        known.push("coordinate_transformation_mode");
        spec.attrs.only(&known)?;
        match spec
            .attrs
            .string("coordinate_transformation_mode", "half_pixel")?
            .as_str()
        {
            "half_pixel" => true,
            "output_half_pixel" => false,
            other => {
                return Err(KernelError::UnsupportedAttribute {
                    name: "coordinate_transformation_mode".into(),
                    reason: format!("unknown value '{other}'"),
                });
            }
        }
    } else {
        spec.attrs.only(&common)?;
        false
    };
    let max_mode = match spec.attrs.string("mode", "avg")?.as_str() {
        "avg" => false,
        "max" => true,
        other => {
            return Err(KernelError::UnsupportedAttribute {
                name: "mode".into(),
                reason: format!("unknown value '{other}'"),
            });
        }
    };
    Ok(Box::new(RoiAlign {
        max_mode,
        half_pixel,
        pooled_h: positive(spec, "output_height", 1, 1)?,
        pooled_w: positive(spec, "output_width", 1, 1)?,
        sampling_ratio: positive(spec, "sampling_ratio", 0, 0)?,
        spatial_scale: spec.attrs.float("spatial_scale", 1.0)?,
    }))
}

impl Kernel for RoiAlign {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let rois = input(inputs, 1)?;
        let batch = input(inputs, 2)?;
        let [n, c, h, w] = *x.shape() else {
            return Err(KernelError::Shape(format!(
                "RoiAlign needs X of shape [N, C, H, W], got {:?}",
                x.shape()
            )));
        };
        let num_rois = match *rois.shape() {
            [r, 4] => r,
            ref other => {
                return Err(KernelError::Shape(format!(
                    "rois must be [num_rois, 4], got {other:?}"
                )));
            }
        };
        if batch.shape() != [num_rois] {
            return Err(KernelError::Shape(format!(
                "batch_indices must be [{num_rois}], got {:?}",
                batch.shape()
            )));
        }
        if rois.dtype() != x.dtype() {
            return Err(KernelError::DTypeMismatch(format!(
                "rois are {}, X is {}",
                rois.dtype(),
                x.dtype()
            )));
        }
        let batch = index_values(batch, 2)?;
        let batch: Vec<usize> = batch
            .iter()
            .map(|&b| {
                usize::try_from(b).ok().filter(|&b| b < n).ok_or_else(|| {
                    KernelError::InvalidValue(format!("batch index {b} is outside [0, {n})"))
                })
            })
            .collect::<Result<_>>()?;
        if num_rois > 0 && c > 0 && (h == 0 || w == 0) {
            return Err(KernelError::Shape(format!(
                "RoiAlign needs a non-empty feature map, got {:?}",
                x.shape()
            )));
        }
        let geo = Geometry { c, h, w };
        let out_shape = [num_rois, c, self.pooled_h, self.pooled_w];
        let out = match (x, rois) {
            (Tensor::F32(xa), Tensor::F32(ra)) => {
                let y = self.forward_f32(&contiguous(xa), &contiguous(ra), &batch, geo)?;
                tensor_from_vec(&out_shape, y)?
            }
            (Tensor::F64(xa), Tensor::F64(ra)) => {
                let y = self.forward(&contiguous(xa), &contiguous(ra), &batch, geo)?;
                tensor_from_vec(&out_shape, y)?
            }
            (Tensor::F16(xa), Tensor::F16(ra)) => {
                let xs: Vec<f32> = xa.iter().map(|v| v.to_f32()).collect();
                let rs: Vec<f32> = ra.iter().map(|v| v.to_f32()).collect();
                let y = self.forward_f32(&xs, &rs, &batch, geo)?;
                tensor_from_vec(&out_shape, y.into_iter().map(f16::from_f32).collect())?
            }
            (Tensor::BF16(xa), Tensor::BF16(ra)) => {
                let xs: Vec<f32> = xa.iter().map(|v| v.to_f32()).collect();
                let rs: Vec<f32> = ra.iter().map(|v| v.to_f32()).collect();
                let y = self.forward_f32(&xs, &rs, &batch, geo)?;
                tensor_from_vec(&out_shape, y.into_iter().map(bf16::from_f32).collect())?
            }
            (other, _) => {
                return Err(KernelError::UnsupportedDType {
                    index: 0,
                    dtype: other.dtype(),
                });
            }
        };
        Ok(vec![out])
    }
}

/// Channels and spatial size of the feature map.
#[derive(Clone, Copy)]
struct Geometry {
    c: usize,
    h: usize,
    w: usize,
}

/// The four corner offsets (within one channel plane) and bilinear weights of one sample.
#[derive(Clone, Copy, Default)]
struct Sample<F> {
    pos: [usize; 4],
    weight: [F; 4],
}

/// One roi's sampling plan, shared by all its channels.
struct RoiPlan<F> {
    /// Max mode only: `pooled_h * pooled_w * grid_h * grid_w` samples, bin-major.
    samples: Vec<Sample<F>>,
    per_bin: usize,
    /// Average mode only: each bin's distinct `(position, weight / count)` taps, bin `b` in
    /// `taps[tap_bounds[b]..tap_bounds[b + 1]]`. The average is linear in the corners, and the
    /// samples of a small bin share corners, so this does fewer loads than the samples would.
    taps: Vec<(usize, F)>,
    tap_bounds: Vec<usize>,
}

/// Bins with more samples than this keep duplicate taps (the merge scan is quadratic).
const MERGE_LIMIT: usize = 16;

/// Builds the average-mode taps of [`RoiPlan`] from its samples.
fn merge_taps<F: Float>(samples: &[Sample<F>], per_bin: usize) -> (Vec<(usize, F)>, Vec<usize>) {
    let mut taps: Vec<(usize, F)> = Vec::with_capacity(samples.len() * 4);
    let mut bounds = vec![0];
    if per_bin == 0 {
        return (taps, bounds);
    }
    let count = F::from(per_bin).unwrap_or_else(F::one);
    for bin in samples.chunks_exact(per_bin) {
        let start = taps.len();
        for s in bin {
            for (&pos, &w) in s.pos.iter().zip(&s.weight) {
                let w = w / count;
                if per_bin <= MERGE_LIMIT
                    && let Some(t) = taps[start..].iter_mut().find(|t| t.0 == pos)
                {
                    t.1 = t.1 + w;
                    continue;
                }
                taps.push((pos, w));
            }
        }
        bounds.push(taps.len());
    }
    (taps, bounds)
}

/// Channels per channels-last block: a block of a detector's finest FPN level (200 × 272
/// positions) is 7 MiB.
const CHANNEL_BLOCK: usize = 32;

thread_local! {
    /// The calling thread's channels-last block of the feature map, kept between calls.
    static CHANNELS_LAST: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

impl RoiAlign {
    /// [`RoiAlign::forward`] for `f32`: average pooling of many bins over one map goes
    /// channels-last ([`RoiAlign::forward_channels_last`]).
    fn forward_f32(
        &self,
        x: &[f32],
        rois: &[f32],
        batch: &[usize],
        geo: Geometry,
    ) -> Result<Vec<f32>> {
        let bins = self.pooled_h.saturating_mul(self.pooled_w);
        let plane = geo.h * geo.w;
        // Transposing costs about two passes over the map; each bin's taps then load whole
        // channel rows instead of one value per channel.
        if self.max_mode || batch.len().saturating_mul(bins).saturating_mul(3) < plane {
            return self.forward(x, rois, batch, geo);
        }
        self.forward_channels_last(x, rois, batch, geo)
    }

    /// Average mode on channels-last copies of the map, [`CHANNEL_BLOCK`] channels at a time
    /// (each image the rois read, block by block): a bin is the sum of its taps' channel rows,
    /// in the tap order [`RoiAlign::pool_channel`] uses, so every output is the same to the bit.
    fn forward_channels_last(
        &self,
        x: &[f32],
        rois: &[f32],
        batch: &[usize],
        geo: Geometry,
    ) -> Result<Vec<f32>> {
        let bins = self.pooled_h * self.pooled_w;
        let per_roi = geo.c * bins;
        let mut out = crate::output_buffer::overwritable::<f32>(0, batch.len() * per_roi);
        if out.is_empty() {
            return Ok(out);
        }
        let plans = (0..batch.len())
            .into_par_iter()
            .map(|r| self.plan(&rois[r * 4..r * 4 + 4], geo))
            .collect::<Result<Vec<_>>>()?;
        let plane = geo.h * geo.w;
        let mut images: Vec<usize> = batch.to_vec();
        images.sort_unstable();
        images.dedup();
        // Taken out of the thread-local while in use: rayon may run another RoiAlign on this
        // thread meanwhile, which then allocates its own.
        let mut block = CHANNELS_LAST.take();
        for &image in &images {
            for first in (0..geo.c).step_by(CHANNEL_BLOCK) {
                let width = CHANNEL_BLOCK.min(geo.c - first);
                let src = &x[(image * geo.c + first) * plane..][..width * plane];
                block.clear();
                block.resize(plane * width, 0.0);
                transpose_parallel(src, width, plane, &mut block);
                let block = &block;
                out.par_chunks_mut(per_roi)
                    .zip(&plans)
                    .zip(batch)
                    .filter(|(_, b)| **b == image)
                    .for_each(|((dst, plan), _)| {
                        let mut sum = [0f32; CHANNEL_BLOCK];
                        let sum = &mut sum[..width];
                        for b in 0..bins {
                            sum.fill(0.0);
                            if plan.per_bin > 0 {
                                let taps = &plan.taps[plan.tap_bounds[b]..plan.tap_bounds[b + 1]];
                                for &(p, w) in taps {
                                    for (a, &v) in sum.iter_mut().zip(&block[p * width..][..width])
                                    {
                                        *a += w * v;
                                    }
                                }
                            }
                            for (ch, &v) in sum.iter().enumerate() {
                                dst[(first + ch) * bins + b] = v;
                            }
                        }
                    });
            }
        }
        CHANNELS_LAST.set(block);
        Ok(out)
    }

    fn forward<F: Float + Send + Sync + Default + 'static>(
        &self,
        x: &[F],
        rois: &[F],
        batch: &[usize],
        geo: Geometry,
    ) -> Result<Vec<F>> {
        let too_big = || KernelError::Shape("RoiAlign output size overflows".into());
        let bins = self
            .pooled_h
            .checked_mul(self.pooled_w)
            .ok_or_else(too_big)?;
        let per_roi = geo.c.checked_mul(bins).ok_or_else(too_big)?;
        let len = batch.len().checked_mul(per_roi).ok_or_else(too_big)?;
        // Every element is written below (each bin of each channel of each roi).
        let mut out = crate::output_buffer::overwritable::<F>(0, len);
        if out.is_empty() {
            return Ok(out);
        }
        let plane = geo.h * geo.w;
        let run_roi = |r: usize, dst: &mut [F], nested: bool| -> Result<()> {
            let plan = self.plan(&rois[r * 4..r * 4 + 4], geo)?;
            let base = batch[r] * geo.c * plane;
            let channel = |(ch, dst): (usize, &mut [F])| {
                let src = &x[base + ch * plane..][..plane];
                self.pool_channel(src, &plan, dst);
            };
            if nested {
                dst.par_chunks_mut(bins).enumerate().for_each(channel);
            } else {
                dst.chunks_mut(bins).enumerate().for_each(channel);
            }
            Ok(())
        };
        let sample_count = self.sampling_ratio.max(1).pow(2);
        let work = out.len().saturating_mul(sample_count);
        if work < PARALLEL_THRESHOLD {
            for (r, dst) in out.chunks_mut(per_roi).enumerate() {
                run_roi(r, dst, false)?;
            }
        } else {
            // Few rois: split each roi's channels across threads instead.
            let nested = batch.len() < rayon::current_num_threads();
            out.par_chunks_mut(per_roi)
                .enumerate()
                .try_for_each(|(r, dst)| run_roi(r, dst, nested))?;
        }
        Ok(out)
    }

    /// Sample positions and weights for one roi, exactly as ONNX Runtime computes them.
    fn plan<F: Float + Default>(&self, roi: &[F], geo: Geometry) -> Result<RoiPlan<F>> {
        let cast = |v: f64| -> F { <F as NumCast>::from(v).unwrap_or_else(F::nan) };
        let scale = cast(self.spatial_scale as f64);
        let offset = cast(if self.half_pixel { 0.5 } else { 0.0 });
        let start_w = roi[0] * scale - offset;
        let start_h = roi[1] * scale - offset;
        let end_w = roi[2] * scale - offset;
        let end_h = roi[3] * scale - offset;
        let (mut roi_w, mut roi_h) = (end_w - start_w, end_h - start_h);
        if !self.half_pixel {
            // Malformed rois are forced to 1×1.
            roi_w = roi_w.max(F::one());
            roi_h = roi_h.max(F::one());
        }
        let (ph, pw) = (cast(self.pooled_h as f64), cast(self.pooled_w as f64));
        let bin_h = roi_h / ph;
        let bin_w = roi_w / pw;
        let grid = |extent: F, pooled: F| -> usize {
            if self.sampling_ratio > 0 {
                self.sampling_ratio
            } else {
                // Saturating float-to-int: NaN and negatives become 0.
                (extent / pooled).ceil().to_f64().unwrap_or(0.0) as usize
            }
        };
        let (grid_h, grid_w) = (grid(roi_h, ph), grid(roi_w, pw));
        let per_bin = grid_h.saturating_mul(grid_w);
        let total = per_bin
            .saturating_mul(self.pooled_h)
            .saturating_mul(self.pooled_w);
        if total > MAX_SAMPLES_PER_ROI {
            return Err(KernelError::InvalidValue(format!(
                "roi {:?} needs {grid_h}×{grid_w} samples per bin, more than supported",
                roi.iter()
                    .map(|v| v.to_f64().unwrap_or(f64::NAN))
                    .collect::<Vec<_>>()
            )));
        }
        let (gh, gw) = (cast(grid_h as f64), cast(grid_w as f64));
        let half = cast(0.5);
        let (height, width) = (cast(geo.h as f64), cast(geo.w as f64));
        let minus_one = -F::one();
        let mut samples = Vec::with_capacity(total);
        for py in 0..self.pooled_h {
            for px in 0..self.pooled_w {
                for iy in 0..grid_h {
                    let yy =
                        start_h + cast(py as f64) * bin_h + (cast(iy as f64) + half) * bin_h / gh;
                    for ix in 0..grid_w {
                        let xx = start_w
                            + cast(px as f64) * bin_w
                            + (cast(ix as f64) + half) * bin_w / gw;
                        samples.push(bilinear(yy, xx, height, width, minus_one, geo));
                    }
                }
            }
        }
        let (samples, taps, tap_bounds) = if self.max_mode {
            (samples, Vec::new(), Vec::new())
        } else {
            let (taps, bounds) = merge_taps(&samples, per_bin);
            (Vec::new(), taps, bounds)
        };
        Ok(RoiPlan {
            samples,
            per_bin,
            taps,
            tap_bounds,
        })
    }

    /// Pools one channel plane of one roi into its `pooled_h * pooled_w` outputs.
    fn pool_channel<F: Float>(&self, src: &[F], plan: &RoiPlan<F>, dst: &mut [F]) {
        if plan.per_bin == 0 {
            dst.fill(F::zero());
            return;
        }
        if !self.max_mode {
            for (o, b) in dst.iter_mut().zip(plan.tap_bounds.windows(2)) {
                let taps = &plan.taps[b[0]..b[1]];
                *o = taps.iter().fold(F::zero(), |acc, &(p, w)| acc + w * src[p]);
            }
            return;
        }
        for (o, bin) in dst.iter_mut().zip(plan.samples.chunks_exact(plan.per_bin)) {
            let terms = |s: &Sample<F>| {
                [
                    s.weight[0] * src[s.pos[0]],
                    s.weight[1] * src[s.pos[1]],
                    s.weight[2] * src[s.pos[2]],
                    s.weight[3] * src[s.pos[3]],
                ]
            };
            *o = bin
                .iter()
                .map(|s| {
                    let [a, b, c, d] = terms(s);
                    a.max(b).max(c).max(d)
                })
                .fold(F::neg_infinity(), F::max);
        }
    }
}

/// The bilinear corners and weights of the point `(y, x)`; all zero outside `[-1, size]`.
#[inline]
fn bilinear<F: Float + Default>(
    y: F,
    x: F,
    height: F,
    width: F,
    minus_one: F,
    geo: Geometry,
) -> Sample<F> {
    if y < minus_one || y > height || x < minus_one || x > width {
        return Sample::default();
    }
    let (mut y, mut x) = (y.max(F::zero()), x.max(F::zero()));
    let mut y_low = y.to_usize().unwrap_or(0);
    let mut x_low = x.to_usize().unwrap_or(0);
    let y_high;
    let x_high;
    if y_low >= geo.h - 1 {
        y_low = geo.h - 1;
        y_high = y_low;
        y = F::from(y_low).unwrap_or_else(F::zero);
    } else {
        y_high = y_low + 1;
    }
    if x_low >= geo.w - 1 {
        x_low = geo.w - 1;
        x_high = x_low;
        x = F::from(x_low).unwrap_or_else(F::zero);
    } else {
        x_high = x_low + 1;
    }
    let ly = y - F::from(y_low).unwrap_or_else(F::zero);
    let lx = x - F::from(x_low).unwrap_or_else(F::zero);
    let (hy, hx) = (F::one() - ly, F::one() - lx);
    Sample {
        pos: [
            y_low * geo.w + x_low,
            y_low * geo.w + x_high,
            y_high * geo.w + x_low,
            y_high * geo.w + x_high,
        ],
        weight: [hy * hx, hy * lx, ly * hx, ly * lx],
    }
}

#[cfg(test)]
mod channels_last_tests {
    use super::*;

    #[test]
    fn channels_last_pools_every_bin_to_the_bit() {
        let geo = Geometry {
            c: 19,
            h: 13,
            w: 17,
        };
        let x = crate::test_values::uniform(2 * geo.c * geo.h * geo.w, 7);
        // Inside, across the border, outside, degenerate and reversed rois, on both images.
        let mut rois = vec![
            0.0, 0.0, 16.0, 12.0, -3.0, -2.0, 5.5, 4.25, 10.0, 9.0, 30.0, 40.0, 2.0, 2.0, 2.0, 2.0,
            8.0, 6.0, 1.0, 1.0, -20.0, -20.0, -10.0, -10.0,
        ];
        let coords = crate::test_values::uniform(4 * 30, 11);
        rois.extend(coords.iter().map(|v| (v + 1.0) * 9.0));
        let batch: Vec<usize> = (0..rois.len() / 4).map(|r| r % 2).collect();
        for half_pixel in [false, true] {
            for sampling_ratio in [0, 1, 2, 3] {
                for (pooled_h, pooled_w, spatial_scale) in [(7, 7, 1.0), (3, 5, 0.5), (1, 1, 2.0)] {
                    let op = RoiAlign {
                        max_mode: false,
                        half_pixel,
                        pooled_h,
                        pooled_w,
                        sampling_ratio,
                        spatial_scale,
                    };
                    let want = op.forward(&x, &rois, &batch, geo).unwrap();
                    let got = op.forward_channels_last(&x, &rois, &batch, geo).unwrap();
                    assert_eq!(want.len(), got.len());
                    for (i, (a, b)) in want.iter().zip(&got).enumerate() {
                        assert_eq!(a.to_bits(), b.to_bits(), "element {i}: {a} against {b}");
                    }
                }
            }
        }
    }
}
