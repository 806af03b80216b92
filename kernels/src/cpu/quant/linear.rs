//! `QuantizeLinear` and `DequantizeLinear` (opsets 10 to 25): per-tensor, per-axis and blocked
//! scales; integer outputs (8-, 16-, 4- and 2-bit) round half to even and saturate, float8 and
//! float4 outputs convert as `Cast` does.

use half::{bf16, f16};

use super::params::{ParamLayout, int_range, int_tensor, saturate_round, values_f32, values_f64};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::low_precision::{F4E2M1, F8E4M3Fn, F8E4M3FnUz, F8E5M2, F8E5M2FnUz};
use crate::{DType, Tensor};

/// The attributes shared by both ops.
#[derive(Debug, Clone, Copy)]
struct Axes {
    axis: i64,
    block_size: i64,
    output_dtype: Option<DType>,
}

fn parse(spec: &NodeSpec<'_>, quantize: bool) -> Result<(Axes, bool)> {
    crate::cpu::nn::common::min_opset(spec.opset, 10, spec.op_type)?;
    let a = spec.attrs;
    let mut known = vec![];
    if spec.opset >= 13 {
        known.push("axis");
    }
    if quantize && spec.opset >= 19 {
        known.push("saturate");
    }
    if spec.opset >= 21 {
        known.extend(["block_size", "output_dtype"]);
    }
    if quantize && spec.opset >= 25 {
        known.push("precision");
    }
    a.only(&known)?;
    // `precision` 0 (unset) or FLOAT is what every path here computes in.
    let precision = a.int("precision", 0)?;
    if precision != 0 && precision != 1 {
        return Err(KernelError::UnsupportedAttribute {
            name: "precision".into(),
            reason: format!("only float32 (1) is implemented, got {precision}"),
        });
    }
    let output_dtype = match a.int("output_dtype", 0)? {
        0 => None,
        code => Some(
            i32::try_from(code)
                .ok()
                .and_then(DType::from_onnx)
                .ok_or_else(|| KernelError::UnsupportedAttribute {
                    name: "output_dtype".into(),
                    reason: format!("element type {code} is not supported"),
                })?,
        ),
    };
    let axes = Axes {
        axis: a.int("axis", 1)?,
        block_size: a.int("block_size", 0)?,
        output_dtype,
    };
    Ok((axes, a.int("saturate", 1)? != 0))
}

/// `QuantizeLinear`: `y = saturate(round(x / scale) + zero_point)`.
#[derive(Debug)]
pub struct QuantizeLinear {
    axes: Axes,
    saturate: bool,
}

/// `DequantizeLinear`: `y = (x - zero_point) * scale`.
#[derive(Debug)]
pub struct DequantizeLinear {
    axes: Axes,
}

/// Builds [`QuantizeLinear`].
pub fn build_quantize(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    let (axes, saturate) = parse(spec, true)?;
    Ok(Box::new(QuantizeLinear { axes, saturate }))
}

/// Builds [`DequantizeLinear`].
pub fn build_dequantize(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    let (axes, _) = parse(spec, false)?;
    Ok(Box::new(DequantizeLinear { axes }))
}

fn layout(axes: &Axes, x: &Tensor, scale: &Tensor, zp: Option<&Tensor>) -> Result<ParamLayout> {
    let layout = ParamLayout::new(x.shape(), scale.shape(), axes.axis, axes.block_size)?;
    if let Some(z) = zp
        && z.shape() != scale.shape()
        && !(z.len() == 1 && scale.len() == 1)
    {
        return Err(KernelError::Shape(format!(
            "zero point of shape {:?} differs from scale of shape {:?}",
            z.shape(),
            scale.shape()
        )));
    }
    Ok(layout)
}

