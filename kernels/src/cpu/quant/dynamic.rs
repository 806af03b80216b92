//! `DynamicQuantizeLinear` (opset 11): uint8 quantization with a scale and zero point computed
//! from the input's range, exactly as ONNX Runtime's `GetQuantizationParameter` does.

use super::params::{saturate_round, values_f32};
use crate::Tensor;
use crate::error::Result;
use crate::kernel::{Kernel, NodeSpec, input};

/// `DynamicQuantizeLinear`: outputs `y` (uint8), `y_scale` and `y_zero_point` (scalars).
#[derive(Debug)]
pub struct DynamicQuantizeLinear;

/// Builds [`DynamicQuantizeLinear`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    crate::cpu::nn::common::min_opset(spec.opset, 11, spec.op_type)?;
    spec.attrs.only(&[])?;
    Ok(Box::new(DynamicQuantizeLinear))
}

/// The uint8 scale and zero point for values in `[min, max]` (the range widened to hold 0).
pub(crate) fn u8_params(xs: &[f32]) -> (f32, u8) {
    let (mut lo, mut hi) = (0.0f32, 0.0f32);
    for &v in xs {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    let scale = if hi == lo { 1.0 } else { (hi - lo) / 255.0 };
    let initial = 0.0 - lo / scale;
    let zp = initial.clamp(0.0, 255.0).round_ties_even() as u8;
    (scale, zp)
}

impl Kernel for DynamicQuantizeLinear {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let xs = values_f32(x, 0)?;
        let (scale, zp) = u8_params(&xs);
        let y: Vec<u8> = xs
            .iter()
            .map(|&v| saturate_round(v / scale, i32::from(zp), 0, 255) as u8)
            .collect();
        Ok(vec![
            Tensor::from_shape_vec(x.shape(), y)?,
            Tensor::scalar(scale),
            Tensor::scalar(zp),
        ])
    }
}
