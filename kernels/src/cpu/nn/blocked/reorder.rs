//! `ReorderOutput`: a blocked `[N, ⌈C / 16⌉, H, W, 16]` image back to channel planes
//! `[N, C, H, W]`, `C` given by the attribute `channels` (default: every lane of every block).

use rayon::prelude::*;

use super::{BLOCK, live_channels, live_channels_attr, unblocked};
use crate::cpu::nn::common::{contiguous, output};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Tensor, output_buffer};

/// A built `ReorderOutput`.
#[derive(Debug)]
pub struct ReorderOutput {
    channels: Option<usize>,
}

/// Builds `ReorderOutput` (attribute: `channels`).
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    spec.attrs.only(&["channels"])?;
    Ok(Box::new(ReorderOutput {
        channels: live_channels_attr(spec)?,
    }))
}

impl Kernel for ReorderOutput {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        if x.dtype() != crate::DType::F32 {
            return Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: x.dtype(),
            });
        }
        let [n, stored, h, w] = unblocked(x.shape(), "X")?;
        let c = live_channels(self.channels, stored)?;
        let xs = contiguous::<f32>(x)?;
        let plane = h * w;
        let mut y: Vec<f32> = output_buffer::overwritable(0, n * c * plane);
        if plane > 0 && c > 0 {
            y.par_chunks_mut(c * plane)
                .zip(xs.par_chunks(stored * plane))
                .for_each(|(image, blocks)| {
                    image
                        .chunks_mut(BLOCK * plane)
                        .zip(blocks.chunks_exact(BLOCK * plane))
                        .for_each(|(planes, block)| unblock(block, planes, plane))
                });
        }
        Ok(vec![output(&[n, c, h, w], y)?])
    }
}

/// One block of 16 channels (`[plane][16]`) into its planes: 16, or fewer for a last block
/// that is partly filled (`planes` holds the live ones).
fn unblock(block: &[f32], planes: &mut [f32], plane: usize) {
    let live = planes.len() / plane;
    if live < BLOCK {
        for (j, out) in planes.chunks_exact_mut(plane).enumerate() {
            out.iter_mut()
                .zip(block.iter().skip(j).step_by(BLOCK))
                .for_each(|(o, &v)| *o = v);
        }
        return;
    }
    // Eight positions at a time: each plane gets 32 contiguous bytes per step.
    const STEP: usize = 8;
    let whole = plane / STEP * STEP;
    for q0 in (0..whole).step_by(STEP) {
        let cells: &[f32; STEP * BLOCK] = block[q0 * BLOCK..(q0 + STEP) * BLOCK]
            .try_into()
            .expect("STEP positions");
        for j in 0..BLOCK {
            let row: [f32; STEP] = std::array::from_fn(|i| cells[i * BLOCK + j]);
            planes[j * plane + q0..j * plane + q0 + STEP].copy_from_slice(&row);
        }
    }
    for q in whole..plane {
        for j in 0..BLOCK {
            planes[j * plane + q] = block[q * BLOCK + j];
        }
    }
}
