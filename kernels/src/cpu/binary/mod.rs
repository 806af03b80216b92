//! CPU kernels: binary family.

use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};

/// Op types this family implements.
pub const OPS: &[&str] = &[];

/// Builds a kernel for an op in [`OPS`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    Err(KernelError::UnsupportedOp {
        op_type: spec.op_type.to_string(),
        domain: spec.domain.to_string(),
    })
}
