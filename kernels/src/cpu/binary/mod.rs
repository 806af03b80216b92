//! CPU kernels: binary family — elementwise ops on two or more broadcast inputs.

pub mod arith;
pub mod broadcast;
pub mod compare;
pub mod num;
pub mod pow;
pub mod prelu;
pub mod variadic;
pub mod where_op;

#[cfg(test)]
pub(crate) mod test_util;
#[cfg(test)]
mod tests;

use arith::{ArithKernel, ArithOp};
use compare::{CompareKernel, CompareOp};
use variadic::{VariadicKernel, VariadicOp};

use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};

/// The newest `ai.onnx` opset whose semantics these kernels were checked against (onnx 1.22).
pub const NEWEST_OPSET: i64 = 27;

/// Op types this family implements.
pub const OPS: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Mod",
    "Pow",
    "PRelu",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "Equal",
    "Greater",
    "GreaterOrEqual",
    "Less",
    "LessOrEqual",
    "And",
    "Or",
    "Xor",
    "Where",
];

/// Fails unless `first <= spec.opset <= NEWEST_OPSET`.
pub fn check_opset(spec: &NodeSpec<'_>, first: i64) -> Result<()> {
    if spec.opset < first || spec.opset > NEWEST_OPSET {
        return Err(KernelError::UnsupportedOpset {
            opset: spec.opset,
            reason: format!(
                "{} is implemented for opsets {first}..={NEWEST_OPSET}",
                spec.op_type
            ),
        });
    }
    Ok(())
}

/// Fails unless the node lists exactly `n` inputs.
fn check_inputs(spec: &NodeSpec<'_>, n: usize) -> Result<()> {
    if spec.num_inputs != n {
        return Err(KernelError::Arity(format!(
            "{} takes {n} inputs, node has {}",
            spec.op_type, spec.num_inputs
        )));
    }
    Ok(())
}

/// Builds a kernel for an op in [`OPS`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    let arith = |op| -> Result<Box<dyn Kernel>> {
        check_opset(spec, 7)?;
        spec.attrs.only(&[])?;
        check_inputs(spec, 2)?;
        Ok(Box::new(ArithKernel::new(op)))
    };
    let compare = |op, first| -> Result<Box<dyn Kernel>> {
        check_opset(spec, first)?;
        spec.attrs.only(&[])?;
        check_inputs(spec, 2)?;
        Ok(Box::new(CompareKernel::new(op)))
    };
    let variadic = |op| -> Result<Box<dyn Kernel>> {
        check_opset(spec, 6)?;
        spec.attrs.only(&[])?;
        if spec.num_inputs == 0 {
            return Err(KernelError::Arity(format!(
                "{} needs at least one input",
                spec.op_type
            )));
        }
        Ok(Box::new(VariadicKernel::new(op)))
    };
    match spec.op_type {
        "Add" => arith(ArithOp::Add),
        "Sub" => arith(ArithOp::Sub),
        "Mul" => arith(ArithOp::Mul),
        "Div" => arith(ArithOp::Div),
        "Mod" => {
            check_opset(spec, 10)?;
            spec.attrs.only(&["fmod"])?;
            check_inputs(spec, 2)?;
            let op = match spec.attrs.int("fmod", 0)? {
                0 => ArithOp::ModFloor,
                1 => ArithOp::ModTrunc,
                v => {
                    return Err(KernelError::BadAttribute {
                        name: "fmod".into(),
                        reason: format!("must be 0 or 1, got {v}"),
                    });
                }
            };
            Ok(Box::new(ArithKernel::new(op)))
        }
        "Pow" => {
            check_opset(spec, 7)?;
            spec.attrs.only(&[])?;
            check_inputs(spec, 2)?;
            Ok(Box::new(pow::PowKernel {
                same_type: spec.opset < 12,
            }))
        }
        "PRelu" => {
            check_opset(spec, 7)?;
            spec.attrs.only(&[])?;
            check_inputs(spec, 2)?;
            Ok(Box::new(prelu::PReluKernel))
        }
        "Max" => variadic(VariadicOp::Max),
        "Min" => variadic(VariadicOp::Min),
        "Sum" => variadic(VariadicOp::Sum),
        "Mean" => variadic(VariadicOp::Mean),
        "Equal" => compare(CompareOp::Equal, 7),
        "Greater" => compare(CompareOp::Greater, 7),
        "GreaterOrEqual" => compare(CompareOp::GreaterOrEqual, 12),
        "Less" => compare(CompareOp::Less, 7),
        "LessOrEqual" => compare(CompareOp::LessOrEqual, 12),
        "And" => compare(CompareOp::And, 7),
        "Or" => compare(CompareOp::Or, 7),
        "Xor" => compare(CompareOp::Xor, 7),
        "Where" => {
            check_opset(spec, 9)?;
            spec.attrs.only(&[])?;
            check_inputs(spec, 3)?;
            Ok(Box::new(where_op::WhereKernel))
        }
        other => Err(KernelError::UnsupportedOp {
            op_type: other.to_string(),
            domain: spec.domain.to_string(),
        }),
    }
}
