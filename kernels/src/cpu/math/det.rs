//! `Det`: the determinant of each square matrix in the last two dimensions (`[*, M, M]` to
//! `[*]`), by LU decomposition with partial pivoting, computed in `f64`.

use half::{bf16, f16};

use crate::Tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, input};

/// The Det kernel.
#[derive(Debug)]
pub struct DetKernel;

/// The determinant of the `n × n` row-major matrix `m` (overwritten).
pub fn determinant(m: &mut [f64], n: usize) -> f64 {
    let mut det = 1.0;
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&a, &b| m[a * n + col].abs().total_cmp(&m[b * n + col].abs()))
            .unwrap_or(col);
        let p = m[pivot * n + col];
        if p == 0.0 {
            return 0.0;
        }
        if pivot != col {
            for k in 0..n {
                m.swap(pivot * n + k, col * n + k);
            }
            det = -det;
        }
        det *= p;
        for row in col + 1..n {
            let f = m[row * n + col] / p;
            if f != 0.0 {
                for k in col + 1..n {
                    m[row * n + k] -= f * m[col * n + k];
                }
            }
        }
    }
    det
}

impl Kernel for DetKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let shape = x.shape();
        let r = shape.len();
        if r < 2 || shape[r - 1] != shape[r - 2] {
            return Err(KernelError::Shape(format!(
                "Det takes square matrices in the last two dimensions, got shape {shape:?}"
            )));
        }
        let n = shape[r - 1];
        let batch = &shape[..r - 2];
        let values: Vec<f64> = match x {
            Tensor::F32(a) => a.iter().map(|&v| f64::from(v)).collect(),
            Tensor::F64(a) => a.iter().copied().collect(),
            Tensor::F16(a) => a.iter().map(|&v| f64::from(v.to_f32())).collect(),
            Tensor::BF16(a) => a.iter().map(|&v| f64::from(v.to_f32())).collect(),
            other => {
                return Err(KernelError::UnsupportedDType {
                    index: 0,
                    dtype: other.dtype(),
                });
            }
        };
        let dets: Vec<f64> = if n == 0 {
            vec![1.0; batch.iter().product()]
        } else {
            values
                .chunks_exact(n * n)
                .map(|m| determinant(&mut m.to_vec(), n))
                .collect()
        };
        let out = match x {
            Tensor::F32(_) => {
                Tensor::from_shape_vec(batch, dets.iter().map(|&d| d as f32).collect())?
            }
            Tensor::F16(_) => {
                Tensor::from_shape_vec(batch, dets.iter().map(|&d| f16::from_f64(d)).collect())?
            }
            Tensor::BF16(_) => {
                Tensor::from_shape_vec(batch, dets.iter().map(|&d| bf16::from_f64(d)).collect())?
            }
            _ => Tensor::from_shape_vec(batch, dets)?,
        };
        Ok(vec![out])
    }
}
