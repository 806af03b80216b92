//! Blocked pools: `MaxPool` and `AveragePool` (2-D, no dilations, no `Indices` output) from a
//! blocked `[N, C / 16, H, W, 16]` image to a blocked output, and `GlobalAveragePool` from a
//! blocked image to planar `[N, C, 1, 1]`. Every window cell is one vector of 16 channels, so
//! a window is a handful of whole-vector maxima or sums, whatever the plane's size.
//!
//! Max pools keep the earlier value on ties and never let NaN win a window, as the planar
//! pools do; average pools add the window's cells row by row, then divide by the cells inside
//! the image (or inside image and padding, `count_include_pad`).

use std::mem::MaybeUninit;

use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use super::vector16::{Vector16, Ymm2, Zmm};
use super::{BLOCK, live_channels, live_channels_attr, require_blocked, unblocked};
use crate::cpu::nn::common::{contiguous, min_opset, output};
use crate::cpu::nn::packed_gemm::Isa;
use crate::cpu::nn::pool::flag;
use crate::cpu::nn::pool2d::{AxisWindows, plane_windows};
use crate::cpu::nn::spatial::WindowAttrs;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{DType, Tensor, output_buffer};

/// A built blocked `MaxPool` or `AveragePool`.
#[derive(Debug)]
pub struct BlockedPool {
    /// `None` for a max pool; for an average pool, whether padding cells count.
    average: Option<bool>,
    window: WindowAttrs,
    ceil_mode: bool,
}

/// Builds a blocked `MaxPool` or `AveragePool` (one output; `auto_pad`, `kernel_shape`,
/// `pads`, `strides`, `ceil_mode`, and `count_include_pad` for averages).
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_blocked(spec.op_type)?;
    let max = spec.op_type == "MaxPool";
    let mut known = vec!["auto_pad", "kernel_shape", "pads", "strides", "ceil_mode"];
    if !max {
        known.push("count_include_pad");
    }
    spec.attrs.only(&known)?;
    if spec.num_outputs != 1 {
        return Err(KernelError::Arity(format!(
            "the blocked {} has one output, the node lists {}",
            spec.op_type, spec.num_outputs
        )));
    }
    let window = WindowAttrs::parse(spec.attrs)?;
    if window.kernel_shape.as_ref().is_none_or(|k| k.len() != 2) {
        return Err(KernelError::BadAttribute {
            name: "kernel_shape".into(),
            reason: "the blocked pools need a 2-D kernel_shape".into(),
        });
    }
    Ok(Box::new(BlockedPool {
        average: (!max)
            .then(|| flag(spec, "count_include_pad"))
            .transpose()?,
        window,
        ceil_mode: flag(spec, "ceil_mode")?,
    }))
}

/// The `f32` input `X`, checked.
fn f32_input<'a>(inputs: &[Option<&'a Tensor>]) -> Result<&'a Tensor> {
    let x = input(inputs, 0)?;
    match x.dtype() {
        DType::F32 => Ok(x),
        dtype => Err(KernelError::UnsupportedDType { index: 0, dtype }),
    }
}

impl Kernel for BlockedPool {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = f32_input(inputs)?;
        let [n, c, h, w] = unblocked(x.shape(), "X")?;
        let geo = self.window.resolve(&[h, w], None, self.ceil_mode)?;
        let (rows, cols) = plane_windows(&geo, &[h, w]);
        let (oh, ow) = (rows.len(), cols.len());
        let xs = contiguous::<f32>(x)?;
        let line = ow * BLOCK;
        // Every element is written below: no zeros first.
        let y: Vec<f32> = output_buffer::build(0, n * c * oh * ow, |y| {
            if line == 0 {
                return;
            }
            if h * w == 0 {
                // An empty image: no window holds a value.
                y.iter_mut().for_each(|v| {
                    v.write(0.0);
                });
                return;
            }
            let plane = h * w * BLOCK;
            let same3 = cols.len() == w
                && (0..w).all(|ox| cols.span(ox) == (ox.saturating_sub(1), (ox + 2).min(w)));
            let pool = RowPool {
                rows: &rows,
                cols: &cols,
                width: w,
                average: self.average,
                same3,
            };
            y.par_chunks_mut(line).enumerate().for_each_init(
                || vec![0.0f32; w * BLOCK],
                |column, (r, out)| {
                    let (block, oy) = (r / oh, r % oh);
                    let image = &xs[block * plane..(block + 1) * plane];
                    pool.run(image, oy, out, column);
                },
            );
        });
        Ok(vec![output(&[n, c / BLOCK, oh, ow, BLOCK], y)?])
    }
}

