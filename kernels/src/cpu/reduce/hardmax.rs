//! Hardmax and LpNormalization: per-slice functions along one axis.
//!
//! Hardmax sets the first largest element of each slice along `axis` to 1 and the others to
//! 0; before opset 13 the input is coerced to 2-D at `axis` (default 1), as Softmax's is.
//! LpNormalization divides each slice along `axis` by its L1 or L2 norm (a zero norm gives
//! zeros). Half types compute in `f32`.

use half::{bf16, f16};
use ndarray::{ArrayD, ArrayViewD, IxDyn};

use super::axes::{blocked, normalize_axis};
use crate::Tensor;
use crate::cpu::unary::real::Real;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input};

/// What is computed over each slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceOp {
    /// One-hot of the first maximum.
    Hardmax,
    /// Division by the `p`-norm (`p` is 1 or 2).
    LpNorm(u8),
}

/// A Hardmax or LpNormalization kernel.
#[derive(Debug)]
pub struct SliceKernel {
    /// The function.
    pub op: SliceOp,
    /// The axis (may be negative).
    pub axis: i64,
    /// Hardmax before opset 13: everything from `axis` on is one slice.
    pub coerce_2d: bool,
}

impl SliceKernel {
    fn compute<F: Real>(&self, a: &ArrayViewD<'_, F>) -> Result<ArrayD<F>> {
        let rank = a.ndim();
        let axis = if rank == 0 {
            0
        } else {
            normalize_axis(self.axis, rank)?
        };
        let axes: Vec<usize> = if rank == 0 {
            vec![]
        } else if self.coerce_2d {
            (axis..rank).collect()
        } else {
            vec![axis]
        };
        let b = blocked(a, &axes);
        let (outer, n, inner) = (b.outer, b.reduced, b.inner);
        let data = b.slice();
        let mut out = vec![F::zero(); data.len()];
        for o in 0..outer {
            for i in 0..inner {
                let at = |j: usize| (o * n + j) * inner + i;
                match self.op {
                    SliceOp::Hardmax if n > 0 => {
                        // The first maximum, or the first NaN (as numpy's argmax has it).
                        let mut k = 0;
                        for j in 1..n {
                            let (v, m) = (data[at(j)], data[at(k)]);
                            if m.is_nan() {
                                break;
                            }
                            if v.is_nan() || v > m {
                                k = j;
                            }
                        }
                        out[at(k)] = F::one();
                    }
                    SliceOp::Hardmax => {}
                    SliceOp::LpNorm(p) => {
                        let mut norm = F::zero();
                        for j in 0..n {
                            let v = data[at(j)];
                            norm = norm + if p == 1 { v.abs() } else { v * v };
                        }
                        if p == 2 {
                            norm = norm.sqrt();
                        }
                        for j in 0..n {
                            out[at(j)] = if norm == F::zero() {
                                F::zero()
                            } else {
                                data[at(j)] / norm
                            };
                        }
                    }
                }
            }
        }
        // `blocked` moves nothing for one axis or a trailing run of axes: `out` is in the
        // input's order.
        Ok(ArrayD::from_shape_vec(IxDyn(a.shape()), out).expect("same size as the input"))
    }
}

impl Kernel for SliceKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let out = match x {
            Tensor::F32(a) => Tensor::from(self.compute(&a.view())?),
            Tensor::F64(a) => Tensor::from(self.compute(&a.view())?),
            Tensor::F16(a) => {
                let wide = a.mapv(f16::to_f32);
                Tensor::from(self.compute(&wide.view())?.mapv(f16::from_f32))
            }
            Tensor::BF16(a) => {
                let wide = a.mapv(bf16::to_f32);
                Tensor::from(self.compute(&wide.view())?.mapv(bf16::from_f32))
            }
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
