//! Softmax and LogSoftmax. Before opset 13 the input is coerced to 2-D at `axis`
//! (default 1) and normalised over the whole second dimension; from opset 13 over the
//! single dimension `axis` (default -1). Half types compute in `f32`.

use half::{bf16, f16};
use ndarray::{ArrayD, ArrayViewD, IxDyn};
use rayon::prelude::*;

use super::axes::normalize_axis;
use crate::Tensor;
use crate::cpu::binary::broadcast::PAR_THRESHOLD;
use crate::cpu::unary::real::{Real, row_max};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input};
use crate::output_buffer;

/// Elements of a block of rows that softmax normalises in one call: its input and output
/// stay in the first-level cache through the passes over them.
const BLOCK_ELEMENTS: usize = 4096;

/// A Softmax / LogSoftmax kernel.
#[derive(Debug)]
pub struct SoftmaxKernel {
    /// True for LogSoftmax.
    pub log: bool,
    /// The axis (may be negative).
    pub axis: i64,
    /// Opset < 13: flatten everything from `axis` on into one normalised dimension.
    pub coerce_2d: bool,
}

/// Normalises one `[n, inner]` block in place (`x` holds the inputs on entry).
fn block<F: Real>(x: &mut [F], n: usize, inner: usize, log: bool) {
    if inner == 1 {
        debug_assert!(
            log,
            "softmax over the last axis goes through softmax_last_axis"
        );
        return log_row(x);
    }
    let mut max = vec![F::neg_infinity(); inner];
    for row in x.chunks_exact(inner) {
        for (m, &v) in max.iter_mut().zip(row) {
            if v > *m {
                *m = v;
            }
        }
    }
    let mut sum = vec![F::zero(); inner];
    // LogSoftmax keeps `x - max` in `x` and takes the exponentials in `e`.
    let mut e = if log { vec![F::zero(); inner] } else { vec![] };
    for row in x.chunks_exact_mut(inner) {
        row.iter_mut().zip(&max).for_each(|(v, &m)| *v = *v - m);
        let exps = if log {
            e.copy_from_slice(row);
            &mut e[..]
        } else {
            row
        };
        F::exp_slice(exps, F::zero());
        sum.iter_mut()
            .zip(exps.iter())
            .for_each(|(s, &v)| *s = *s + v);
    }
    debug_assert_eq!(x.len(), n * inner);
    for row in x.chunks_exact_mut(inner) {
        for (v, &s) in row.iter_mut().zip(&sum) {
            *v = if log { *v - s.ln() } else { *v / s };
        }
    }
}

/// LogSoftmax of one contiguous row in place: the `inner == 1` case.
fn log_row<F: Real>(x: &mut [F]) {
    let max = row_max(x);
    let mut e = x.to_vec();
    F::exp_slice(&mut e, -max);
    let ln = F::sum_slice(&e).ln();
    x.iter_mut().for_each(|v| *v = *v - max - ln);
}

/// Softmax over the last axis, rows of `len` elements, into output 0's buffer: blocks of rows
/// (in parallel when `x` is long) of about [`BLOCK_ELEMENTS`].
fn softmax_last_axis<F: Real + Default>(x: &[F], len: usize) -> Vec<F> {
    let mut out = output_buffer::overwritable::<F>(0, x.len());
    let block = (BLOCK_ELEMENTS / len).max(1) * len;
    if x.len() >= PAR_THRESHOLD {
        out.par_chunks_mut(block)
            .zip(x.par_chunks(block))
            .for_each(|(o, x)| F::softmax_rows(o, x, len));
    } else {
        out.chunks_mut(block)
            .zip(x.chunks(block))
            .for_each(|(o, x)| F::softmax_rows(o, x, len));
    }
    out
}

impl SoftmaxKernel {
    fn softmax<F: Real + Default>(&self, a: &ArrayViewD<'_, F>) -> Result<ArrayD<F>> {
        let shape = a.shape();
        let axis = normalize_axis(self.axis, shape.len())?;
        let outer: usize = shape[..axis].iter().product();
        let (n, inner) = if self.coerce_2d {
            (shape[axis..].iter().product(), 1)
        } else {
            (shape[axis], shape[axis + 1..].iter().product())
        };
        let standard = a.as_standard_layout();
        let x = standard.as_slice().expect("standard layout is contiguous");
        let len = n * inner;
        if inner == 1 && !self.log && len > 0 {
            let data = softmax_last_axis(x, len);
            return ArrayD::from_shape_vec(IxDyn(shape), data)
                .map_err(|e| KernelError::Shape(e.to_string()));
        }
        let mut data = x.to_vec();
        if len > 0 {
            if data.len() >= PAR_THRESHOLD {
                data.par_chunks_mut(len)
                    .for_each(|b| block(b, n, inner, self.log));
            } else {
                data.chunks_mut(len)
                    .for_each(|b| block(b, n, inner, self.log));
            }
        }
        debug_assert_eq!(data.len(), outer * len);
        ArrayD::from_shape_vec(IxDyn(shape), data).map_err(|e| KernelError::Shape(e.to_string()))
    }
}

impl Kernel for SoftmaxKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let out = match x {
            Tensor::F32(a) => Tensor::from(self.softmax(&a.view())?),
            Tensor::F64(a) => Tensor::from(self.softmax(&a.view())?),
            Tensor::F16(a) => Tensor::from(
                self.softmax(&a.mapv(f16::to_f32).view())?
                    .mapv(f16::from_f32),
            ),
            Tensor::BF16(a) => Tensor::from(
                self.softmax(&a.mapv(bf16::to_f32).view())?
                    .mapv(bf16::from_f32),
            ),
            other => {
                return Err(KernelError::UnsupportedDType {
                    index: 0,
                    dtype: other.dtype(),
                });
            }
        };
        Ok(vec![out])
    }
}