/// One output row of a blocked pool: the window's rows combined into one row of vectors,
/// then each output's columns of that row (the planar pools' order too).
struct RowPool<'a> {
    rows: &'a AxisWindows,
    cols: &'a AxisWindows,
    /// Image width, in positions.
    width: usize,
    average: Option<bool>,
    /// Output column `x` combines image columns `x − 1 ..= x + 1` (clipped at the edges): a
    /// 3-wide "same" pool.
    same3: bool,
}

impl RowPool<'_> {
    /// Output row `oy` of one block's `image` into `out` (`ow` vectors of 16), through
    /// `column` (`width` vectors).
    fn run(&self, image: &[f32], oy: usize, out: &mut [MaybeUninit<f32>], column: &mut [f32]) {
        assert!(
            image.len() >= self.rows.span(oy).1 * self.width * BLOCK
                && column.len() == self.width * BLOCK
                && out.len() == self.cols.len() * BLOCK,
            "blocked pool: operands"
        );
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has the instruction set; the operands' lengths are checked above,
        // and the windows' spans lie inside the image.
        unsafe {
            match (Isa::detect(), self.average) {
                (Some(Isa::Avx512), None) => {
                    return self.run_avx512::<true>(image, oy, out, column);
                }
                (Some(Isa::Avx512), Some(_)) => {
                    return self.run_avx512::<false>(image, oy, out, column);
                }
                (Some(Isa::Avx2), None) => return self.run_avx2::<true>(image, oy, out, column),
                (Some(Isa::Avx2), Some(_)) => {
                    return self.run_avx2::<false>(image, oy, out, column);
                }
                (None, _) => {}
            }
        }
        self.run_portable(image, oy, out, column)
    }

    /// [`RowPool::run_vectors`] on AVX-512.
    ///
    /// # Safety
    /// The CPU has AVX-512F; the operands hold what [`RowPool::run`] checks.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn run_avx512<const MAX: bool>(
        &self,
        image: &[f32],
        oy: usize,
        out: &mut [MaybeUninit<f32>],
        column: &mut [f32],
    ) {
        // SAFETY: the caller's contract.
        unsafe { self.run_vectors::<Zmm, MAX>(image, oy, out, column) }
    }

    /// [`RowPool::run_vectors`] on AVX2.
    ///
    /// # Safety
    /// The CPU has AVX2; the operands hold what [`RowPool::run`] checks.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2<const MAX: bool>(
        &self,
        image: &[f32],
        oy: usize,
        out: &mut [MaybeUninit<f32>],
        column: &mut [f32],
    ) {
        // SAFETY: the caller's contract.
        unsafe { self.run_vectors::<Ymm2, MAX>(image, oy, out, column) }
    }

    /// [`RowPool::run`] in whole vectors `V`, for a max pool (`MAX`) or an average pool.
    /// Inlined into the functions that enable `V`'s instruction set; macros, not closures,
    /// combine the vectors (a closure would be compiled without that instruction set).
    ///
    /// # Safety
    /// The CPU has `V`'s instruction set and the caller enables it; the operands hold what
    /// [`RowPool::run`] checks.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn run_vectors<V: Vector16, const MAX: bool>(
        &self,
        image: &[f32],
        oy: usize,
        out: &mut [MaybeUninit<f32>],
        column: &mut [f32],
    ) {
        let (r0, r1) = self.rows.span(oy);
        // `out` is only written through.
        let (img, col) = (image.as_ptr(), column.as_mut_ptr());
        let dst = out.as_mut_ptr().cast::<f32>();
        let width = self.width;
        // An average's sum times its window's reciprocal count (the windows of a row differ
        // only at its ends, so the last one is kept): a division per output was 40 % of an
        // average pool's time.
        let mut last = (usize::MAX, 0.0f32);
        // SAFETY (every access): rows r0..r1 of `width` vectors lie in `image`, `column`
        // holds `width` vectors and `out` one per output column (the caller's contract).
        unsafe {
            let init = match MAX {
                true => V::splat(f32::NEG_INFINITY),
                false => V::splat(0.0),
            };
            // Windows of one, two or three cells (every CNN's) in straight-line code: a loop
            // over the cells cost more in its bookkeeping than in its maxima.
            macro_rules! combine {
                ($a:expr, $b:expr) => {
                    match MAX {
                        true => V::max($b, $a),
                        false => V::add($a, $b),
                    }
                };
            }
            macro_rules! load {
                ($p:expr, $x:expr) => {
                    V::load($p.add($x * BLOCK))
                };
            }
            let row = |y: usize| img.add(y * width * BLOCK);
            if self.same3 && r1 - r0 == 3 {
                // Each column's rows combined once and kept in registers while the three
                // outputs that read it are made: no column buffer to store and reload. The
                // same operations in the same order as below.
                let (a, b, c) = (row(r0), row(r0 + 1), row(r0 + 2));
                macro_rules! down {
                    ($x:expr) => {
                        combine!(
                            combine!(combine!(init, load!(a, $x)), load!(b, $x)),
                            load!(c, $x)
                        )
                    };
                }
                let mut left: Option<V> = None;
                let mut here = down!(0);
                for ox in 0..width {
                    let right = match ox + 1 < width {
                        true => Some(down!(ox + 1)),
                        false => None,
                    };
                    let mut acc = match left {
                        Some(l) => combine!(init, l),
                        None => init,
                    };
                    acc = combine!(acc, here);
                    if let Some(r) = right {
                        acc = combine!(acc, r);
                    }
                    if !MAX {
                        acc = V::mul(acc, V::splat(self.reciprocal(oy, ox, &mut last)));
                    }
                    acc.store(dst.add(ox * BLOCK));
                    left = Some(here);
                    if let Some(r) = right {
                        here = r;
                    }
                }
                return;
            }
            match r1 - r0 {
                0 => {
                    for x in 0..width {
                        init.store(col.add(x * BLOCK));
                    }
                }
                1 => {
                    let a = row(r0);
                    for x in 0..width {
                        combine!(init, load!(a, x)).store(col.add(x * BLOCK));
                    }
                }
                2 => {
                    let (a, b) = (row(r0), row(r0 + 1));
                    for x in 0..width {
                        combine!(combine!(init, load!(a, x)), load!(b, x))
                            .store(col.add(x * BLOCK));
                    }
                }
                3 => {
                    let (a, b, c) = (row(r0), row(r0 + 1), row(r0 + 2));
                    for x in 0..width {
                        let v = combine!(
                            combine!(combine!(init, load!(a, x)), load!(b, x)),
                            load!(c, x)
                        );
                        v.store(col.add(x * BLOCK));
                    }
                }
                _ => {
                    for x in 0..width {
                        let mut v = init;
                        for y in r0..r1 {
                            v = combine!(v, load!(row(y), x));
                        }
                        v.store(col.add(x * BLOCK));
                    }
                }
            }
            let col = col.cast_const();
            for ox in 0..self.cols.len() {
                let (c0, c1) = self.cols.span(ox);
                let mut acc = match c1 - c0 {
                    0 => init,
                    1 => combine!(init, load!(col, c0)),
                    2 => combine!(combine!(init, load!(col, c0)), load!(col, c0 + 1)),
                    3 => combine!(
                        combine!(combine!(init, load!(col, c0)), load!(col, c0 + 1)),
                        load!(col, c0 + 2)
                    ),
                    _ => {
                        let mut acc = init;
                        for x in c0..c1 {
                            acc = combine!(acc, load!(col, x));
                        }
                        acc
                    }
                };
                if !MAX {
                    acc = V::mul(acc, V::splat(self.reciprocal(oy, ox, &mut last)));
                }
                acc.store(dst.add(ox * BLOCK));
            }
        }
    }

    /// [`RowPool::run`] one float at a time.
    fn run_portable(
        &self,
        image: &[f32],
        oy: usize,
        out: &mut [MaybeUninit<f32>],
        column: &mut [f32],
    ) {
        let (r0, r1) = self.rows.span(oy);
        let max = self.average.is_none();
        let init = if max { f32::NEG_INFINITY } else { 0.0 };
        // `v > acc`: NaN never wins, ties keep the earlier value.
        let combine = |acc: f32, v: f32| match max {
            true => {
                if v > acc {
                    v
                } else {
                    acc
                }
            }
            false => acc + v,
        };
        for (x, cell) in column.chunks_exact_mut(BLOCK).enumerate() {
            for (j, c) in cell.iter_mut().enumerate() {
                *c = (r0..r1).fold(init, |acc, y| {
                    combine(acc, image[(y * self.width + x) * BLOCK + j])
                });
            }
        }
        for (ox, cell) in out.chunks_exact_mut(BLOCK).enumerate() {
            let (c0, c1) = self.cols.span(ox);
            for (j, c) in cell.iter_mut().enumerate() {
                let v = (c0..c1).fold(init, |acc, x| combine(acc, column[x * BLOCK + j]));
                c.write(match self.average {
                    Some(count_pad) => v / self.cells(oy, ox, count_pad) as f32,
                    None => v,
                });
            }
        }
    }

    /// `1 / cells` of output `(oy, ox)` of an average pool, through `last`, the last count
    /// and its reciprocal (inline: an out-of-line call from the vector loop saved and
    /// restored its registers around every output).
    #[inline(always)]
    fn reciprocal(&self, oy: usize, ox: usize, last: &mut (usize, f32)) -> f32 {
        let cells = self.cells(oy, ox, self.average == Some(true));
        if cells != last.0 {
            *last = (cells, 1.0 / cells as f32);
        }
        last.1
    }

    /// The divisor of output `(oy, ox)`'s average: its window cells inside the image, or
    /// inside image and padding (`count_pad`).
    #[inline(always)]
    fn cells(&self, oy: usize, ox: usize, count_pad: bool) -> usize {
        match count_pad {
            true => self.rows.padded_cells(oy) * self.cols.padded_cells(ox),
            false => {
                let ((r0, r1), (c0, c1)) = (self.rows.span(oy), self.cols.span(ox));
                (r1 - r0) * (c1 - c0)
            }
        }
    }
}

