//! CPU kernels: unary family — elementwise functions of one tensor.

pub mod clip;
pub mod float_ops;
pub mod int_ops;
pub mod real;
#[cfg(target_arch = "x86_64")]
pub mod softmax_avx512;
pub mod vector_exp;

#[cfg(test)]
mod tests;

use float_ops::FloatOp;

use crate::Tensor;
use crate::cpu::binary::check_opset;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};

/// Op types this family implements.
pub const OPS: &[&str] = &[
    "Relu",
    "LeakyRelu",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Clip",
    "Elu",
    "Selu",
    "Celu",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Exp",
    "Log",
    "Neg",
    "Abs",
    "Sign",
    "Floor",
    "Ceil",
    "Round",
    "Reciprocal",
    "Erf",
    "Gelu",
    "Not",
    "Cos",
    "Sin",
    "Tan",
    "Acos",
    "Asin",
    "Atan",
    "Cosh",
    "Sinh",
    "Acosh",
    "Asinh",
    "Atanh",
    "ThresholdedRelu",
    "Shrink",
    "Mish",
    "Swish",
];

/// Which element types a [`UnaryKernel`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// Floating-point types only.
    Float,
    /// Floats and integers (Relu, Neg: signed integers only).
    Numeric,
    /// Booleans (Not).
    Bool,
}

/// A one-input, one-output elementwise kernel.
#[derive(Debug)]
pub struct UnaryKernel {
    op: FloatOp,
    domain: Domain,
}

impl Kernel for UnaryKernel {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let out = match self.domain {
            Domain::Float => float_ops::float_tensor(self.op, x)?,
            Domain::Numeric => int_ops::numeric_tensor(self.op, x)?,
            Domain::Bool => int_ops::not_tensor(x)?,
        };
        Ok(vec![out])
    }
}

/// Builds a kernel for an op in [`OPS`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    if spec.op_type == "Clip" {
        return build_clip(spec);
    }
    let (op, domain) = parse(spec)?;
    Ok(Box::new(UnaryKernel { op, domain }))
}

