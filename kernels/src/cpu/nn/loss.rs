//! The training losses `NegativeLogLikelihoodLoss` (opsets 12, 13, 22) and
//! `SoftmaxCrossEntropyLoss` (12, 13), as the ONNX reference computes them.
//!
//! Input `[N, C, d1, ...]`, target `[N, d1, ...]` of class indices, optional weight `[C]`.
//! Each element's loss is `-w[t] · x[n, t, d]` (`w` is 1 without weights), 0 where the target
//! is `ignore_index`. `reduction` `none` keeps the target's shape; `sum` adds the losses;
//! `mean` divides the sum by the sum of the weights of the elements not ignored (their count
//! without weights). `SoftmaxCrossEntropyLoss` applies `LogSoftmax` over `C` first, and its
//! optional second output is that log-probability. Computed in `f64`.

use super::common::min_opset;
use crate::cpu::shape::cast::cast_tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{DType, Tensor};

/// How the element losses are reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// Kept as they are.
    None,
    /// Summed.
    Sum,
    /// Weighted mean.
    Mean,
}

/// A built loss.
#[derive(Debug)]
pub struct Loss {
    /// `SoftmaxCrossEntropyLoss` (else `NegativeLogLikelihoodLoss`).
    softmax: bool,
    reduction: Reduction,
    ignore_index: Option<i64>,
    /// `SoftmaxCrossEntropyLoss` with the `log_prob` output.
    log_prob: bool,
}

/// Builds `NegativeLogLikelihoodLoss` or `SoftmaxCrossEntropyLoss`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 12, spec.op_type)?;
    spec.attrs.only(&["ignore_index", "reduction"])?;
    let softmax = spec.op_type == "SoftmaxCrossEntropyLoss";
    let reduction = match spec.attrs.string("reduction", "mean")?.as_str() {
        "none" => Reduction::None,
        "sum" => Reduction::Sum,
        "mean" => Reduction::Mean,
        other => {
            return Err(KernelError::BadAttribute {
                name: "reduction".into(),
                reason: format!("must be 'none', 'sum' or 'mean', got '{other}'"),
            });
        }
    };
    if !(2..=3).contains(&spec.num_inputs) {
        return Err(KernelError::Arity(format!(
            "{} takes two or three inputs",
            spec.op_type
        )));
    }
    let most = if softmax { 2 } else { 1 };
    if !(1..=most).contains(&spec.num_outputs) {
        return Err(KernelError::Arity(format!(
            "{} has at most {most} output(s)",
            spec.op_type
        )));
    }
    Ok(Box::new(Loss {
        softmax,
        reduction,
        ignore_index: spec.attrs.opt_int("ignore_index")?,
        log_prob: softmax && spec.num_outputs == 2,
    }))
}

/// `x` (`[N, C, D]` flattened) with `LogSoftmax` taken over `C` in place.
fn log_softmax(x: &mut [f64], c: usize, d: usize) {
    for sample in x.chunks_mut(c * d) {
        for j in 0..d {
            let max = (0..c)
                .map(|k| sample[k * d + j])
                .fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..c).map(|k| (sample[k * d + j] - max).exp()).sum();
            let log_sum = sum.ln();
            for k in 0..c {
                sample[k * d + j] = sample[k * d + j] - max - log_sum;
            }
        }
    }
}

