//! NonZero (opset 9, 13).

use ndarray::{ArcArray, IxDyn};
use rayon::prelude::*;

use super::util::{contiguous, require_opset, strides, tensor_from_vec};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Tensor, dispatch_all};

/// The coordinates of the non-zero elements, as an int64 `[rank, count]` tensor in row-major order.
///
/// "Non-zero" is `!= default`: non-zero numbers (NaN included), `true`, non-empty strings. A
/// scalar input is treated as a one-element vector, as ONNX Runtime does.
#[derive(Debug)]
pub(crate) struct NonZero;

/// Builds NonZero.
pub(crate) fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_opset(spec.opset, 9, "NonZero")?;
    spec.attrs.only(&[])?;
    Ok(Box::new(NonZero))
}

impl Kernel for NonZero {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        if x.dtype().is_low_precision() {
            // Not an ONNX NonZero type; comparing codes with code 0 would also be wrong for
            // -0 and float8 E8M0 (which has no zero).
            return Err(KernelError::UnsupportedDType {
                index: 0,
                dtype: x.dtype(),
            });
        }
        let flat = dispatch_all!(x, a => nonzero_positions(a));
        let shape: Vec<usize> = if x.rank() == 0 {
            vec![1]
        } else {
            x.shape().to_vec()
        };
        let st = strides(&shape);
        let n = flat.len();
        let mut out = crate::output_buffer::overwritable::<i64>(0, shape.len() * n);
        // Row d holds every position's coordinate along axis d.
        let coordinates = |((row, &stride), &len): ((&mut [i64], &usize), &usize)| {
            for (o, &p) in row.iter_mut().zip(&flat) {
                *o = ((p / stride) % len) as i64;
            }
        };
        if out.len() < 2 * SCAN_CHUNK {
            out.chunks_mut(n.max(1))
                .zip(&st)
                .zip(&shape)
                .for_each(coordinates);
        } else {
            out.par_chunks_mut(n.max(1))
                .zip(&st)
                .zip(&shape)
                .for_each(coordinates);
        }
        Ok(vec![tensor_from_vec(&[shape.len(), n], out)?])
    }
}

fn nonzero_positions<T: PartialEq + Default + Sync + Clone>(a: &ArcArray<T, IxDyn>) -> Vec<usize> {
    let zero = T::default();
    let data = contiguous(a);
    let scan = |(c, chunk): (usize, &[T])| -> Vec<usize> {
        let base = c * SCAN_CHUNK;
        let found = chunk.iter().enumerate().filter(|(_, v)| **v != zero);
        found.map(|(i, _)| base + i).collect()
    };
    if data.len() < 2 * SCAN_CHUNK {
        return scan((0, &data));
    }
    let parts: Vec<Vec<usize>> = data.par_chunks(SCAN_CHUNK).enumerate().map(scan).collect();
    parts.concat()
}

/// Elements per parallel scan task (long inputs: a detector's 11M score flags).
const SCAN_CHUNK: usize = 1 << 16;
