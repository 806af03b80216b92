//! `LRN` (opsets 1, 13): local response normalisation across channels,
//! `y = x / (bias + alpha / size * sum_{c' near c} x[c']^2) ^ beta`.

use rayon::prelude::*;

use super::common::{Real, contiguous, min_opset, narrow, output, widen};
use crate::Tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};

/// A built `LRN`.
#[derive(Debug)]
pub struct Lrn {
    alpha: f64,
    beta: f64,
    bias: f64,
    size: usize,
}

/// Builds `LRN`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 1, "LRN")?;
    spec.attrs.only(&["alpha", "beta", "bias", "size"])?;
    let size = spec.attrs.req_int("size")?;
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s > 0)
        .ok_or_else(|| KernelError::BadAttribute {
            name: "size".into(),
            reason: format!("must be >= 1, got {size}"),
        })?;
    Ok(Box::new(Lrn {
        alpha: spec.attrs.float("alpha", 1e-4)? as f64,
        beta: spec.attrs.float("beta", 0.75)? as f64,
        bias: spec.attrs.float("bias", 1.0)? as f64,
        size,
    }))
}

impl Lrn {
    fn typed<T: Real>(&self, x: &Tensor) -> Result<Tensor> {
        let shape = x.shape();
        if shape.len() < 3 {
            return Err(KernelError::Shape(format!(
                "LRN needs rank >= 3, got {shape:?}"
            )));
        }
        let c = shape[1];
        let plane: usize = shape[2..].iter().product();
        let xs = contiguous::<T>(x)?;
        let (before, after) = ((self.size - 1) / 2, (self.size - 1).div_ceil(2));
        let mut y = vec![T::ZERO; xs.len()];
        if plane > 0 {
            y.par_chunks_mut(plane).enumerate().for_each(|(r, yp)| {
                let (b, ch) = (r / c, r % c);
                let lo = ch.saturating_sub(before);
                let hi = (ch + after).min(c - 1);
                for (i, o) in yp.iter_mut().enumerate() {
                    let mut sq = 0.0f64;
                    for cc in lo..=hi {
                        let v = xs[(b * c + cc) * plane + i].to_f64().unwrap_or(f64::NAN);
                        sq += v * v;
                    }
                    let v = xs[r * plane + i].to_f64().unwrap_or(f64::NAN);
                    *o =
                        T::of(v / (self.bias + self.alpha / self.size as f64 * sq).powf(self.beta));
                }
            });
        }
        output(shape, y)
    }
}

impl Kernel for Lrn {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let dtype = x.dtype();
        let w = widen(x, 0)?;
        let y = match w {
            Tensor::F64(_) => self.typed::<f64>(&w)?,
            _ => self.typed::<f32>(&w)?,
        };
        Ok(vec![narrow(y, dtype)?])
    }
}
