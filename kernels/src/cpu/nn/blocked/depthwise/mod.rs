//! The blocked depthwise convolution: `FusedConv` with one input channel per group
//! (`group` = `C`, weights `[C, 1, kH, kW]`), from a blocked `[N, ⌈C / 16⌉, H, W, 16]` image to
//! a blocked output. Each tap of the window is one vector of 16 channels' weights multiplied
//! into whole vectors of the image, so no plane is copied or padded and small planes cost no
//! more per element than large ones (the planar kernel pads each plane into its own copy).
//!
//! With the attribute `relu_input` set to 1 it convolves `Relu` of its image, each vector as
//! it is loaded (the layout pass folds into it a `Relu` whose readers are all depthwise
//! convolutions: NASNet's separable convolutions start so), the same values as the `Relu`
//! kernel's: NaN and −0 stay as they are.

use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use super::vector16::{Vector16, Ymm2, Zmm};
use super::{BLOCK, DOMAIN, conv_bias, conv_inputs, require_blocked, stored_channels, unblocked};
use crate::cpu::nn::common::{contiguous, output};
use crate::cpu::nn::conv::ATTRIBUTES;
use crate::cpu::nn::epilogue::{Activation, Epilogue};
use crate::cpu::nn::fused_conv::activation_attrs;
use crate::cpu::nn::matrix::SendPtr;
use crate::cpu::nn::packed_gemm::Isa;
use crate::cpu::nn::spatial::WindowAttrs;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};
use crate::{Tensor, output_buffer};

#[cfg(target_arch = "x86_64")]
mod sliding;

/// Output positions computed together in the interior of a row.
const RUN: usize = 4;
/// Blocks of channels computed together.
const TOGETHER: usize = 4;

/// A built blocked depthwise `Conv`.
#[derive(Debug)]
pub struct BlockedDepthwise {
    group: usize,
    window: WindowAttrs,
    activation: Activation,
    relu_input: bool,
}

