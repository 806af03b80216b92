//! `Pad` of a blocked image's height and width with a constant: the attribute `pads` is
//! `[top, left, bottom, right]` (negative values crop), `value` the constant (default 0).
//! Each output row is a run of the input row's vectors between runs of the constant.

use rayon::prelude::*;

use super::{BLOCK, unblocked};
use crate::cpu::nn::common::{contiguous, output};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{DType, Tensor, output_buffer};

/// A built blocked `Pad`.
#[derive(Debug)]
pub struct BlockedPad {
    /// Top, left, bottom, right.
    pads: [i64; 4],
    value: f32,
}

/// Builds the blocked `Pad` (attributes `pads`, four values, and `value`).
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    spec.attrs.only(&["pads", "value"])?;
    let pads = spec.attrs.opt_ints("pads")?.unwrap_or_default();
    let pads: [i64; 4] =
        pads.try_into()
            .map_err(|p: Vec<i64>| KernelError::UnsupportedAttribute {
                name: "pads".into(),
                reason: format!("the blocked Pad takes [top, left, bottom, right], got {p:?}"),
            })?;
    Ok(Box::new(BlockedPad {
        pads,
        value: spec.attrs.float("value", 0.0)?,
    }))
}

impl Kernel for BlockedPad {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        if x.dtype() != DType::F32 {
            return Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: x.dtype(),
            });
        }
        let [n, c, h, w] = unblocked(x.shape(), "X")?;
        let [top, left, bottom, right] = self.pads;
        let grown = |size: usize, a: i64, b: i64| {
            usize::try_from(size as i64 + a + b).map_err(|_| {
                KernelError::Shape(format!(
                    "pads {:?} crop more than the image's {h}×{w}",
                    self.pads
                ))
            })
        };
        let (oh, ow) = (grown(h, top, bottom)?, grown(w, left, right)?);
        let xs = contiguous::<f32>(x)?;
        let (plane, out_plane) = (h * w * BLOCK, oh * ow * BLOCK);
        // Output column `ox` reads input column `ox − left`; these are the output columns
        // that have one.
        let cols = (
            (left.max(0) as usize).min(ow),
            ((w as i64 + left).clamp(0, ow as i64)) as usize,
        );
        let mut y: Vec<f32> = output_buffer::overwritable(0, n * c / BLOCK * out_plane);
        if plane == 0 {
            // No input cells: every output cell is the constant.
            y.fill(self.value);
        } else if out_plane > 0 {
            y.par_chunks_mut(out_plane)
                .zip(xs.par_chunks(plane))
                .for_each(|(out, block)| {
                    for (oy, row) in out.chunks_exact_mut(ow * BLOCK).enumerate() {
                        let iy = oy as i64 - top;
                        if iy < 0 || iy >= h as i64 || cols.0 >= cols.1 {
                            row.fill(self.value);
                            continue;
                        }
                        let ix = (cols.0 as i64 - left) as usize;
                        let src =
                            &block[(iy as usize * w + ix) * BLOCK..][..(cols.1 - cols.0) * BLOCK];
                        row[..cols.0 * BLOCK].fill(self.value);
                        row[cols.0 * BLOCK..cols.1 * BLOCK].copy_from_slice(src);
                        row[cols.1 * BLOCK..].fill(self.value);
                    }
                });
        }
        Ok(vec![output(&[n, c / BLOCK, oh, ow, BLOCK], y)?])
    }
}
