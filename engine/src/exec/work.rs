//! [`Work`]: what running one node means — a tensor kernel, a control-flow subgraph, or an
//! operator on sequences and optionals.

use smallvec::SmallVec;
use spillway_kernels::{Kernel, KernelError, KernelOptions, Tensor};

use super::build_kernel_with;
use super::control_flow::ControlFlow;
use super::value_ops::ValueOp;
use crate::error::Result;
use crate::graph::Node;
use crate::value::Value;

/// What a node runs.
#[derive(Debug)]
// One per node, built once per session.
#[allow(clippy::large_enum_variant)]
pub enum Work {
    /// A tensor kernel: every input must be a tensor.
    Kernel(Box<dyn Kernel>),
    /// `If` / `Loop`.
    ControlFlow(ControlFlow),
    /// `Identity`, sequence and optional operators, run by the engine on [`Value`]s.
    Value(ValueOp),
}

impl Work {
    /// Builds the node's work, its CPU kernel as `options` say (the graph's
    /// [`Graph::kernel_options`](crate::graph::Graph::kernel_options)), or fails naming the node.
    pub fn build(node: &Node, options: &KernelOptions) -> Result<Work> {
        if let Some(cf) = ControlFlow::compile(node)? {
            return Ok(Work::ControlFlow(cf));
        }
        if let Some(op) = ValueOp::compile(node)? {
            return Ok(Work::Value(op));
        }
        Ok(Work::Kernel(build_kernel_with(node, options)?))
    }

    /// What the node's kernel chose on its runs so far ([`Kernel::choice`]); `None` for other
    /// work.
    pub fn choice(&self) -> Option<String> {
        match self {
            Work::Kernel(kernel) => kernel.choice(),
            _ => None,
        }
    }

    /// Runs on `args` (declared inputs, then captures). The outer error is an engine error
    /// (already naming an inner node); the inner one is this node's own error — for a tensor
    /// kernel given a sequence or an optional, [`KernelError::ValueKind`].
    pub fn run(
        &self,
        args: &[Option<&Value>],
        declared: usize,
    ) -> Result<Result<Vec<Value>, KernelError>> {
        let declared_args = &args[..declared.min(args.len())];
        match self {
            Work::Kernel(kernel) => {
                let tensors = match tensor_args(declared_args) {
                    Ok(t) => t,
                    Err(e) => return Ok(Err(e)),
                };
                Ok(kernel
                    .run(&tensors)
                    .map(|out| out.into_iter().map(Value::Tensor).collect()))
            }
            Work::ControlFlow(cf) => cf.run(args, declared),
            Work::Value(op) => Ok(op.run(declared_args)),
        }
    }
}

/// The tensors of `args`; a non-tensor is a [`KernelError::ValueKind`].
fn tensor_args<'a>(
    args: &[Option<&'a Value>],
) -> Result<SmallVec<[Option<&'a Tensor>; 4]>, KernelError> {
    args.iter()
        .enumerate()
        .map(|(index, a)| match a {
            None => Ok(None),
            Some(Value::Tensor(t)) => Ok(Some(t)),
            Some(other) => Err(KernelError::ValueKind {
                index,
                expected: "a tensor".into(),
                got: other.type_string(),
            }),
        })
        .collect()
}