/// Builds the blocked depthwise `Conv`: `Conv`'s attributes, `FusedConv`'s `activation`
/// and `activation_params`, and `relu_input` (0 or 1, default 0); `group` must be the image's
/// channel count (checked per run).
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_blocked("Conv")?;
    let mut known = ATTRIBUTES.to_vec();
    known.extend(["activation", "activation_params", "relu_input"]);
    spec.attrs.only(&known)?;
    let relu_input = spec.attrs.flag("relu_input", false)?;
    let group = spec.attrs.int("group", 1)?;
    Ok(Box::new(BlockedDepthwise {
        group: usize::try_from(group).map_err(|_| KernelError::BadAttribute {
            name: "group".into(),
            reason: format!("{group} is negative"),
        })?,
        window: WindowAttrs::parse(spec.attrs)?,
        activation: activation_attrs(spec.attrs)?,
        relu_input,
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
        let (x, w) = conv_inputs(inputs, "depthwise Conv", &["X", "W", "B"])?;
        let [n, stored, h, wd] = unblocked(x.shape(), "X")?;
        let &[m, 1, kh, kw] = w.shape() else {
            return Err(KernelError::Shape(format!(
                "W must be [C, 1, kH, kW] for a depthwise Conv, got {:?}",
                w.shape()
            )));
        };
        // The weights give the live channels; the last block may be partly filled.
        let c = m;
        if stored_channels(c) != stored || self.group != c {
            return Err(KernelError::UnsupportedAttribute {
                name: "group".into(),
                reason: format!(
                    "the {DOMAIN} Conv takes group 1 or one group per channel: group {}, \
                     X {:?}, W {:?}",
                    self.group,
                    x.shape(),
                    w.shape()
                ),
            });
        }
        if kh * kw == 0 {
            return Err(KernelError::Shape(format!(
                "W {:?} has an empty window",
                w.shape()
            )));
        }
        let geo = self.window.resolve(&[h, wd], Some(&[kh, kw]), false)?;
        let (oh, ow) = (geo.out[0], geo.out[1]);
        let bias = conv_bias(inputs, c)?;
        let ws = contiguous::<f32>(w)?;
        let taps = kh * kw;
        // Each block's weights as `taps` vectors of its 16 channels (zeros in the lanes past
        // the live channels, whose outputs are then zero).
        let mut weights = vec![0.0f32; stored * taps];
        for (ch, filter) in ws.chunks_exact(taps).enumerate() {
            let (block, lane) = (ch / BLOCK, ch % BLOCK);
            for (t, &v) in filter.iter().enumerate() {
                weights[(block * taps + t) * BLOCK + lane] = v;
            }
        }
        let mut biases = vec![0.0f32; stored];
        if let Some(b) = &bias {
            biases[..c].copy_from_slice(b);
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
        // Clamps finish in registers; any other activation in the epilogue, on each row.
        let clamp = self.activation.clamp_bounds();
        let rest = clamp.is_none().then_some(Epilogue {
            add: None,
            activation: self.activation,
        });
        let clamp = clamp.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
        let floor = match self.relu_input {
            true => 0.0,
            false => f32::NEG_INFINITY,
        };
        let (blocks, plane, out_plane) = (stored / BLOCK, h * wd * BLOCK, oh * ow * BLOCK);
        let xs = contiguous::<f32>(x)?;
        let groups = blocks.div_ceil(TOGETHER);
        let avx512 = Isa::detect() == Some(Isa::Avx512);
        // Sliding runs hold more vectors than AVX2's 16 registers.
        #[cfg(target_arch = "x86_64")]
        let sliding = sliding::slides(&columns).filter(|_| avx512);
        #[cfg(not(target_arch = "x86_64"))]
        let sliding = None;
        // Every element is written below: no zeros first.
        let y: Vec<f32> = output_buffer::build(0, n * stored * oh * ow, |y| {
            if out_plane == 0 {
                return;
            }
            let dst = SendPtr(y.as_mut_ptr().cast::<f32>());
            (0..n * groups * oh)
                .into_par_iter()
                .with_min_len(4)
                .for_each(|task| {
                    let (image, oy) = (task / oh, task % oh);
                    let (b, first) = (image / groups, image % groups * TOGETHER);
                    let count = TOGETHER.min(blocks - first);
                    let block = b * blocks + first;
                    let at = (block * oh + oy) * ow * BLOCK;
                    let filter = Filter {
                        weights: &weights[first * taps * BLOCK..(first + count) * taps * BLOCK],
                        bias: &biases[first * BLOCK..(first + count) * BLOCK],
                        taps,
                        clamp,
                        floor,
                    };
                    let rows = Window { rows: &rows, oy };
                    let planes = Planes {
                        image: &xs[block * plane..(block + count) * plane],
                        plane,
                        // SAFETY: these blocks' row `oy`: this task's alone.
                        out: unsafe { dst.get().add(at) },
                        out_plane,
                    };
                    // SAFETY: the blocked kernels were checked available at build (AVX-512F,
                    // else AVX2 with FMA); `planes` holds `count` blocks of the image and of
                    // the output.
                    unsafe {
                        match (avx512, count) {
                            (true, 4) => {
                                row_avx512::<4>(&planes, &rows, &columns, &filter, sliding)
                            }
                            (true, 3) => {
                                row_avx512::<3>(&planes, &rows, &columns, &filter, sliding)
                            }
                            (true, 2) => {
                                row_avx512::<2>(&planes, &rows, &columns, &filter, sliding)
                            }
                            (true, _) => {
                                row_avx512::<1>(&planes, &rows, &columns, &filter, sliding)
                            }
                            (false, _) => row_avx2(&planes, count, &rows, &columns, &filter),
                        }
                    }
                    if let Some(e) = &rest {
                        for k in 0..count {
                            // SAFETY: `row` wrote this block's output row; no other task
                            // touches it.
                            let out = unsafe {
                                std::slice::from_raw_parts_mut(
                                    planes.out.add(k * out_plane),
                                    ow * BLOCK,
                                )
                            };
                            e.finish(out, 0);
                        }
                    }
                });
        });
        Ok(vec![output(&[n, blocks, oh, ow, BLOCK], y)?])
    }
}

/// The image and output of the blocks a task computes together: block `k`'s image at
/// `image[k · plane..]`, its output row at `out + k · out_plane`.
struct Planes<'a> {
    image: &'a [f32],
    plane: usize,
    out: *mut f32,
    out_plane: usize,
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

/// One block's filter: `taps` vectors of weights, the bias, the clamp applied last, and the
/// floor each image vector is raised to as it is loaded (`max(floor, x)`, `x` second: NaN
/// stays NaN; 0 for `relu_input`, else −∞, which changes nothing).
struct Filter<'a> {
    weights: &'a [f32],
    bias: &'a [f32],
    /// Vectors of weights per block.
    taps: usize,
    clamp: (f32, f32),
    floor: f32,
}

/// The signature of [`sliding::sliding`]'s instances.
type Slide = unsafe fn(&Planes<'_>, usize, &Window<'_>, &Columns, &Filter<'_>, usize);

/// How a run's rows go in sliding runs ([`sliding::slides`], chosen once per run): the run
/// width and the instances for runs inside the interior and runs at an edge.
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Sliding {
    width: usize,
    inside: Slide,
    edges: Slide,
}

/// [`row`] on AVX-512.
///
/// # Safety
/// As [`row`]'s, with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn row_avx512<const NB: usize>(
    planes: &Planes<'_>,
    window: &Window<'_>,
    columns: &Columns,
    filter: &Filter<'_>,
    sliding: Option<Sliding>,
) {
    // SAFETY: the caller's contract.
    unsafe { row::<Zmm, NB>(planes, window, columns, filter, sliding) }
}

/// [`row`] on AVX2 for `count` blocks, one at a time: a block is two of AVX2's 16 registers,
/// and one block's `RUN` accumulators, its weights and an image vector take twelve.
///
/// # Safety
/// As [`row`]'s for `NB` = `count`, with AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_avx2(
    planes: &Planes<'_>,
    count: usize,
    window: &Window<'_>,
    columns: &Columns,
    filter: &Filter<'_>,
) {
    let taps = filter.taps;
    for k in 0..count {
        let block = Planes {
            image: &planes.image[k * planes.plane..],
            plane: planes.plane,
            // SAFETY: block `k` of the output (the caller's contract).
            out: unsafe { planes.out.add(k * planes.out_plane) },
            out_plane: planes.out_plane,
        };
        let filter = Filter {
            weights: &filter.weights[k * taps * BLOCK..],
            bias: &filter.bias[k * BLOCK..],
            ..*filter
        };
        // SAFETY: the caller's contract, for block `k` alone.
        unsafe { row::<Ymm2, 1>(&block, window, columns, &filter, None) }
    }
}

