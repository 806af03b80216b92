//! `ReorderOutput`: a blocked `[N, C / 16, H, W, 16]` image back to channel planes
//! `[N, C, H, W]`.

use rayon::prelude::*;

use super::{BLOCK, unblocked};
use crate::cpu::nn::common::{contiguous, output};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Tensor, output_buffer};

/// A built `ReorderOutput`.
#[derive(Debug)]
pub struct ReorderOutput;

/// Builds `ReorderOutput` (no attributes).
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    spec.attrs.only(&[])?;
    Ok(Box::new(ReorderOutput))
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
        let [n, c, h, w] = unblocked(x.shape(), "X")?;
        let xs = contiguous::<f32>(x)?;
        let plane = h * w;
        let mut y: Vec<f32> = output_buffer::overwritable(0, n * c * plane);
        if plane > 0 {
            y.par_chunks_mut(BLOCK * plane)
                .zip(xs.par_chunks(BLOCK * plane))
                .for_each(|(planes, block)| unblock(block, planes, plane));
        }
        Ok(vec![output(&[n, c, h, w], y)?])
    }
}

/// One block of 16 channels (`[plane][16]`) into its 16 planes.
fn unblock(block: &[f32], planes: &mut [f32], plane: usize) {
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
