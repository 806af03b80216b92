//! The blocked depthwise convolution: `FusedConv` with one input channel per group
//! (`group` = `C`, weights `[C, 1, kH, kW]`), from a blocked `[N, C / 16, H, W, 16]` image to a
//! blocked output. Each tap of the window is one vector of 16 channels' weights multiplied
//! into whole vectors of the image, so no plane is copied or padded and small planes cost no
//! more per element than large ones (the planar kernel pads each plane into its own copy).

use std::mem::MaybeUninit;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use rayon::prelude::*;

use super::{BLOCK, DOMAIN, require_avx512, unblocked};
use crate::cpu::nn::common::{contiguous, output};
use crate::cpu::nn::conv::ATTRIBUTES;
use crate::cpu::nn::epilogue::{Activation, Epilogue};
use crate::cpu::nn::fused_conv::activation_attrs;
use crate::cpu::nn::spatial::WindowAttrs;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{DType, Tensor, output_buffer};

/// Output positions computed together in the interior of a row.
const RUN: usize = 8;

/// A built blocked depthwise `Conv`.
#[derive(Debug)]
pub struct BlockedDepthwise {
    group: usize,
    window: WindowAttrs,
    activation: Activation,
}

/// Builds the blocked depthwise `Conv`: `Conv`'s attributes and `FusedConv`'s `activation`
/// and `activation_params`; `group` must be the image's channel count (checked per run).
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_avx512("Conv")?;
    let mut known = ATTRIBUTES.to_vec();
    known.extend(["activation", "activation_params"]);
    spec.attrs.only(&known)?;
    let group = spec.attrs.int("group", 1)?;
    Ok(Box::new(BlockedDepthwise {
        group: usize::try_from(group).map_err(|_| KernelError::BadAttribute {
            name: "group".into(),
            reason: format!("{group} is negative"),
        })?,
        window: WindowAttrs::parse(spec.attrs)?,
        activation: activation_attrs(spec.attrs)?,
    }))
}

/// Where one output row reads: the window's rows inside the image and the columns' geometry.
#[derive(Debug, Clone, Copy)]
struct Columns {
    /// Image width.
    width: usize,
    /// Output width.
    out: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pad: usize,
}

impl Columns {
    /// Outputs `lo..hi` have every tap inside the image.
    fn interior(&self) -> (usize, usize) {
        let lo = self.pad.div_ceil(self.stride).min(self.out);
        let reach = (self.kernel - 1) * self.dilation;
        let hi = match (self.width + self.pad).checked_sub(reach + 1) {
            Some(last) => (last / self.stride + 1).min(self.out),
            None => 0,
        };
        (lo, hi.max(lo))
    }
}

