//! `BatchNormalization` (opsets 7, 9, 14, 15; inference mode, and training mode: from opset 14
//! `training_mode = 1`, before it a node with more than one output)
//! and `InstanceNormalization` (1, 6, 22): per-channel affine normalisation of `(N, C, ...)`.

use rayon::prelude::*;

use super::common::{Real, contiguous, min_opset, narrow, output, widen};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{DType, Tensor};

/// A built `BatchNormalization`.
#[derive(Debug)]
pub struct BatchNorm {
    epsilon: f64,
    momentum: f64,
    training: bool,
    /// How many outputs the node names (1 to 5).
    outputs: usize,
}

/// Builds `BatchNormalization`.
pub fn build_batch(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 7, "BatchNormalization")?;
    let a = spec.attrs;
    match spec.opset {
        7..=8 => a.only(&["epsilon", "momentum", "spatial"])?,
        9..=13 => a.only(&["epsilon", "momentum"])?,
        _ => a.only(&["epsilon", "momentum", "training_mode"])?,
    }
    if a.int("spatial", 1)? != 1 {
        return Err(KernelError::UnsupportedAttribute {
            name: "spatial".into(),
            reason: "only spatial = 1 (per-channel statistics) is implemented".into(),
        });
    }
    // Before opset 14 the outputs say the mode: training statistics are asked for by naming
    // them (`mean`, `var`, `saved_mean`, `saved_var`), as ORT reads it.
    let (training, most) = match spec.opset {
        ..14 => (spec.num_outputs > 1, 5),
        _ => (a.flag("training_mode", false)?, 3),
    };
    if spec.num_outputs > 1 && !training {
        return Err(KernelError::UnsupportedAttribute {
            name: "outputs".into(),
            reason: format!(
                "BatchNormalization with {} outputs (training statistics) needs \
                 training_mode = 1",
                spec.num_outputs
            ),
        });
    }
    if spec.num_outputs > most {
        return Err(KernelError::Arity(format!(
            "{} outputs, at most {most} in opset {}",
            spec.num_outputs, spec.opset
        )));
    }
    Ok(Box::new(BatchNorm {
        epsilon: a.float("epsilon", 1e-5)? as f64,
        momentum: a.float("momentum", 0.9)? as f64,
        training,
        outputs: spec.num_outputs,
    }))
}

/// Reads a per-channel parameter of length `c`.
fn channel_param(t: &Tensor, c: usize, what: &str) -> Result<Vec<f64>> {
    if t.shape() != [c] {
        return Err(KernelError::Shape(format!(
            "{what} has shape {:?}, expected [{c}]",
            t.shape()
        )));
    }
    t.to_f64_vec()
}

/// `y = (x - mean[c]) * scale[c] / sqrt(var[c] + eps) + bias[c]` over `(N, C, ...)` data.
fn affine<T: Real>(x: &[T], channels: usize, plane: usize, mul: &[f64], add: &[f64]) -> Vec<T> {
    let mut y = crate::output_buffer::filled(0, x.len(), T::ZERO);
    if plane == 0 {
        return y;
    }
    y.par_chunks_mut(plane)
        .zip(x.par_chunks(plane))
        .enumerate()
        .for_each(|(r, (yp, xp))| {
            let c = r % channels;
            let (m, a) = (T::of(mul[c]), T::of(add[c]));
            for (o, &v) in yp.iter_mut().zip(xp) {
                *o = v * m + a;
            }
        });
    y
}

/// Per-channel mean and population variance over `(N, C, ...)` data (computed in f64).
fn channel_stats<T: Real>(
    x: &[T],
    n: usize,
    channels: usize,
    plane: usize,
) -> (Vec<f64>, Vec<f64>) {
    (0..channels)
        .into_par_iter()
        .map(|c| {
            let count = (n * plane) as f64;
            let mut sum = 0.0;
            for b in 0..n {
                let p = &x[(b * channels + c) * plane..(b * channels + c + 1) * plane];
                sum += p
                    .iter()
                    .map(|v| v.to_f64().unwrap_or(f64::NAN))
                    .sum::<f64>();
            }
            let mean = sum / count;
            let mut sq = 0.0;
            for b in 0..n {
                let p = &x[(b * channels + c) * plane..(b * channels + c + 1) * plane];
                sq += p
                    .iter()
                    .map(|v| (v.to_f64().unwrap_or(f64::NAN) - mean).powi(2))
                    .sum::<f64>();
            }
            (mean, sq / count)
        })
        .unzip()
}

