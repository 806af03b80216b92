//! CPU kernels: math family — bitwise integer ops (`BitwiseAnd/Or/Xor/Not`, `BitShift`), the
//! float classifications `IsInf` and `IsNaN`, the determinant `Det` and the signal windows
//! (`HannWindow`, `HammingWindow`, `BlackmanWindow`), `DFT`, `STFT` and `MelWeightMatrix`.
//! None has a GPU kernel.

pub mod bitwise;
pub mod classify;
pub mod det;
pub mod dft;
pub mod window;

#[cfg(test)]
mod tests;

use crate::cpu::binary::check_opset;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};

/// Op types this family implements.
pub const OPS: &[&str] = &[
    "BitShift",
    "BitwiseAnd",
    "BitwiseNot",
    "BitwiseOr",
    "BitwiseXor",
    "BlackmanWindow",
    "DFT",
    "Det",
    "HammingWindow",
    "HannWindow",
    "IsInf",
    "IsNaN",
    "MelWeightMatrix",
    "STFT",
];

/// Fails unless the node lists exactly `n` inputs.
pub(crate) fn check_inputs(spec: &NodeSpec<'_>, n: usize) -> Result<()> {
    if spec.num_inputs != n {
        return Err(KernelError::Arity(format!(
            "{} takes {n} input(s), node has {}",
            spec.op_type, spec.num_inputs
        )));
    }
    Ok(())
}

/// Builds a kernel for an op in [`OPS`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    match spec.op_type {
        "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "BitwiseNot" | "BitShift" => {
            bitwise::build(spec)
        }
        "IsInf" | "IsNaN" => classify::build(spec),
        "Det" => {
            check_opset(spec, 11)?;
            spec.attrs.only(&[])?;
            check_inputs(spec, 1)?;
            Ok(Box::new(det::DetKernel))
        }
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => window::build(spec),
        "DFT" => dft::build_dft(spec),
        "STFT" => dft::build_stft(spec),
        "MelWeightMatrix" => dft::build_mel(spec),
        other => Err(KernelError::UnsupportedOp {
            op_type: other.to_string(),
            domain: spec.domain.to_string(),
        }),
    }
}
