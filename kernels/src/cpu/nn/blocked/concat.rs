//! `Concat` of blocked images along the channels when some input before the last has a
//! partly filled last block: the attribute `channels` lists each input's live channels, and
//! the output holds them back to back, `[N, ⌈Σ C / 16⌉, H, W, 16]`, its own last block's
//! padding zero. (Where every input but the last fills its blocks, the default domain's
//! `Concat` along axis 1 joins the blocks as they are.)
//!
//! An input block whose channels start `s` lanes into an output block is written as two
//! masked stores per position: lanes `0..16 − s` at lane `s` of that block, the rest at the
//! start of the next.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use rayon::prelude::*;

use super::{BLOCK, require_avx512, unblocked};
use crate::cpu::nn::common::{contiguous, output};
use crate::cpu::nn::matrix::SendPtr;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};
use crate::{DType, Tensor, output_buffer};

/// A built blocked `Concat`.
#[derive(Debug)]
pub struct BlockedConcat {
    channels: Vec<usize>,
}

/// Builds the blocked `Concat` (attribute: `channels`, each input's live channels).
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_avx512("Concat")?;
    spec.attrs.only(&["channels"])?;
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
    Ok(Box::new(BlockedConcat { channels }))
}

/// One input block's copy: its floats, where its channels start in the output, how many
/// are live.
struct Piece<'a> {
    src: &'a [f32],
    batch: usize,
    first: usize,
    live: usize,
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
            if c.div_ceil(BLOCK) * BLOCK != stored || geometry.is_some_and(|g| g != [n, h, w]) {
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
        let stored = total.div_ceil(BLOCK) * BLOCK;
        let plane = h * w;
        let mut pieces = Vec::new();
        for batch in 0..n {
            let mut first = 0;
            for (image, &c) in images.iter().zip(&self.channels) {
                let stored_c = c.div_ceil(BLOCK) * BLOCK;
                let image = &image[batch * stored_c * plane..(batch + 1) * stored_c * plane];
                for (k, src) in image.chunks_exact(BLOCK * plane).enumerate() {
                    pieces.push(Piece {
                        src,
                        batch,
                        first: first + k * BLOCK,
                        live: BLOCK.min(c - k * BLOCK),
                    });
                }
                first += c;
            }
        }
        let image_len = stored * plane;
        // Every live lane is written by its piece and every padding lane below.
        let y: Vec<f32> = output_buffer::build(0, n * image_len, |y| {
            if plane == 0 {
                return;
            }
            let dst = SendPtr(y.as_mut_ptr().cast::<f32>());
            pieces.par_iter().with_min_len(4).for_each(|piece| {
                // SAFETY: AVX-512F (checked at build); the piece's lanes of the output are its
                // alone, inside its image.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    let image = dst.get().add(piece.batch * image_len);
                    copy_piece(piece, image, plane)
                }
            });
            let padding = stored - total;
            if padding > 0 {
                for batch in 0..n {
                    // SAFETY: the last block of this image, inside `y`.
                    #[cfg(target_arch = "x86_64")]
                    unsafe {
                        let last = dst.get().add(batch * image_len + (stored - BLOCK) * plane);
                        zero_lanes(last, plane, BLOCK - padding)
                    }
                }
            }
        });
        Ok(vec![output(&[n, stored / BLOCK, h, w, BLOCK], y)?])
    }
}

/// Lanes `0..live` of a mask.
fn lanes_below(live: usize) -> u16 {
    ((1u32 << live) - 1) as u16
}

/// Writes `piece`'s live lanes at its channels of `image` (`plane` positions per block).
///
/// # Safety
/// The CPU has AVX-512F; `image` is valid for the blocks holding channels
/// `piece.first..piece.first + piece.live`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn copy_piece(piece: &Piece<'_>, image: *mut f32, plane: usize) {
    let (block, shift) = (piece.first / BLOCK, piece.first % BLOCK);
    let src = piece.src.as_ptr();
    let dst = unsafe { image.add(block * BLOCK * plane) };
    if shift == 0 && piece.live == BLOCK {
        // SAFETY: a whole block to a whole block.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, BLOCK * plane) };
        return;
    }
    let head = piece.live.min(BLOCK - shift);
    let (head_mask, tail_mask) = (
        lanes_below(head),
        lanes_below(piece.live) & !lanes_below(head),
    );
    // Lane `j ≥ head` goes to lane `j − head` of the next block: stored from `head` lanes
    // before that block's position.
    let next = dst.wrapping_add(BLOCK * plane).wrapping_sub(head);
    for p in 0..plane {
        // SAFETY: the masked lanes are the piece's, inside `image` (the caller's contract).
        unsafe {
            let v = _mm512_loadu_ps(src.add(p * BLOCK));
            _mm512_mask_storeu_ps(dst.add(p * BLOCK + shift), head_mask, v);
            if tail_mask != 0 {
                _mm512_mask_storeu_ps(next.wrapping_add(p * BLOCK), tail_mask, v);
            }
        }
    }
}

/// Zeros lanes `from..16` of each of the `plane` positions of the block at `block`.
///
/// # Safety
/// The CPU has AVX-512F; `block` is valid for `plane · 16` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn zero_lanes(block: *mut f32, plane: usize, from: usize) {
    let mask = !lanes_below(from);
    for p in 0..plane {
        // SAFETY: inside the block.
        unsafe { _mm512_mask_storeu_ps(block.add(p * BLOCK), mask, _mm512_setzero_ps()) };
    }
}
