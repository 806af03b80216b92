//! CPU kernels: detection family — the data-dependent ops of detection models
//! (NonMaxSuppression, RoiAlign, TopK, NonZero) and the index ops around them
//! (GatherND, ScatterND, ScatterElements and its deprecated alias Scatter).

mod gather_nd;
mod nms;
mod nms_kept;
mod nonzero;
mod reduction;
mod roi_align;
mod scatter_elements;
mod scatter_nd;
mod topk;
pub(crate) mod util;

use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};

/// Op types this family implements.
pub const OPS: &[&str] = &[
    "GatherND",
    "NonMaxSuppression",
    "NonZero",
    "RoiAlign",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "TopK",
];

/// Builds a kernel for an op in [`OPS`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    match spec.op_type {
        "GatherND" => gather_nd::build(spec),
        "NonMaxSuppression" => nms::build(spec),
        "NonZero" => nonzero::build(spec),
        "RoiAlign" => roi_align::build(spec),
        "Scatter" | "ScatterElements" => scatter_elements::build(spec),
        "ScatterND" => scatter_nd::build(spec),
        "TopK" => topk::build(spec),
        _ => Err(KernelError::UnsupportedOp {
            op_type: spec.op_type.to_string(),
            domain: spec.domain.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests;