fn nc(shape: &[usize], op: &str) -> Result<(usize, usize, usize)> {
    if shape.len() < 2 {
        return Err(KernelError::Shape(format!(
            "{op} needs rank >= 2, got {shape:?}"
        )));
    }
    Ok((shape[0], shape[1], shape[2..].iter().product()))
}

impl BatchNorm {
    fn typed<T: Real>(
        &self,
        x: &Tensor,
        p: [Vec<f64>; 4],
        stats_dtype: DType,
    ) -> Result<Vec<Tensor>> {
        let (n, c, plane) = nc(x.shape(), "BatchNormalization")?;
        let xs = contiguous::<T>(x)?;
        let [scale, bias, mean_in, var_in] = p;
        let (mean, var) = if self.training {
            channel_stats(&xs, n, c, plane)
        } else {
            (mean_in.clone(), var_in.clone())
        };
        let mul: Vec<f64> = (0..c)
            .map(|i| scale[i] / (var[i] + self.epsilon).sqrt())
            .collect();
        let add: Vec<f64> = (0..c).map(|i| bias[i] - mean[i] * mul[i]).collect();
        let y = output(x.shape(), affine(&xs, c, plane, &mul, &add))?;
        let mut outs = vec![y];
        if self.training {
            let mo = self.momentum;
            for (run, cur) in [(&mean_in, &mean), (&var_in, &var)] {
                let v: Vec<f64> = run
                    .iter()
                    .zip(cur)
                    .map(|(r, b)| r * mo + b * (1.0 - mo))
                    .collect();
                let t = output(&[c], v)?;
                outs.push(cast_stats(t, stats_dtype)?);
            }
            // Opsets 7–13's `saved_mean` and `saved_var`, when the node names them: the batch's
            // mean and, as ORT and cuDNN keep it for the gradient, its inverse standard
            // deviation.
            if self.outputs > 3 {
                let inv_std = var
                    .iter()
                    .map(|v| 1.0 / (v + self.epsilon).sqrt())
                    .collect();
                for saved in [mean, inv_std] {
                    outs.push(cast_stats(output(&[c], saved)?, stats_dtype)?);
                }
            }
            outs.truncate(self.outputs);
        }
        Ok(outs)
    }
}

fn cast_stats(t: Tensor, dtype: DType) -> Result<Tensor> {
    let a = t.to_f32_array()?;
    match dtype {
        DType::F64 => Ok(Tensor::F64(t.view::<f64>()?.to_owned().into_shared())),
        DType::F32 => Ok(Tensor::F32(a.into_shared())),
        DType::F16 | DType::BF16 => narrow(Tensor::F32(a.into_shared()), dtype),
        other => Err(KernelError::UnsupportedDType {
            index: 3,
            dtype: other,
        }),
    }
}

impl Kernel for BatchNorm {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let dtype = x.dtype();
        let c = *x
            .shape()
            .get(1)
            .ok_or_else(|| KernelError::Shape("BatchNormalization needs rank >= 2".into()))?;
        let names = ["scale", "B", "input_mean", "input_var"];
        let mut p: [Vec<f64>; 4] = Default::default();
        for (i, name) in names.iter().enumerate() {
            let t = input(inputs, i + 1)?;
            if !t.dtype().is_float() {
                return Err(KernelError::UnsupportedDType {
                    index: i + 1,
                    dtype: t.dtype(),
                });
            }
            p[i] = channel_param(t, c, name)?;
        }
        let stats_dtype = input(inputs, 3)?.dtype();
        let w = widen(x, 0)?;
        let mut outs = match w {
            Tensor::F64(_) => self.typed::<f64>(&w, p, stats_dtype)?,
            _ => self.typed::<f32>(&w, p, stats_dtype)?,
        };
        outs[0] = narrow(outs[0].clone(), dtype)?;
        Ok(outs)
    }
}

/// A built `InstanceNormalization`.
#[derive(Debug)]
pub struct InstanceNorm {
    epsilon: f64,
}