impl Kernel for BlockedDepthwise {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        if inputs.len() > 3 {
            return Err(KernelError::Arity(format!(
                "the blocked depthwise Conv takes at most 3 inputs (X, W, B), got {}",
                inputs.len()
            )));
        }
        let (x, w) = (input(inputs, 0)?, input(inputs, 1)?);
        for (index, t) in inputs.iter().enumerate() {
            if let Some(t) = t.filter(|t| t.dtype() != DType::F32) {
                return Err(KernelError::UnsupportedDType {
                    index,
                    dtype: t.dtype(),
                });
            }
        }
        let [n, c, h, wd] = unblocked(x.shape(), "X")?;
        let &[m, 1, kh, kw] = w.shape() else {
            return Err(KernelError::Shape(format!(
                "W must be [C, 1, kH, kW] for a depthwise Conv, got {:?}",
                w.shape()
            )));
        };
        if m != c || self.group != c {
            return Err(KernelError::UnsupportedAttribute {
                name: "group".into(),
                reason: format!(
                    "the {DOMAIN} Conv takes group 1 or one group per channel: group {}, \
                     {c} channels, W {:?}",
                    self.group,
                    w.shape()
                ),
            });
        }
        let geo = self.window.resolve(&[h, wd], Some(&[kh, kw]), false)?;
        let (oh, ow) = (geo.out[0], geo.out[1]);
        let bias = opt_input(inputs, 2)
            .map(|b| match b.shape() == [c] {
                true => contiguous::<f32>(b),
                false => Err(KernelError::Shape(format!(
                    "B has shape {:?}, expected [{c}]",
                    b.shape()
                ))),
            })
            .transpose()?;
        let ws = contiguous::<f32>(w)?;
        let taps = kh * kw;
        // Each block's weights as `taps` vectors of its 16 channels.
        let mut weights = vec![0.0f32; c * taps];
        for (ch, filter) in ws.chunks_exact(taps).enumerate() {
            let (block, lane) = (ch / BLOCK, ch % BLOCK);
            for (t, &v) in filter.iter().enumerate() {
                weights[(block * taps + t) * BLOCK + lane] = v;
            }
        }
        let mut biases = vec![0.0f32; c];
        if let Some(b) = &bias {
            biases.copy_from_slice(b);
        }
        let columns = Columns {
            width: wd,
            out: ow,
            kernel: kw,
            stride: geo.strides[1],
            dilation: geo.dilations[1],
            pad: geo.pad_begin[1],
        };
        let rows = Rows {
            height: h,
            kernel: kh,
            stride: geo.strides[0],
            dilation: geo.dilations[0],
            pad: geo.pad_begin[0],
        };
        let (lo, hi) = self
            .activation
            .clamp_bounds()
            .unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
        let rest = self
            .activation
            .clamp_bounds()
            .is_none()
            .then_some(Epilogue {
                add: None,
                activation: self.activation,
            });
        let (blocks, plane, line) = (c / BLOCK, h * wd * BLOCK, ow * BLOCK);
        let xs = contiguous::<f32>(x)?;
        // Every element is written below: no zeros first.
        let y: Vec<f32> = output_buffer::build(0, n * c * oh * ow, |y| {
            if line == 0 {
                return;
            }
            y.par_chunks_mut(line)
                .with_min_len(4)
                .enumerate()
                .for_each(|(r, out)| {
                    let (image, oy) = (r / oh, r % oh);
                    let block = image % blocks;
                    let filter = Filter {
                        weights: &weights[block * taps * BLOCK..(block + 1) * taps * BLOCK],
                        bias: &biases[block * BLOCK..(block + 1) * BLOCK],
                        clamp: (lo, hi),
                    };
                    let image = &xs[image * plane..(image + 1) * plane];
                    let window = Window { rows: &rows, oy };
                    // SAFETY: the blocked kernels were checked available (AVX-512F) at build;
                    // `image` is one block's plane, `out` one output row of it.
                    unsafe { row(image, &window, &columns, &filter, out) };
                    if let Some(e) = &rest {
                        // SAFETY: `row` wrote every element of `out`.
                        let out = unsafe {
                            std::slice::from_raw_parts_mut(
                                out.as_mut_ptr().cast::<f32>(),
                                out.len(),
                            )
                        };
                        e.finish(out, 0);
                    }
                });
        });
        Ok(vec![output(&[n, blocks, oh, ow, BLOCK], y)?])
    }
}

/// The window's geometry along the image's height.
#[derive(Debug, Clone, Copy)]
struct Rows {
    height: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pad: usize,
}

/// The window rows of output row `oy`.
struct Window<'a> {
    rows: &'a Rows,
    oy: usize,
}

impl Window<'_> {
    /// The (tap row, image row) pairs inside the image.
    fn inside(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let r = self.rows;
        (0..r.kernel).filter_map(move |ky| {
            let iy = (self.oy * r.stride + ky * r.dilation).checked_sub(r.pad)?;
            (iy < r.height).then_some((ky, iy))
        })
    }
}

/// One block's filter: `taps` vectors of weights, the bias, and the clamp applied last.
struct Filter<'a> {
    weights: &'a [f32],
    bias: &'a [f32],
    clamp: (f32, f32),
}

/// One output row of one block (`window` says which).
///
/// # Safety
/// The CPU supports AVX-512F; `image` holds the block's `height × width` vectors, `window`'s rows are the
/// image's, `filter.weights` holds `kernel rows × columns.kernel`
/// vectors, `filter.bias` one, and `out` `columns.out` vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn row(
    image: &[f32],
    window: &Window<'_>,
    columns: &Columns,
    filter: &Filter<'_>,
    out: &mut [MaybeUninit<f32>],
) {
    let (lo, hi) = columns.interior();
    let mut ox = 0;
    // SAFETY: forwarded from the caller's contract; `interior` keeps every tap of
    // `lo..hi` inside the row, and `edge` checks each tap of the others.
    unsafe {
        while ox < lo {
            edge(image, window, columns, filter, out, ox);
            ox += 1;
        }
        while ox + RUN <= hi {
            run::<RUN>(image, window, columns, filter, out, ox);
            ox += RUN;
        }
        while ox < hi {
            run::<1>(image, window, columns, filter, out, ox);
            ox += 1;
        }
        while ox < columns.out {
            edge(image, window, columns, filter, out, ox);
            ox += 1;
        }
    }
}

