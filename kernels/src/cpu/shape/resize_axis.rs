//! One axis of a separable resize: source coordinates, interpolation taps and
//! their application, following `onnx.reference.ops.op_resize` exactly, except that an `f32`
//! tensor's source coordinates are computed in `f32`, as ONNX Runtime computes them.

use rayon::prelude::*;

/// How an output index maps back to an input coordinate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfHalfPixelForNn,
    TfCropAndResize,
}

/// Rounding of `nearest` interpolation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Nearest {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

/// The interpolation kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Interp {
    Nearest(Nearest),
    Linear,
    Cubic { a: f64 },
}

/// Everything needed to resize one axis.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AxisParams {
    pub in_len: usize,
    pub out_len: usize,
    pub scale: f64,
    pub roi: (f64, f64),
    pub coord: Coord,
    pub interp: Interp,
    pub antialias: bool,
    pub exclude_outside: bool,
    /// Source coordinates in `f32`, as ONNX Runtime computes them for `f32` tensors (the
    /// reference computes in `f64`): on a 480-pixel axis the two differ by up to 3e-5 of a
    /// pixel, which changes interpolated values in their fifth digit.
    pub single: bool,
}

/// Precomputed taps: output `j` is `sum_k coef[j*taps+k] * in[idx[j*taps+k]]`,
/// or the extrapolation value where `extrapolated[j]`.
#[derive(Debug)]
pub(crate) struct AxisPlan {
    taps: usize,
    idx: Vec<usize>,
    coef: Vec<f64>,
    extrapolated: Vec<bool>,
}

impl AxisPlan {
    /// Per output position: its non-zero taps `(input index, weight)`, or `None` where it is
    /// extrapolated; the taps [`apply`] sums, in its order.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn nonzero_taps(&self) -> Vec<Option<Vec<(usize, f64)>>> {
        self.extrapolated
            .iter()
            .enumerate()
            .map(|(j, &extrapolated)| {
                (!extrapolated).then(|| {
                    let taps = j * self.taps..(j + 1) * self.taps;
                    self.idx[taps.clone()]
                        .iter()
                        .zip(&self.coef[taps])
                        .filter(|(_, c)| **c != 0.0)
                        .map(|(&i, &c)| (i, c))
                        .collect()
                })
            })
            .collect()
    }
}

fn source_coord(p: &AxisParams, x: f64) -> (f64, bool) {
    if p.single
        && let Some(x) = source_coord_f32(p, x as f32)
    {
        return (f64::from(x), false);
    }
    let (inw, outw) = (p.in_len as f64, p.scale * p.in_len as f64);
    match p.coord {
        Coord::AlignCorners => (
            if outw == 1.0 {
                0.0
            } else {
                x * (inw - 1.0) / (outw - 1.0)
            },
            false,
        ),
        Coord::Asymmetric => (x / p.scale, false),
        Coord::TfHalfPixelForNn => ((x + 0.5) / p.scale, false),
        Coord::TfCropAndResize => {
            let (s, e) = p.roi;
            let base = if outw == 1.0 {
                (e - s) * (inw - 1.0) / 2.0
            } else {
                x * (e - s) * (inw - 1.0) / (outw - 1.0)
            };
            let xo = base + s * (inw - 1.0);
            (xo, xo < 0.0 || xo > inw - 1.0)
        }
        Coord::PytorchHalfPixel => (
            if outw == 1.0 {
                -0.5
            } else {
                (x + 0.5) / p.scale - 0.5
            },
            false,
        ),
        Coord::HalfPixel => ((x + 0.5) / p.scale - 0.5, false),
        Coord::HalfPixelSymmetric => {
            let adjustment = p.out_len as f64 / outw;
            let offset = inw / 2.0 * (1.0 - adjustment);
            (offset + (x + 0.5) / p.scale - 0.5, false)
        }
    }
}