/// A built blocked `GlobalAveragePool`: blocks in, the live channels' planar means out.
#[derive(Debug)]
pub struct BlockedGlobalAverage {
    channels: Option<usize>,
}

/// Builds the blocked `GlobalAveragePool` (attribute: `channels`, how many of the blocks'
/// channels are live; default all).
pub fn build_global(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 1, "GlobalAveragePool")?;
    spec.attrs.only(&["channels"])?;
    Ok(Box::new(BlockedGlobalAverage {
        channels: live_channels_attr(spec)?,
    }))
}

impl Kernel for BlockedGlobalAverage {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = f32_input(inputs)?;
        let [n, stored, h, w] = unblocked(x.shape(), "X")?;
        let c = live_channels(self.channels, stored)?;
        let xs = contiguous::<f32>(x)?;
        let plane = h * w;
        let mut y: Vec<f32> = output_buffer::overwritable(0, n * c);
        if plane == 0 {
            // The mean of no cells, as 0 / 0.
            y.fill(f32::NAN);
        } else if c > 0 {
            y.par_chunks_mut(c)
                .zip(xs.par_chunks(plane * stored))
                .for_each(|(means, image)| {
                    means
                        .chunks_mut(BLOCK)
                        .zip(image.chunks(plane * BLOCK))
                        .for_each(|(out, block)| mean_of_cells(block, plane, out))
                });
        }
        Ok(vec![output(&[n, c, 1, 1], y)?])
    }
}

/// The mean of `plane` vectors of 16 (NaN for none, as 0 / 0).
fn mean_of_cells(block: &[f32], plane: usize, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    match Isa::detect() {
        // SAFETY: the CPU has AVX-512F.
        Some(Isa::Avx512) => return unsafe { mean_avx512(block, plane, out) },
        // SAFETY: the CPU has AVX2.
        Some(Isa::Avx2) => return unsafe { mean_avx2(block, plane, out) },
        None => {}
    }
    mean_portable(block, plane, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn mean_avx512(block: &[f32], plane: usize, out: &mut [f32]) {
    mean_portable(block, plane, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn mean_avx2(block: &[f32], plane: usize, out: &mut [f32]) {
    mean_portable(block, plane, out)
}

#[inline(always)]
fn mean_portable(block: &[f32], plane: usize, out: &mut [f32]) {
    let sum = block[..plane * BLOCK]
        .chunks_exact(BLOCK)
        .fold([0.0f32; BLOCK], |acc, v| {
            std::array::from_fn(|j| acc[j] + v[j])
        });
    let d = plane as f32;
    out.iter_mut().zip(sum).for_each(|(o, s)| *o = s / d);
}
