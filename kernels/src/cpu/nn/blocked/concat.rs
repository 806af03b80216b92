//! `Concat` of blocked images along the channels when some input before the last has a
//! partly filled last block: the attribute `channels` lists each input's live channels, and
//! the output holds them back to back, `[N, ⌈Σ C / 16⌉, H, W, 16]`, its own last block's
//! padding zero. (Where every input but the last fills its blocks, the default domain's
//! `Concat` along axis 1 joins the blocks as they are.)
//!
//! Each output block is written whole, position by position: its lanes gathered from the one
//! or two input blocks (more where an input has fewer than 16 channels) that cover it, each
//! by a masked lane permutation.
//!
//! With the attribute `relu` set to 1 it writes `Relu` of the concatenation (the layout pass
//! folds a `Relu` that alone reads a concatenation of blocks into it: NASNet's cell outputs),
//! the same values as the `Relu` kernel's: NaN and −0 stay as they are.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use rayon::prelude::*;

use super::{BLOCK, require_blocked, stored_channels, unblocked};
use crate::cpu::nn::common::{contiguous, output};
use crate::cpu::nn::matrix::SendPtr;
use crate::cpu::nn::packed_gemm::Isa;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};
use crate::{DType, Tensor, output_buffer};

/// A built blocked `Concat`.
#[derive(Debug)]
pub struct BlockedConcat {
    channels: Vec<usize>,
    relu: bool,
}

/// Builds the blocked `Concat` (attributes: `channels`, each input's live channels; `relu`,
/// 0 or 1, default 0).
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_blocked("Concat")?;
    spec.attrs.only(&["channels", "relu"])?;
    let relu = spec.attrs.flag("relu", false)?;
    let bad = |reason: String| KernelError::UnsupportedAttribute {
        name: "channels".into(),
        reason,
    };
    let channels = spec
        .attrs
        .opt_ints("channels")?
        .ok_or_else(|| bad("required: each input's live channels".into()))?;
    let channels = channels
        .iter()
        .map(|&c| usize::try_from(c).map_err(|_| bad(format!("{c} is below 0"))))
        .collect::<Result<Vec<_>>>()?;
    if channels.len() != spec.num_inputs {
        return Err(bad(format!(
            "{} counts for {} inputs",
            channels.len(),
            spec.num_inputs
        )));
    }
    Ok(Box::new(BlockedConcat { channels, relu }))
}

/// Lanes `from..from + count` of one input block, which go to lanes `to..to + count` of an
/// output block.
#[derive(Clone, Copy)]
struct Segment<'a> {
    src: &'a [f32],
    from: usize,
    to: usize,
    count: usize,
}

/// The segments of each output block of one image: the input blocks (`blocks` of each input,
/// whose live channels `channels` are packed back to back) cut where they cross an output
/// block.
fn segments<'a>(blocks: &[&'a [f32]], channels: &[usize], plane: usize) -> Vec<Vec<Segment<'a>>> {
    let total: usize = channels.iter().sum();
    let mut out = vec![Vec::new(); total.div_ceil(BLOCK)];
    let mut first = 0;
    for (image, &c) in blocks.iter().zip(channels) {
        for (k, src) in image.chunks_exact(BLOCK * plane).enumerate() {
            let live = BLOCK.min(c - k * BLOCK);
            let at = first + k * BLOCK;
            let head = live.min(BLOCK - at % BLOCK);
            out[at / BLOCK].push(Segment {
                src,
                from: 0,
                to: at % BLOCK,
                count: head,
            });
            if live > head {
                out[at / BLOCK + 1].push(Segment {
                    src,
                    from: head,
                    to: 0,
                    count: live - head,
                });
            }
        }
        first += c;
    }
    out
}