/// [`source_coord`] in `f32`, step by step as ONNX Runtime's CPU `Resize` computes it; `None`
/// for the modes it computes in `f64` too (`tf_crop_and_resize`, `half_pixel_symmetric`).
fn source_coord_f32(p: &AxisParams, x: f32) -> Option<f32> {
    let scale = p.scale as f32;
    let outw = scale * p.in_len as f32;
    Some(match p.coord {
        Coord::HalfPixel => (x + 0.5) / scale - 0.5,
        Coord::PytorchHalfPixel if outw == 1.0 => -0.5,
        Coord::PytorchHalfPixel => (x + 0.5) / scale - 0.5,
        Coord::Asymmetric => x / scale,
        Coord::TfHalfPixelForNn => (x + 0.5) / scale,
        Coord::AlignCorners if outw == 1.0 => 0.0,
        Coord::AlignCorners => x * (p.in_len as f32 - 1.0) / (outw - 1.0),
        Coord::TfCropAndResize | Coord::HalfPixelSymmetric => return None,
    })
}

fn cubic(a: f64, x: f64) -> f64 {
    let x = x.abs();
    if x <= 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

/// Coefficients for the neighbours of a point at fractional offset `ratio` in (0, 1].
fn coeffs(p: &AxisParams, ratio: f64) -> Vec<f64> {
    match p.interp {
        Interp::Nearest(mode) => {
            let right = if ratio == 1.0 {
                true
            } else {
                match mode {
                    Nearest::RoundPreferFloor => ratio > 0.5,
                    Nearest::RoundPreferCeil => ratio >= 0.5,
                    Nearest::Floor => false,
                    Nearest::Ceil => true,
                }
            };
            if right {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        }
        Interp::Linear if p.antialias => {
            let scale = p.scale.min(1.0);
            let start = (-1.0 / scale).floor() as i64 + 1;
            let footprint = 2 - 2 * start;
            let c: Vec<f64> = (start..start + footprint)
                .map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0))
                .collect();
            normalised(c)
        }
        Interp::Linear => vec![1.0 - ratio, ratio],
        Interp::Cubic { a } if p.antialias => {
            let scale = p.scale.min(1.0);
            let i_start = (-2.0 / scale).floor() as i64 + 1;
            let c: Vec<f64> = (i_start..2 - i_start)
                .map(|i| cubic(a, scale * (i as f64 - ratio)))
                .collect();
            normalised(c)
        }
        Interp::Cubic { a } => {
            let r = ratio;
            vec![
                ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                ((a + 2.0) * (1.0 - r) - (a + 3.0)) * (1.0 - r) * (1.0 - r) + 1.0,
                ((a * (2.0 - r) - 5.0 * a) * (2.0 - r) + 8.0 * a) * (2.0 - r) - 4.0 * a,
            ]
        }
    }
}

fn normalised(c: Vec<f64>) -> Vec<f64> {
    let s: f64 = c.iter().sum();
    c.into_iter().map(|v| v / s).collect()
}

/// Computes the taps of every output position along one axis.
pub(crate) fn plan(p: &AxisParams) -> AxisPlan {
    let mut out = AxisPlan {
        taps: 0,
        idx: vec![],
        coef: vec![],
        extrapolated: vec![],
    };
    for j in 0..p.out_len {
        let (x, extra) = source_coord(p, j as f64);
        let xi = x.floor();
        let ratio = if x == xi { 1.0 } else { x - xi };
        let mut c = coeffs(p, ratio);
        let n = c.len() as i64;
        out.taps = c.len();
        // The n nearest indices in an edge-padded row, ties to the smaller index.
        let pad = (n + 1) / 2;
        let xp = x + pad as f64;
        let pp = xp.floor();
        let frac = xp - pp;
        let off = if n % 2 == 0 {
            if frac == 0.0 { -(n / 2) } else { -(n / 2) + 1 }
        } else {
            let base = -((n - 1) / 2);
            if frac <= 0.5 { base } else { base + 1 }
        };
        let start = pp as i64 + off - pad;
        let last = p.in_len as i64 - 1;
        // Nearest has one tap of weight one: excluding it when it falls outside would leave
        // no weight at all (ONNX's reference then divides 0 by 0); ONNX Runtime applies
        // `exclude_outside` to the interpolating modes only, and so does this.
        if p.exclude_outside && !matches!(p.interp, Interp::Nearest(_)) {
            for (k, ck) in c.iter_mut().enumerate() {
                let i = start + k as i64;
                if i < 0 || i > last {
                    *ck = 0.0;
                }
            }
            let s: f64 = c.iter().sum();
            let s = if s == 0.0 { 1.0 } else { s };
            c.iter_mut().for_each(|v| *v /= s);
        }
        out.idx
            .extend((0..n).map(|k| (start + k).clamp(0, last.max(0)) as usize));
        out.coef.extend(c);
        out.extrapolated.push(extra);
    }
    out
}