/// Off x86-64 the blocked kernels are never built ([`require_avx512`]).
#[cfg(not(target_arch = "x86_64"))]
unsafe fn row(_: &[f32], _: &Window<'_>, _: &Columns, _: &Filter<'_>, _: &mut [MaybeUninit<f32>]) {
    unreachable!("the blocked depthwise Conv needs AVX-512F")
}

/// Outputs `ox..ox + R`, every tap inside the image.
///
/// # Safety
/// As [`row`]'s, and `ox + R` is at most the interior's end.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn run<const R: usize>(
    image: &[f32],
    window: &Window<'_>,
    columns: &Columns,
    filter: &Filter<'_>,
    out: &mut [MaybeUninit<f32>],
    ox: usize,
) {
    let (img, w) = (image.as_ptr(), filter.weights.as_ptr());
    let step = columns.stride * BLOCK;
    // SAFETY: the caller's contract: every tap of these outputs lies inside the image.
    unsafe {
        let mut acc = [_mm512_loadu_ps(filter.bias.as_ptr()); R];
        let first = ox * columns.stride - columns.pad;
        for (ky, iy) in window.inside() {
            let line = img.add((iy * columns.width + first) * BLOCK);
            for kx in 0..columns.kernel {
                let wv = _mm512_loadu_ps(w.add((ky * columns.kernel + kx) * BLOCK));
                let at = line.add(kx * columns.dilation * BLOCK);
                for (j, a) in acc.iter_mut().enumerate() {
                    *a = _mm512_fmadd_ps(_mm512_loadu_ps(at.add(j * step)), wv, *a);
                }
            }
        }
        store(&acc, filter.clamp, out.as_mut_ptr().add(ox * BLOCK).cast());
    }
}

/// Output `ox`, some of its taps outside the image (they add nothing).
///
/// # Safety
/// As [`row`]'s, and `ox` is below the output width.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn edge(
    image: &[f32],
    window: &Window<'_>,
    columns: &Columns,
    filter: &Filter<'_>,
    out: &mut [MaybeUninit<f32>],
    ox: usize,
) {
    let (img, w) = (image.as_ptr(), filter.weights.as_ptr());
    // SAFETY: each tap is checked to lie inside the row before it is read.
    unsafe {
        let mut acc = [_mm512_loadu_ps(filter.bias.as_ptr())];
        for (ky, iy) in window.inside() {
            for kx in 0..columns.kernel {
                let Some(ix) =
                    (ox * columns.stride + kx * columns.dilation).checked_sub(columns.pad)
                else {
                    continue;
                };
                if ix >= columns.width {
                    continue;
                }
                let wv = _mm512_loadu_ps(w.add((ky * columns.kernel + kx) * BLOCK));
                let x = _mm512_loadu_ps(img.add((iy * columns.width + ix) * BLOCK));
                acc[0] = _mm512_fmadd_ps(x, wv, acc[0]);
            }
        }
        store(&acc, filter.clamp, out.as_mut_ptr().add(ox * BLOCK).cast());
    }
}

/// Stores `acc`'s vectors one after another from `dst`, each clamped to `[lo, hi]` (`max`
/// then `min`, the accumulator second: NaN stays NaN, as in the planar epilogue).
///
/// # Safety
/// The CPU supports AVX-512F; `dst` is valid for `R` vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn store<const R: usize>(acc: &[__m512; R], (lo, hi): (f32, f32), dst: *mut f32) {
    let (lo, hi) = (_mm512_set1_ps(lo), _mm512_set1_ps(hi));
    for (j, &a) in acc.iter().enumerate() {
        let v = _mm512_min_ps(hi, _mm512_max_ps(lo, a));
        // SAFETY: the caller's contract.
        unsafe { _mm512_storeu_ps(dst.add(j * BLOCK), v) };
    }
}
