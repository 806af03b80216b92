//! CPU kernels: reduce family — reductions over axes, ArgMax/ArgMin, Softmax/LogSoftmax,
//! Hardmax, LpNormalization, MeanVarianceNormalization, CumSum and CumProd.

pub mod arg;
pub mod axes;
pub mod cumsum;
pub mod engine;
pub mod hardmax;
pub mod mvn;
pub mod reduce_ops;
pub mod softmax;

#[cfg(test)]
mod tests;

use reduce_ops::{ReduceKernel, ReduceOp};

use crate::cpu::binary::check_opset;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};

/// Op types this family implements.
pub const OPS: &[&str] = &[
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
    "ArgMax",
    "ArgMin",
    "Softmax",
    "LogSoftmax",
    "CumSum",
    "CumProd",
    "Hardmax",
    "LpNormalization",
    "MeanVarianceNormalization",
];

fn bool_attr(spec: &NodeSpec<'_>, name: &str, default: i64) -> Result<bool> {
    match spec.attrs.int(name, default)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(KernelError::BadAttribute {
            name: name.into(),
            reason: format!("must be 0 or 1, got {v}"),
        }),
    }
}

fn build_reduce(spec: &NodeSpec<'_>, op: ReduceOp) -> Result<Box<dyn Kernel>> {
    check_opset(spec, 1)?;
    // The opset at which `axes` moved from an attribute to an input.
    let axes_input_from = if op == ReduceOp::Sum { 13 } else { 18 };
    let keepdims = bool_attr(spec, "keepdims", 1)?;
    if spec.opset < axes_input_from {
        spec.attrs.only(&["axes", "keepdims"])?;
        if spec.num_inputs != 1 {
            return Err(KernelError::Arity(format!(
                "{} takes one input at this opset",
                spec.op_type
            )));
        }
        let axes = spec.attrs.ints("axes")?;
        Ok(Box::new(ReduceKernel {
            op,
            attr_axes: Some(axes),
            keepdims,
            noop_with_empty_axes: false,
        }))
    } else {
        spec.attrs.only(&["keepdims", "noop_with_empty_axes"])?;
        if !(1..=2).contains(&spec.num_inputs) {
            return Err(KernelError::Arity(format!(
                "{} takes one or two inputs",
                spec.op_type
            )));
        }
        let noop = bool_attr(spec, "noop_with_empty_axes", 0)?;
        Ok(Box::new(ReduceKernel {
            op,
            attr_axes: None,
            keepdims,
            noop_with_empty_axes: noop,
        }))
    }
}

/// Builds a kernel for an op in [`OPS`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    match spec.op_type {
        "ReduceSum" => build_reduce(spec, ReduceOp::Sum),
        "ReduceMean" => build_reduce(spec, ReduceOp::Mean),
        "ReduceMax" => build_reduce(spec, ReduceOp::Max),
        "ReduceMin" => build_reduce(spec, ReduceOp::Min),
        "ReduceProd" => build_reduce(spec, ReduceOp::Prod),
        "ReduceL1" => build_reduce(spec, ReduceOp::L1),
        "ReduceL2" => build_reduce(spec, ReduceOp::L2),
        "ReduceLogSum" => build_reduce(spec, ReduceOp::LogSum),
        "ReduceLogSumExp" => build_reduce(spec, ReduceOp::LogSumExp),
        "ReduceSumSquare" => build_reduce(spec, ReduceOp::SumSquare),
        "ArgMax" | "ArgMin" => {
            check_opset(spec, 1)?;
            spec.attrs
                .only(&["axis", "keepdims", "select_last_index"])?;
            Ok(Box::new(arg::ArgKernel {
                max: spec.op_type == "ArgMax",
                axis: spec.attrs.int("axis", 0)?,
                keepdims: bool_attr(spec, "keepdims", 1)?,
                select_last: bool_attr(spec, "select_last_index", 0)?,
            }))
        }
        "Softmax" | "LogSoftmax" => {
            check_opset(spec, 1)?;
            spec.attrs.only(&["axis"])?;
            let coerce_2d = spec.opset < 13;
            Ok(Box::new(softmax::SoftmaxKernel {
                log: spec.op_type == "LogSoftmax",
                axis: spec.attrs.int("axis", if coerce_2d { 1 } else { -1 })?,
                coerce_2d,
            }))
        }
        "CumSum" => {
            check_opset(spec, 11)?;
            spec.attrs.only(&["exclusive", "reverse"])?;
            Ok(Box::new(cumsum::CumSumKernel {
                product: false,
                exclusive: bool_attr(spec, "exclusive", 0)?,
                reverse: bool_attr(spec, "reverse", 0)?,
            }))
        }
        "CumProd" => {
            check_opset(spec, 26)?;
            spec.attrs.only(&["exclusive", "reverse"])?;
            Ok(Box::new(cumsum::CumSumKernel {
                product: true,
                exclusive: bool_attr(spec, "exclusive", 0)?,
                reverse: bool_attr(spec, "reverse", 0)?,
            }))
        }
        "Hardmax" => {
            check_opset(spec, 1)?;
            spec.attrs.only(&["axis"])?;
            let coerce_2d = spec.opset < 13;
            Ok(Box::new(hardmax::SliceKernel {
                op: hardmax::SliceOp::Hardmax,
                axis: spec.attrs.int("axis", if coerce_2d { 1 } else { -1 })?,
                coerce_2d,
            }))
        }
        "LpNormalization" => {
            check_opset(spec, 1)?;
            spec.attrs.only(&["axis", "p"])?;
            let p = match spec.attrs.int("p", 2)? {
                1 => 1,
                2 => 2,
                other => {
                    return Err(KernelError::BadAttribute {
                        name: "p".into(),
                        reason: format!("must be 1 or 2, got {other}"),
                    });
                }
            };
            Ok(Box::new(hardmax::SliceKernel {
                op: hardmax::SliceOp::LpNorm(p),
                axis: spec.attrs.int("axis", -1)?,
                coerce_2d: false,
            }))
        }
        "MeanVarianceNormalization" => {
            check_opset(spec, 9)?;
            spec.attrs.only(&["axes"])?;
            let axes = spec
                .attrs
                .opt_ints("axes")?
                .unwrap_or_else(|| vec![0, 2, 3]);
            Ok(Box::new(mvn::MvnKernel { axes }))
        }
        other => Err(KernelError::UnsupportedOp {
            op_type: other.to_string(),
            domain: spec.domain.to_string(),
        }),
    }
}