impl Kernel for QuantizeLinear {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (x, scale, zp) = (input(inputs, 0)?, input(inputs, 1)?, opt_input(inputs, 2));
        let out = match (zp, self.axes.output_dtype) {
            (Some(z), Some(d)) if z.dtype() != d => {
                return Err(KernelError::DTypeMismatch(format!(
                    "output_dtype {d} differs from the zero point's {}",
                    z.dtype()
                )));
            }
            (Some(z), _) => z.dtype(),
            (None, Some(d)) => d,
            (None, None) => DType::U8,
        };
        let layout = layout(&self.axes, x, scale, zp)?;
        let xs: Vec<f32> = match x {
            Tensor::I32(a) => a.iter().map(|&v| v as f32).collect(),
            other => values_f32(other, 0)?,
        };
        let scales = values_f32(scale, 1)?;
        let zps = match zp {
            Some(z) => values_f64(z)?,
            None => vec![0.0; scales.len()],
        };
        let q = |i: usize| {
            let p = layout.index(i);
            (xs[i] / scales[p], zps[p])
        };
        let shape = x.shape();
        if let Some((lo, hi)) = int_range(out).filter(|_| out != DType::I32) {
            let v = (0..xs.len())
                .map(|i| {
                    let (q, z) = q(i);
                    saturate_round(q, z as i32, lo, hi)
                })
                .collect();
            return Ok(vec![int_tensor(out, shape, v)?]);
        }
        let sat = self.saturate;
        let n = xs.len();
        let t = match out {
            DType::F8E4M3Fn => make(shape, (0..n).map(|i| F8E4M3Fn::from_f32(q(i).0, sat))),
            DType::F8E4M3FnUz => make(shape, (0..n).map(|i| F8E4M3FnUz::from_f32(q(i).0, sat))),
            DType::F8E5M2 => make(shape, (0..n).map(|i| F8E5M2::from_f32(q(i).0, sat))),
            DType::F8E5M2FnUz => make(shape, (0..n).map(|i| F8E5M2FnUz::from_f32(q(i).0, sat))),
            DType::F4E2M1 => make(
                shape,
                (0..n).map(|i| {
                    let (q, z) = q(i);
                    F4E2M1::from_f32(q + z as f32)
                }),
            ),
            other => {
                return Err(KernelError::DTypeMismatch(format!(
                    "{other} is not a quantized type"
                )));
            }
        }?;
        Ok(vec![t])
    }
}

fn make<T: crate::Element>(shape: &[usize], v: impl Iterator<Item = T>) -> Result<Tensor> {
    Tensor::from_shape_vec(shape, v.collect())
}

impl Kernel for DequantizeLinear {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (x, scale, zp) = (input(inputs, 0)?, input(inputs, 1)?, opt_input(inputs, 2));
        if let Some(z) = zp
            && z.dtype() != x.dtype()
        {
            return Err(KernelError::DTypeMismatch(format!(
                "zero point is {}, input is {}",
                z.dtype(),
                x.dtype()
            )));
        }
        let layout = layout(&self.axes, x, scale, zp)?;
        let out = self.axes.output_dtype.unwrap_or(scale.dtype());
        let scales = values_f32(scale, 1)?;
        let y: Vec<f32> = match x {
            // `(x - zp)` in integers, as ONNX Runtime computes it.
            Tensor::U8(_) | Tensor::I8(_) | Tensor::U16(_) | Tensor::I16(_) | Tensor::I32(_) => {
                let xs = x.to_i64_vec()?;
                let zps = match zp {
                    Some(z) => z.to_i64_vec()?,
                    None => vec![0; scales.len()],
                };
                (0..xs.len())
                    .map(|i| {
                        let p = layout.index(i);
                        (xs[i] as i32).wrapping_sub(zps[p] as i32) as f32 * scales[p]
                    })
                    .collect()
            }
            _ => {
                let xs = values_f64(x)?;
                let zps = match zp {
                    Some(z) => values_f64(z)?,
                    None => vec![0.0; scales.len()],
                };
                (0..xs.len())
                    .map(|i| {
                        let p = layout.index(i);
                        (xs[i] as f32 - zps[p] as f32) * scales[p]
                    })
                    .collect()
            }
        };
        let shape = x.shape();
        let t = match out {
            DType::F32 => Tensor::from_shape_vec(shape, y),
            DType::F16 => make(shape, y.into_iter().map(f16::from_f32)),
            DType::BF16 => make(shape, y.into_iter().map(bf16::from_f32)),
            other => Err(KernelError::DTypeMismatch(format!(
                "DequantizeLinear cannot produce {other}"
            ))),
        }?;
        Ok(vec![t])
    }
}