/// One output row (`window` says which) of `NB` blocks together: each tap's multiply-adds
/// for the blocks are independent, so one output at a time still fills the pipeline.
///
/// # Safety
/// The CPU has `V`'s instruction set and the caller enables it; `planes.image` holds `NB` blocks of `height × width` vectors,
/// `window`'s rows are the image's, `filter.weights` holds `NB × kernel rows × columns.kernel`
/// vectors and `filter.bias` `NB`; `planes.out` is valid for `columns.out` vectors in each of
/// the `NB` blocks.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn row<V: Vector16, const NB: usize>(
    planes: &Planes<'_>,
    window: &Window<'_>,
    columns: &Columns,
    filter: &Filter<'_>,
    sliding: Option<Sliding>,
) {
    // Strides of 1 and 2: whole rows in runs along the row, block by block (see `sliding`), the
    // last run ending at the row's end, overlapping the one before it (its outputs are
    // written again, with the same values).
    if let Some(Sliding {
        width,
        inside,
        edges,
    }) = sliding
    {
        let (lo, hi) = columns.interior();
        for k in 0..NB {
            for x in (0..columns.out).step_by(width) {
                let x = x.min(columns.out - width);
                let slide = if x < lo || x + width > hi {
                    edges
                } else {
                    inside
                };
                // SAFETY: forwarded from the caller's contract; `inside` runs only where
                // `interior` keeps every tap inside the row, and `edges` reads only the taps
                // inside it.
                unsafe { slide(planes, k, window, columns, filter, x) };
            }
        }
        return;
    }
    let (lo, hi) = columns.interior();
    let mut ox = 0;
    // SAFETY: forwarded from the caller's contract; `interior` keeps every tap of
    // `lo..hi` inside the row, and `edge` checks each tap of the others.
    unsafe {
        while ox < lo {
            edge::<V, NB>(planes, window, columns, filter, ox);
            ox += 1;
        }
        // With the stride a constant, each output's taps lie at fixed offsets from its
        // block's pointer; a stride known only at run time made the compiler keep one
        // pointer per block and output (16), spilled to the stack.
        while ox + RUN <= hi {
            match (columns.stride, columns.dilation, columns.kernel) {
                (1, ..) => run::<V, NB, RUN, 1>(planes, window, columns, filter, ox),
                (2, ..) => run::<V, NB, RUN, 2>(planes, window, columns, filter, ox),
                _ => run::<V, NB, RUN, 0>(planes, window, columns, filter, ox),
            }
            ox += RUN;
        }
        while ox < hi {
            run::<V, NB, 1, 0>(planes, window, columns, filter, ox);
            ox += 1;
        }
        while ox < columns.out {
            edge::<V, NB>(planes, window, columns, filter, ox);
            ox += 1;
        }
    }
}

/// Off x86-64 the blocked kernels are never built ([`require_blocked`]).
#[cfg(not(target_arch = "x86_64"))]
unsafe fn row_avx512<const NB: usize>(
    _: &Planes<'_>,
    _: &Window<'_>,
    _: &Columns,
    _: &Filter<'_>,
    _: Option<Sliding>,
) {
    unreachable!("the blocked depthwise Conv needs AVX-512F or AVX2")
}

/// Off x86-64 the blocked kernels are never built ([`require_blocked`]).
#[cfg(not(target_arch = "x86_64"))]
unsafe fn row_avx2(_: &Planes<'_>, _: usize, _: &Window<'_>, _: &Columns, _: &Filter<'_>) {
    unreachable!("the blocked depthwise Conv needs AVX-512F or AVX2")
}

