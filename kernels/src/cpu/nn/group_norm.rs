//! `GroupNormalization` (opset 18, 21): the channels of `X` (`[N, C, ...]`) split into
//! `num_groups` groups, each group of each sample normalised to zero mean and unit variance,
//! then scaled and shifted per channel (`Scale` and `B` of `C` values; of `num_groups` values
//! at opset 18). Computed in `f64`.

use super::common::min_opset;
use crate::cpu::shape::cast::cast_tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{DType, Tensor};

/// A built `GroupNormalization`.
#[derive(Debug)]
pub struct GroupNorm {
    groups: usize,
    epsilon: f64,
    opset: i64,
}

/// Builds `GroupNormalization`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 18, "GroupNormalization")?;
    let mut known = vec!["epsilon", "num_groups"];
    if spec.opset >= 21 {
        known.push("stash_type");
    }
    spec.attrs.only(&known)?;
    super::layer_norm::float_stash(spec)?;
    if spec.num_inputs != 3 {
        return Err(KernelError::Arity(
            "GroupNormalization takes three inputs".into(),
        ));
    }
    let groups = spec.attrs.req_int("num_groups")?;
    let groups = usize::try_from(groups)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| KernelError::BadAttribute {
            name: "num_groups".into(),
            reason: format!("must be positive, got {groups}"),
        })?;
    Ok(Box::new(GroupNorm {
        groups,
        epsilon: spec.attrs.float("epsilon", 1e-5)? as f64,
        opset: spec.opset,
    }))
}

impl Kernel for GroupNorm {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (x, scale, bias) = (input(inputs, 0)?, input(inputs, 1)?, input(inputs, 2)?);
        let dtype = x.dtype();
        if !dtype.is_float() {
            return Err(KernelError::UnsupportedDType { index: 0, dtype });
        }
        let shape = x.shape();
        if shape.len() < 2 {
            return Err(KernelError::Shape(format!(
                "GroupNormalization needs rank >= 2, got {shape:?}"
            )));
        }
        let (n, c, g) = (shape[0], shape[1], self.groups);
        if c % g != 0 {
            return Err(KernelError::Shape(format!(
                "{c} channels do not split into {g} groups"
            )));
        }
        let spatial: usize = shape[2..].iter().product();
        let per_group = c / g;
        // Per channel (opset 21) or per group (opset 18) parameters.
        let per_channel = |t: &Tensor, what: &str| -> Result<Vec<f64>> {
            let v = t.to_f64_vec()?;
            if v.len() == c {
                Ok(v)
            } else if self.opset < 21 && v.len() == g {
                Ok(v.iter()
                    .flat_map(|&s| std::iter::repeat_n(s, per_group))
                    .collect())
            } else {
                Err(KernelError::Shape(format!(
                    "{what} has {} values, expected {c}",
                    v.len()
                )))
            }
        };
        let (scale, bias) = (per_channel(scale, "scale")?, per_channel(bias, "bias")?);
        let xs = x.to_f64_vec()?;
        let mut y = vec![0f64; xs.len()];
        let len = per_group * spatial;
        if len > 0 {
            for (k, (yg, xg)) in y.chunks_mut(len).zip(xs.chunks(len)).enumerate() {
                let first_channel = (k % g) * per_group;
                let mean = xg.iter().sum::<f64>() / len as f64;
                let var = xg.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / len as f64;
                let inv = 1.0 / (var + self.epsilon).sqrt();
                for (i, (o, v)) in yg.iter_mut().zip(xg).enumerate() {
                    let ch = first_channel + i / spatial;
                    *o = (v - mean) * inv * scale[ch] + bias[ch];
                }
            }
        }
        debug_assert_eq!(y.len(), n * c * spatial);
        let t = Tensor::from_shape_vec(shape, y)?;
        Ok(vec![match dtype {
            DType::F64 => t,
            _ => cast_tensor(&t, dtype)?,
        }])
    }
}