impl Kernel for BlockedConcat {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        if inputs.len() != self.channels.len() {
            return Err(KernelError::Arity(format!(
                "the blocked Concat has {} channel counts, got {} inputs",
                self.channels.len(),
                inputs.len()
            )));
        }
        let mut images = Vec::with_capacity(inputs.len());
        let mut geometry = None;
        for (index, (x, &c)) in inputs.iter().zip(&self.channels).enumerate() {
            let x = x.ok_or_else(|| KernelError::Arity(format!("input {index} is missing")))?;
            if x.dtype() != DType::F32 {
                return Err(KernelError::UnsupportedDType {
                    index,
                    dtype: x.dtype(),
                });
            }
            let [n, stored, h, w] = unblocked(x.shape(), "each input")?;
            if stored_channels(c) != stored || geometry.is_some_and(|g| g != [n, h, w]) {
                return Err(KernelError::Shape(format!(
                    "input {index} has shape {:?} for {c} channels; the inputs' batch, height \
                     and width must agree",
                    x.shape()
                )));
            }
            geometry = Some([n, h, w]);
            images.push(contiguous::<f32>(x)?);
        }
        let [n, h, w] = geometry.unwrap_or([0, 0, 0]);
        let total: usize = self.channels.iter().sum();
        let stored = stored_channels(total);
        let plane = h * w;
        let image_len = stored * plane;
        let mut work = Vec::new();
        // An empty image has no cells to copy (and its blocks no length to cut by).
        for batch in (0..n).filter(|_| plane > 0) {
            let inputs: Vec<&[f32]> = images
                .iter()
                .zip(&self.channels)
                .map(|(image, &c)| {
                    let len = stored_channels(c) * plane;
                    &image[batch * len..(batch + 1) * len]
                })
                .collect();
            let blocks = segments(&inputs, &self.channels, plane);
            work.extend(blocks.into_iter().enumerate().map(|(b, s)| (batch, b, s)));
        }
        // Every lane of every output block is written: the live ones from their segments,
        // the padding with zeros.
        let y: Vec<f32> = output_buffer::build(0, n * image_len, |y| {
            if plane == 0 {
                return;
            }
            let dst = SendPtr(y.as_mut_ptr().cast::<f32>());
            work.par_iter()
                .with_min_len(2)
                .for_each(|(batch, block, parts)| {
                    // SAFETY: this output block is this task's alone, inside `y`.
                    let out = unsafe { dst.get().add(batch * image_len + block * BLOCK * plane) };
                    #[cfg(target_arch = "x86_64")]
                    if Isa::detect() == Some(Isa::Avx512) {
                        // SAFETY: the CPU has AVX-512F; `out` as above.
                        return unsafe { fill_block(parts, out, plane, self.relu) };
                    }
                    // SAFETY: `out` as above.
                    unsafe { fill_block_portable(parts, out, plane, self.relu) }
                });
        });
        Ok(vec![output(&[n, stored / BLOCK, h, w, BLOCK], y)?])
    }
}

/// Lanes `0..live` of a mask.
fn lanes_below(live: usize) -> u16 {
    ((1u32 << live) - 1) as u16
}

/// Writes the output block at `out` (`plane` positions of 16 lanes) from its segments, zeros
/// in the lanes none covers; `Relu` of them when `relu`.
///
/// # Safety
/// The CPU has AVX-512F; `out` is valid for `plane · 16` floats; each segment's `src` holds
/// `plane · 16` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fill_block(parts: &[Segment<'_>], out: *mut f32, plane: usize, relu: bool) {
    if let [whole] = parts
        && whole.count == BLOCK
        && !relu
    {
        // SAFETY: one whole input block to one whole output block.
        unsafe { std::ptr::copy_nonoverlapping(whole.src.as_ptr(), out, BLOCK * plane) };
        return;
    }
    // Per segment, the lanes it writes and, for each, the input lane it reads.
    let moves: Vec<(u16, __m512i, *const f32)> = parts
        .iter()
        .map(|s| {
            let idx: [i32; BLOCK] =
                std::array::from_fn(|j| (j + s.from).saturating_sub(s.to).min(BLOCK - 1) as i32);
            (
                lanes_below(s.to + s.count) & !lanes_below(s.to),
                // SAFETY: 16 `i32`s.
                unsafe { _mm512_loadu_si512(idx.as_ptr().cast()) },
                s.src.as_ptr(),
            )
        })
        .collect();
    for p in 0..plane {
        let mut v = _mm512_setzero_ps();
        for &(mask, idx, src) in &moves {
            // SAFETY: position `p` of the segment's input block.
            let x = unsafe { _mm512_loadu_ps(src.add(p * BLOCK)) };
            v = _mm512_mask_permutexvar_ps(v, mask, idx, x);
        }
        if relu {
            // `v` second: it is returned when NaN, and for −0 against 0.
            v = _mm512_max_ps(_mm512_setzero_ps(), v);
        }
        // SAFETY: position `p` of the output block.
        unsafe { _mm512_storeu_ps(out.add(p * BLOCK), v) };
    }
}

/// [`fill_block`] without AVX-512: each segment's lanes copied position by position, then
/// `Relu` of the block (the same values: `max(0, v)`, NaN and −0 kept).
///
/// # Safety
/// `out` is valid for `plane · 16` floats; each segment's `src` holds `plane · 16` floats.
unsafe fn fill_block_portable(parts: &[Segment<'_>], out: *mut f32, plane: usize, relu: bool) {
    // SAFETY: the caller's contract.
    let out = unsafe { std::slice::from_raw_parts_mut(out, plane * BLOCK) };
    if let [whole] = parts
        && whole.count == BLOCK
    {
        out.copy_from_slice(&whole.src[..plane * BLOCK]);
    } else {
        for (p, cell) in out.chunks_exact_mut(BLOCK).enumerate() {
            cell.fill(0.0);
            for s in parts {
                let src = &s.src[p * BLOCK + s.from..][..s.count];
                cell[s.to..s.to + s.count].copy_from_slice(src);
            }
        }
    }
    if relu {
        // `v` second, as `_mm512_max_ps(0, v)`: NaN and −0 stay.
        out.iter_mut()
            .for_each(|v| *v = if 0.0 > *v { 0.0 } else { *v });
    }
}