/// Outputs `ox..ox + R` of the `NB` blocks, every tap inside the image; `S` is the column
/// stride, or 0 for the one in `columns`.
///
/// # Safety
/// As [`row`]'s, and `ox + R` is at most the interior's end; `S` is 0 or `columns.stride`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn run<V: Vector16, const NB: usize, const R: usize, const S: usize>(
    planes: &Planes<'_>,
    window: &Window<'_>,
    columns: &Columns,
    filter: &Filter<'_>,
    ox: usize,
) {
    let (img, w, taps) = (planes.image.as_ptr(), filter.weights.as_ptr(), filter.taps);
    let step = if S == 0 { columns.stride } else { S } * BLOCK;
    // SAFETY: the caller's contract: every tap of these outputs lies inside the image.
    unsafe {
        let mut acc = biases::<V, NB, R>(filter.bias.as_ptr());
        let floor = V::splat(filter.floor);
        let first = ox * columns.stride - columns.pad;
        for (ky, iy) in window.inside() {
            let line = img.add((iy * columns.width + first) * BLOCK);
            for kx in 0..columns.kernel {
                let tap = ky * columns.kernel + kx;
                let at = line.add(kx * columns.dilation * BLOCK);
                for (k, acc) in acc.iter_mut().enumerate() {
                    let wv = V::load(w.add((k * taps + tap) * BLOCK));
                    let at = at.add(k * planes.plane);
                    for (j, a) in acc.iter_mut().enumerate() {
                        let x = floor.max(V::load(at.add(j * step)));
                        *a = x.mul_add(wv, *a);
                    }
                }
            }
        }
        store(&acc, filter.clamp, planes, ox);
    }
}

/// Output `ox` of the `NB` blocks, some of its taps outside the image (they add nothing).
///
/// # Safety
/// As [`row`]'s, and `ox` is below the output width.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn edge<V: Vector16, const NB: usize>(
    planes: &Planes<'_>,
    window: &Window<'_>,
    columns: &Columns,
    filter: &Filter<'_>,
    ox: usize,
) {
    let (img, w, taps) = (planes.image.as_ptr(), filter.weights.as_ptr(), filter.taps);
    // SAFETY: each tap is checked to lie inside the row before it is read.
    unsafe {
        let mut acc = biases::<V, NB, 1>(filter.bias.as_ptr());
        let floor = V::splat(filter.floor);
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
                let tap = ky * columns.kernel + kx;
                let at = img.add((iy * columns.width + ix) * BLOCK);
                for (k, acc) in acc.iter_mut().enumerate() {
                    let wv = V::load(w.add((k * taps + tap) * BLOCK));
                    let x = floor.max(V::load(at.add(k * planes.plane)));
                    acc[0] = x.mul_add(wv, acc[0]);
                }
            }
        }
        store(&acc, filter.clamp, planes, ox);
    }
}
/// `NB` blocks × `R` accumulators, each block's started from its bias vector (`b`, one
/// vector per block).
///
/// # Safety
/// The CPU has `V`'s instruction set and the caller enables it; `b` holds `NB` vectors.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn biases<V: Vector16, const NB: usize, const R: usize>(b: *const f32) -> [[V; R]; NB] {
    // Loops, not `array::from_fn`: its closure is compiled without the instruction set.
    // SAFETY: the caller's contract.
    let mut acc = [[unsafe { V::splat(0.0) }; R]; NB];
    for (k, acc) in acc.iter_mut().enumerate() {
        // SAFETY: the caller's contract.
        *acc = [unsafe { V::load(b.add(k * BLOCK)) }; R];
    }
    acc
}

/// Stores outputs `ox..ox + R` of the `NB` blocks, each clamped to `[lo, hi]` (`max` then
/// `min`, the accumulator second: NaN stays NaN, as in the planar epilogue).
///
/// # Safety
/// The CPU has `V`'s instruction set and the caller enables it; `planes.out` is valid for
/// those outputs of every block.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store<V: Vector16, const NB: usize, const R: usize>(
    acc: &[[V; R]; NB],
    (lo, hi): (f32, f32),
    planes: &Planes<'_>,
    ox: usize,
) {
    // SAFETY: the caller's contract.
    let (lo, hi) = unsafe { (V::splat(lo), V::splat(hi)) };
    for (k, acc) in acc.iter().enumerate() {
        for (j, &a) in acc.iter().enumerate() {
            // SAFETY: the caller's contract.
            unsafe {
                let v = hi.min(lo.max(a));
                let dst = planes.out.add(k * planes.out_plane + (ox + j) * BLOCK);
                v.store(dst)
            };
        }
    }
}
