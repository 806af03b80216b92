//! MeanVarianceNormalization (opsets 9, 13): `(x - E[x]) / (√(E[x²] - E[x]²) + 1e-9)`, the
//! expectations over `axes` (default `[0, 2, 3]`), as the ONNX function defines it. Computed
//! in `f64`.

use super::axes::normalize_axes;
use crate::cpu::shape::cast::cast_tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input};
use crate::{DType, Tensor};

/// The MeanVarianceNormalization kernel.
#[derive(Debug)]
pub struct MvnKernel {
    /// The axes (may be negative).
    pub axes: Vec<i64>,
}

impl Kernel for MvnKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let dtype = x.dtype();
        if !dtype.is_float() {
            return Err(KernelError::UnsupportedDType { index: 0, dtype });
        }
        let shape = x.shape();
        let mut axes = normalize_axes(&self.axes, shape.len())?;
        axes.sort_unstable();
        axes.dedup();
        // Each element's group: its index with the reduced axes left out.
        let mut group_strides = vec![0usize; shape.len()];
        let mut groups = 1usize;
        for d in (0..shape.len()).rev() {
            if !axes.contains(&d) {
                group_strides[d] = groups;
                groups *= shape[d];
            }
        }
        let xs = x.to_f64_vec()?;
        let mut group_of = vec![0usize; xs.len()];
        let mut idx = vec![0usize; shape.len()];
        for g in group_of.iter_mut() {
            *g = idx.iter().zip(&group_strides).map(|(i, s)| i * s).sum();
            for d in (0..shape.len()).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        let mut sum = vec![0f64; groups];
        let mut sum_sq = vec![0f64; groups];
        let mut count = vec![0usize; groups];
        for (&v, &g) in xs.iter().zip(&group_of) {
            sum[g] += v;
            sum_sq[g] += v * v;
            count[g] += 1;
        }
        let y: Vec<f64> = xs
            .iter()
            .zip(&group_of)
            .map(|(&v, &g)| {
                let n = count[g] as f64;
                let mean = sum[g] / n;
                let std = (sum_sq[g] / n - mean * mean).sqrt();
                (v - mean) / (std + 1e-9)
            })
            .collect();
        let t = Tensor::from_shape_vec(shape, y)?;
        Ok(vec![match dtype {
            DType::F64 => t,
            _ => cast_tensor(&t, dtype)?,
        }])
    }
}
