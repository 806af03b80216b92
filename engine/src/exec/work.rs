//! [`Work`]: what running one node means — a kernel, or a control-flow subgraph.

use spillway_kernels::{Kernel, KernelError, Tensor};

use super::build_kernel;
use super::control_flow::ControlFlow;
use crate::error::Result;
use crate::graph::Node;

/// What a node runs.
#[derive(Debug)]
// One per node, built once per session.
#[allow(clippy::large_enum_variant)]
pub enum Work {
    /// An operator kernel.
    Kernel(Box<dyn Kernel>),
    /// `If` / `Loop`.
    ControlFlow(ControlFlow),
}

impl Work {
    /// Builds the node's work, or fails naming the node.
    pub fn build(node: &Node) -> Result<Work> {
        Ok(match ControlFlow::compile(node)? {
            Some(cf) => Work::ControlFlow(cf),
            None => Work::Kernel(build_kernel(node)?),
        })
    }

    /// Runs on `args` (declared inputs, then captures). The outer error is an engine error
    /// (already naming an inner node); the inner one is this node's kernel error.
    pub fn run(
        &self,
        args: &[Option<&Tensor>],
        declared: usize,
    ) -> Result<Result<Vec<Tensor>, KernelError>> {
        match self {
            Work::Kernel(kernel) => Ok(kernel.run(&args[..declared.min(args.len())])),
            Work::ControlFlow(cf) => cf.run(args, declared),
        }
    }
}