/// An element type a resize computes in: `f64` (every type, like the reference) or `f32`
/// (`f32` tensors, like ONNX Runtime).
pub(crate) trait Sample:
    Copy
    + Send
    + Sync
    + Default
    + std::ops::AddAssign
    + std::ops::Mul<Output = Self>
    + PartialEq
    + 'static
{
    /// `v` rounded to this type.
    fn of(v: f64) -> Self;
}

impl Sample for f64 {
    fn of(v: f64) -> Self {
        v
    }
}

impl Sample for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
}

/// Outputs at least this large are computed in parallel, a block of outer rows per task.
const PAR_OUTPUT: usize = 1 << 16;

/// Resizes `data` (row-major, `shape`) along `axis` with `plan`; `is_output`: the result is the
/// kernel's output (its storage may be a buffer the executor offers).
pub(crate) fn apply<T: Sample>(
    data: &[T],
    shape: &[usize],
    axis: usize,
    plan: &AxisPlan,
    extrapolation: f64,
    is_output: bool,
) -> Vec<T> {
    let outer: usize = shape[..axis].iter().product();
    let in_len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let out_len = plan.extrapolated.len();
    // Every element is written below.
    let len = outer * out_len * inner;
    let mut out = if is_output {
        crate::output_buffer::overwritable(0, len)
    } else {
        vec![T::default(); len]
    };
    let (row_in, row_out) = (in_len * inner, out_len * inner);
    if row_out == 0 {
        return out;
    }
    let coef: Vec<T> = plan.coef.iter().map(|&c| T::of(c)).collect();
    let fill = T::of(extrapolation);
    let taps = CompactTaps::new(plan, &coef);
    let one_row = |(src, dst): (&[T], &mut [T])| {
        if inner == 1 {
            taps.gather_row(src, dst, fill)
        } else {
            taps.blend_rows(src, dst, inner, fill, 0)
        }
    };
    if out.len() >= PAR_OUTPUT && inner > 1 {
        // Blocks of output rows, so that few outer rows (an image's 3 channels) still keep
        // every thread busy.
        let spans = (PAR_OUTPUT / 4 / inner).clamp(1, out_len);
        out.par_chunks_mut(row_out)
            .zip(data.par_chunks(row_in))
            .for_each(|(dst, src)| {
                dst.par_chunks_mut(spans * inner)
                    .enumerate()
                    .for_each(|(t, d)| taps.blend_rows(src, d, inner, fill, t * spans))
            });
    } else if out.len() >= PAR_OUTPUT && outer > 1 {
        let rows = (PAR_OUTPUT / row_out).clamp(1, outer);
        data.par_chunks(rows * row_in)
            .zip(out.par_chunks_mut(rows * row_out))
            .for_each(|(src, dst)| {
                src.chunks(row_in)
                    .zip(dst.chunks_mut(row_out))
                    .for_each(one_row)
            });
    } else {
        data.chunks(row_in)
            .zip(out.chunks_mut(row_out))
            .for_each(one_row);
    }
    out
}