impl Kernel for Loss {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (x, target) = (input(inputs, 0)?, input(inputs, 1)?);
        let weight = opt_input(inputs, 2);
        let dtype = x.dtype();
        if !dtype.is_float() {
            return Err(KernelError::UnsupportedDType { index: 0, dtype });
        }
        if !matches!(target.dtype(), DType::I32 | DType::I64) {
            return Err(KernelError::UnsupportedDType {
                index: 1,
                dtype: target.dtype(),
            });
        }
        let shape = x.shape();
        if shape.len() < 2 {
            return Err(KernelError::Shape(format!(
                "the input must be at least [N, C], got {shape:?}"
            )));
        }
        let (n, c) = (shape[0], shape[1]);
        let mut want = vec![n];
        want.extend_from_slice(&shape[2..]);
        if target.shape() != want.as_slice() {
            return Err(KernelError::Shape(format!(
                "the target must be {want:?} for an input of {shape:?}, got {:?}",
                target.shape()
            )));
        }
        let d: usize = shape[2..].iter().product();
        let weights = weight.map(Tensor::to_f64_vec).transpose()?;
        if let Some(w) = &weights
            && w.len() != c
        {
            return Err(KernelError::Shape(format!(
                "the weight must hold {c} values, got {}",
                w.len()
            )));
        }
        let mut xs = x.to_f64_vec()?;
        if self.softmax {
            log_softmax(&mut xs, c, d);
        }
        let targets = target.to_i64_vec()?;
        let mut losses = vec![0f64; n * d];
        let mut weight_sum = 0f64;
        for (e, (&t, loss)) in targets.iter().zip(losses.iter_mut()).enumerate() {
            if Some(t) == self.ignore_index {
                continue;
            }
            let class = usize::try_from(t).ok().filter(|&k| k < c).ok_or_else(|| {
                KernelError::InvalidValue(format!("target {t} is not a class index below {c}"))
            })?;
            let w = weights.as_ref().map_or(1.0, |w| w[class]);
            let (i, j) = (e / d, e % d);
            *loss = -xs[(i * c + class) * d + j] * w;
            weight_sum += w;
        }
        let loss = match self.reduction {
            Reduction::None => Tensor::from_shape_vec(target.shape(), losses)?,
            Reduction::Sum => Tensor::scalar(losses.iter().sum::<f64>()),
            Reduction::Mean => Tensor::scalar(losses.iter().sum::<f64>() / weight_sum),
        };
        let mut outs = vec![cast_tensor(&loss, dtype)?];
        if self.log_prob {
            outs.push(cast_tensor(&Tensor::from_shape_vec(shape, xs)?, dtype)?);
        }
        Ok(outs)
    }
}

#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests {
    use crate::cpu::binary::test_util::{assert_f32, run_op, t};
    use crate::{AttrValue, Attributes, NodeSpec, Tensor};

    fn x() -> Tensor {
        t(
            &[2, 3, 2],
            (0..12).map(|i| (i as f32 - 5.0) / 2.0).collect(),
        )
    }

    /// Expected values from `onnx.reference` (onnx 1.22): the weighted mean divides by the
    /// weights of the targets not ignored only.
    #[test]
    fn nll_ignores_the_index_in_sum_and_weights() {
        let target = t(&[2, 2], vec![0i64, 2, -1, 1]);
        let w = t(&[3], vec![0.5f32, 2.0, 1.5]);
        let ii = ("ignore_index", AttrValue::Int(-1));
        let out = run_op(
            "NegativeLogLikelihoodLoss",
            22,
            std::slice::from_ref(&ii),
            &[Some(&x()), Some(&target), Some(&w)],
        )
        .unwrap();
        assert_f32(&out[0], &[], &[-0.6875], 1e-6);
        let none = [ii, ("reduction", AttrValue::String("none".into()))];
        let out = run_op(
            "NegativeLogLikelihoodLoss",
            22,
            &none,
            &[Some(&x()), Some(&target)],
        )
        .unwrap();
        assert_f32(&out[0], &[2, 2], &[2.5, 0.0, 0.0, -2.0], 0.0);
        // A target that is neither a class nor ignored.
        let bad = t(&[2, 2], vec![0i64, 3, 0, 0]);
        assert!(
            run_op(
                "NegativeLogLikelihoodLoss",
                22,
                &[],
                &[Some(&x()), Some(&bad)]
            )
            .is_err()
        );
    }

    #[test]
    fn sce_sum_with_log_prob() {
        let target = t(&[2, 2], vec![0i64, 2, -1, 1]);
        let w = t(&[3], vec![0.5f32, 2.0, 1.5]);
        let mut a = Attributes::new();
        a.insert("ignore_index", AttrValue::Int(-1));
        a.insert("reduction", AttrValue::String("sum".into()));
        let spec = NodeSpec {
            op_type: "SoftmaxCrossEntropyLoss",
            domain: "",
            opset: 13,
            attrs: &a,
            num_inputs: 3,
            num_outputs: 2,
            options: Default::default(),
        };
        let outs = crate::cpu::build(&spec)
            .unwrap()
            .run(&[Some(&x()), Some(&target), Some(&w)])
            .unwrap();
        assert_f32(&outs[0], &[], &[4.630_424], 1e-6);
        let lp = [-2.407_606, -1.407_606, -0.407_606];
        let want: Vec<f32> = [0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]
            .iter()
            .map(|&k| lp[k])
            .collect();
        assert_f32(&outs[1], &[2, 3, 2], &want, 1e-6);
    }
}