/// Builds `InstanceNormalization`.
pub fn build_instance(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 6, "InstanceNormalization")?;
    spec.attrs.only(&["epsilon"])?;
    Ok(Box::new(InstanceNorm {
        epsilon: spec.attrs.float("epsilon", 1e-5)? as f64,
    }))
}

impl InstanceNorm {
    fn typed<T: Real>(&self, x: &Tensor, scale: &[f64], bias: &[f64]) -> Result<Tensor> {
        let (n, c, plane) = nc(x.shape(), "InstanceNormalization")?;
        let xs = contiguous::<T>(x)?;
        let mut mul = vec![0.0; n * c];
        let mut add = vec![0.0; n * c];
        for b in 0..n {
            let (mean, var) = channel_stats(&xs[b * c * plane..(b + 1) * c * plane], 1, c, plane);
            for ch in 0..c {
                mul[b * c + ch] = scale[ch] / (var[ch] + self.epsilon).sqrt();
                add[b * c + ch] = bias[ch] - mean[ch] * mul[b * c + ch];
            }
        }
        output(x.shape(), affine(&xs, n * c, plane, &mul, &add))
    }
}

impl Kernel for InstanceNorm {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let dtype = x.dtype();
        let c = *x
            .shape()
            .get(1)
            .ok_or_else(|| KernelError::Shape("InstanceNormalization needs rank >= 2".into()))?;
        for i in 1..3 {
            if input(inputs, i)?.dtype() != dtype {
                return Err(KernelError::DTypeMismatch(format!(
                    "input {i} differs from X ({dtype})"
                )));
            }
        }
        let scale = channel_param(input(inputs, 1)?, c, "scale")?;
        let bias = channel_param(input(inputs, 2)?, c, "B")?;
        let w = widen(x, 0)?;
        let y = match w {
            Tensor::F64(_) => self.typed::<f64>(&w, &scale, &bias)?,
            _ => self.typed::<f32>(&w, &scale, &bias)?,
        };
        Ok(vec![narrow(y, dtype)?])
    }
}

#[cfg(test)]
mod tests {
    use crate::{AttrValue, Attributes, NodeSpec, Tensor};

    /// Opset 9 with five outputs runs in training mode, as ORT does (the differential fuzzer's
    /// seed 20894 was refused): the outputs are ORT 1.31's for these inputs.
    #[test]
    fn opset9_five_outputs_are_the_training_statistics() {
        let attrs = Attributes::new()
            .with("epsilon", AttrValue::Float(0.01))
            .with("momentum", AttrValue::Float(0.75));
        let spec = NodeSpec {
            op_type: "BatchNormalization",
            domain: "",
            opset: 9,
            attrs: &attrs,
            num_inputs: 5,
            num_outputs: 5,
            options: Default::default(),
        };
        let x = Tensor::from_shape_vec(&[2, 2, 1, 2], vec![1f32, 2., 3., 5., -1., 0., 4., 8.]);
        let channel = |v: [f32; 2]| Tensor::from_shape_vec(&[2], v.to_vec()).unwrap();
        let (scale, bias) = (channel([1.5, -2.0]), channel([0.25, 1.0]));
        let (mean, var) = (channel([0.5, -1.0]), channel([2.0, 3.0]));
        let x = x.unwrap();
        let inputs = [&x, &scale, &bias, &mean, &var].map(Some);
        let outs = super::build_batch(&spec).unwrap().run(&inputs).unwrap();
        let want: [&[f32]; 5] = [
            &[
                0.918_153_1,
                2.254_459_4,
                3.135_042_2,
                1.0,
                -1.754_459_4,
                -0.418_153_1,
                2.067_521,
                -2.202_562_8,
            ],
            &[0.5, 0.5],
            &[1.8125, 3.125],
            &[0.5, 5.0],
            &[0.890_870_8, 0.533_760_5],
        ];
        assert_eq!(outs.len(), 5);
        for (i, (got, want)) in outs.iter().zip(want).enumerate() {
            let got = got.to_f64_vec().unwrap();
            assert_eq!(got.len(), want.len(), "output {i}");
            for (g, w) in got.iter().zip(want) {
                assert!(
                    (g - f64::from(*w)).abs() < 1e-5,
                    "output {i}: {got:?} vs {want:?}"
                );
            }
        }
    }
}