/// The non-zero taps of every output position, packed: each output (an element, or a row of
/// `inner` elements) is a weighted sum of a few inputs. (Zero taps are skipped; the reference
/// multiplies them, which only differs for inf/NaN inputs.)
struct CompactTaps<T> {
    /// `(first tap, tap count)` per output; `None` where the output is extrapolated.
    spans: Vec<Option<(usize, usize)>>,
    idx: Vec<usize>,
    coef: Vec<T>,
    /// Every output copies one input (nearest interpolation, no extrapolation).
    copies: bool,
    /// One past the largest index.
    idx_end: usize,
}

impl<T: Sample> CompactTaps<T> {
    fn new(plan: &AxisPlan, coef: &[T]) -> Self {
        let mut out = CompactTaps {
            spans: Vec::with_capacity(plan.extrapolated.len()),
            idx: Vec::new(),
            coef: Vec::new(),
            copies: false,
            idx_end: 0,
        };
        for (j, &extrapolated) in plan.extrapolated.iter().enumerate() {
            if extrapolated {
                out.spans.push(None);
                continue;
            }
            let first = out.idx.len();
            let taps = j * plan.taps..(j + 1) * plan.taps;
            for ((&c, &i), &typed) in plan.coef[taps.clone()]
                .iter()
                .zip(&plan.idx[taps.clone()])
                .zip(&coef[taps])
            {
                if c != 0.0 {
                    out.idx.push(i);
                    out.coef.push(typed);
                }
            }
            out.spans.push(Some((first, out.idx.len() - first)));
        }
        out.idx_end = out.idx.iter().max().map_or(0, |&i| i + 1);
        out.copies = out
            .spans
            .iter()
            .all(|s| s.is_some_and(|(first, n)| out.is_copy(first, n)));
        out
    }

    /// Whether the span `(first, n)` is a single tap of weight one (nearest interpolation).
    fn is_copy(&self, first: usize, n: usize) -> bool {
        n == 1 && self.coef[first] == T::of(1.0)
    }

    /// One row of the innermost axis: each output element is a weighted sum of a few inputs.
    fn gather_row(&self, src: &[T], dst: &mut [T], fill: T) {
        if self.copies {
            assert!(self.idx_end <= src.len());
            dst.iter_mut().zip(&self.idx).for_each(|(d, &i)| {
                // SAFETY: every index is below `idx_end`, checked against `src` above.
                *d = unsafe { *src.get_unchecked(i) }
            });
            return;
        }
        for (d, span) in dst.iter_mut().zip(&self.spans) {
            *d = match *span {
                None => fill,
                // Linear interpolation's two taps, the same sum unrolled.
                Some((first, 2)) => {
                    let (i, c) = (&self.idx[first..first + 2], &self.coef[first..first + 2]);
                    let mut acc = T::default();
                    acc += c[0] * src[i[0]];
                    acc += c[1] * src[i[1]];
                    acc
                }
                Some((first, n)) => {
                    let mut acc = T::default();
                    for (&i, &c) in self.idx[first..first + n]
                        .iter()
                        .zip(&self.coef[first..first + n])
                    {
                        acc += c * src[i];
                    }
                    acc
                }
            };
        }
    }

    /// The resized axis has `inner` elements under it: each output row is a weighted sum of a
    /// few input rows. `dst` holds the output rows from `first`.
    fn blend_rows(&self, src: &[T], dst: &mut [T], inner: usize, fill: T, first: usize) {
        for (span, d) in self.spans[first..].iter().zip(dst.chunks_exact_mut(inner)) {
            let Some((first, n)) = *span else {
                d.fill(fill);
                continue;
            };
            if self.is_copy(first, n) {
                d.copy_from_slice(&src[self.idx[first] * inner..][..inner]);
                continue;
            }
            d.fill(T::default());
            for (&i, &c) in self.idx[first..first + n]
                .iter()
                .zip(&self.coef[first..first + n])
            {
                let row = &src[i * inner..][..inner];
                d.iter_mut().zip(row).for_each(|(d, &s)| *d += c * s);
            }
        }
    }
}