/// The function and type domain of a unary op other than `Clip`, with its attributes and
/// arity checked (the CUDA backend builds its kernels from the same answer).
pub fn parse(spec: &NodeSpec<'_>) -> Result<(FloatOp, Domain)> {
    let a = spec.attrs;
    let (first, known, op, domain): (i64, &[&str], FloatOp, Domain) = match spec.op_type {
        "Relu" => (6, &[], FloatOp::Relu, Domain::Numeric),
        "LeakyRelu" => (
            6,
            &["alpha"],
            FloatOp::LeakyRelu(a.float("alpha", 0.01)?),
            Domain::Float,
        ),
        "Sigmoid" => (6, &[], FloatOp::Sigmoid, Domain::Float),
        "HardSigmoid" => (
            6,
            &["alpha", "beta"],
            FloatOp::HardSigmoid(a.float("alpha", 0.2)?, a.float("beta", 0.5)?),
            Domain::Float,
        ),
        "HardSwish" => (14, &[], FloatOp::HardSwish, Domain::Float),
        "Tanh" => (6, &[], FloatOp::Tanh, Domain::Float),
        "Elu" => (
            6,
            &["alpha"],
            FloatOp::Elu(a.float("alpha", 1.0)?),
            Domain::Float,
        ),
        "Selu" => (
            6,
            &["alpha", "gamma"],
            FloatOp::Selu(a.float("alpha", 1.673_263_2)?, a.float("gamma", 1.050_701)?),
            Domain::Float,
        ),
        "Celu" => (
            12,
            &["alpha"],
            FloatOp::Celu(a.float("alpha", 1.0)?),
            Domain::Float,
        ),
        "Softplus" => (1, &[], FloatOp::Softplus, Domain::Float),
        "Softsign" => (1, &[], FloatOp::Softsign, Domain::Float),
        "Sqrt" => (6, &[], FloatOp::Sqrt, Domain::Float),
        "Exp" => (6, &[], FloatOp::Exp, Domain::Float),
        "Log" => (6, &[], FloatOp::Log, Domain::Float),
        "Neg" => (6, &[], FloatOp::Neg, Domain::Numeric),
        "Abs" => (6, &[], FloatOp::Abs, Domain::Numeric),
        "Sign" => (9, &[], FloatOp::Sign, Domain::Numeric),
        "Floor" => (6, &[], FloatOp::Floor, Domain::Float),
        "Ceil" => (6, &[], FloatOp::Ceil, Domain::Float),
        "Round" => (11, &[], FloatOp::Round, Domain::Float),
        "Reciprocal" => (6, &[], FloatOp::Reciprocal, Domain::Float),
        "Erf" => (9, &[], FloatOp::Erf, Domain::Float),
        "Gelu" => {
            let tanh = match a.string("approximate", "none")?.as_str() {
                "none" => false,
                "tanh" => true,
                other => {
                    return Err(KernelError::BadAttribute {
                        name: "approximate".into(),
                        reason: format!("must be 'none' or 'tanh', got '{other}'"),
                    });
                }
            };
            (20, &["approximate"], FloatOp::Gelu(tanh), Domain::Float)
        }
        "Not" => (1, &[], FloatOp::Neg, Domain::Bool),
        "Cos" => (7, &[], FloatOp::Cos, Domain::Float),
        "Sin" => (7, &[], FloatOp::Sin, Domain::Float),
        "Tan" => (7, &[], FloatOp::Tan, Domain::Float),
        "Acos" => (7, &[], FloatOp::Acos, Domain::Float),
        "Asin" => (7, &[], FloatOp::Asin, Domain::Float),
        "Atan" => (7, &[], FloatOp::Atan, Domain::Float),
        "Cosh" => (9, &[], FloatOp::Cosh, Domain::Float),
        "Sinh" => (9, &[], FloatOp::Sinh, Domain::Float),
        "Acosh" => (9, &[], FloatOp::Acosh, Domain::Float),
        "Asinh" => (9, &[], FloatOp::Asinh, Domain::Float),
        "Atanh" => (9, &[], FloatOp::Atanh, Domain::Float),
        "ThresholdedRelu" => (
            10,
            &["alpha"],
            FloatOp::ThresholdedRelu(a.float("alpha", 1.0)?),
            Domain::Float,
        ),
        "Shrink" => (
            9,
            &["bias", "lambd"],
            FloatOp::Shrink(a.float("bias", 0.0)?, a.float("lambd", 0.5)?),
            Domain::Float,
        ),
        "Mish" => (18, &[], FloatOp::Mish, Domain::Float),
        "Swish" => (
            24,
            &["alpha"],
            FloatOp::Swish(a.float("alpha", 1.0)?),
            Domain::Float,
        ),
        other => {
            return Err(KernelError::UnsupportedOp {
                op_type: other.to_string(),
                domain: spec.domain.to_string(),
            });
        }
    };
    check_opset(spec, first)?;
    a.only(known)?;
    if spec.num_inputs != 1 {
        return Err(KernelError::Arity(format!(
            "{} takes one input",
            spec.op_type
        )));
    }
    Ok((op, domain))
}

fn build_clip(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    check_opset(spec, 6)?;
    if spec.opset < 11 {
        spec.attrs.only(&["min", "max"])?;
        if spec.num_inputs != 1 {
            return Err(KernelError::Arity(
                "Clip before opset 11 takes one input".into(),
            ));
        }
        let lo = spec.attrs.float("min", f32::MIN)?;
        let hi = spec.attrs.float("max", f32::MAX)?;
        Ok(Box::new(clip::ClipKernel {
            attr_bounds: Some((lo, hi)),
        }))
    } else {
        spec.attrs.only(&[])?;
        if !(1..=3).contains(&spec.num_inputs) {
            return Err(KernelError::Arity("Clip takes one to three inputs".into()));
        }
        Ok(Box::new(clip::ClipKernel { attr_bounds: None }))
    }
}
