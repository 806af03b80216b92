//! A whole graph on one GPU (feature `cuda`): every node's GPU kernel built once for fixed
//! shapes, one device arena, the nodes launched on the compute streams a schedule gives, with
//! an event from a pre-created pool for every edge that crosses streams, and, for replay, the
//! whole multi-stream launch sequence captured once as a CUDA Graph (Opara §4).
//!
//! A session whose devices include a CUDA GPU runs a [`GpuEngine`]; `gpu_zoo` (tests crate)
//! drives the same parts on the model zoo on a real GPU.

mod assignment;
mod capture;
mod costs;
mod engine;
mod hybrid;
mod memory;
mod plan;
mod segment;
mod status;
mod timing;
mod transfer;
#[cfg(any(test, feature = "internals"))]
mod values;

pub use costs::cost_graph;
pub use engine::{GpuEngine, open_gpu};
pub use hybrid::{HybridEngine, HybridParts};
#[cfg(feature = "internals")]
pub use {
    assignment::StreamAssignment,
    capture::CapturedPlan,
    engine::GpuChoice,
    hybrid::{HybridChoice, NodeTimes},
    memory::ValueMemory,
    plan::GpuPlan,
    timing::median_ms,
    transfer::PlanInput,
    values::{cpu_values, descs, specialize},
};

use crate::error::Error;

/// A GPU failure at a node.
pub(crate) fn node_error(node: &crate::graph::Node, cause: impl std::fmt::Display) -> Error {
    Error::Gpu {
        context: format!("node '{}' ({})", node.name, node.op_type),
        cause: cause.to_string(),
    }
}

/// A GPU failure in a step that belongs to no node.
pub(crate) fn step_error(context: impl Into<String>, cause: impl std::fmt::Display) -> Error {
    Error::Gpu {
        context: context.into(),
        cause: cause.to_string(),
    }
}
