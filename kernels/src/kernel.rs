//! The [`Kernel`] trait and the [`NodeSpec`] a kernel is built from.

use crate::error::{KernelError, Result};
use crate::{Attributes, Tensor};

/// What a kernel builder knows about the node it implements. No graph, no names:
/// just the operator, its version and its attributes.
#[derive(Debug, Clone, Copy)]
pub struct NodeSpec<'a> {
    /// ONNX op type, e.g. `"Conv"`.
    pub op_type: &'a str,
    /// ONNX domain (`""` for `ai.onnx`).
    pub domain: &'a str,
    /// The opset version the model imports for `domain`.
    pub opset: i64,
    /// The node's attributes.
    pub attrs: &'a Attributes,
    /// How many inputs the node lists (optional ones left empty included).
    pub num_inputs: usize,
    /// How many outputs the node lists.
    pub num_outputs: usize,
}

/// A built operator, ready to run any number of times from any thread.
///
/// `inputs[i]` is `None` for an omitted optional input. A kernel returns exactly
/// the node's outputs, in order.
pub trait Kernel: Send + Sync + std::fmt::Debug {
    /// Computes the outputs from the inputs.
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>>;
}

/// Returns input `index`, failing when it is absent.
pub fn input<'a>(inputs: &[Option<&'a Tensor>], index: usize) -> Result<&'a Tensor> {
    inputs
        .get(index)
        .copied()
        .flatten()
        .ok_or_else(|| KernelError::Arity(format!("required input {index} is missing")))
}

/// Returns input `index` if present.
pub fn opt_input<'a>(inputs: &[Option<&'a Tensor>], index: usize) -> Option<&'a Tensor> {
    inputs.get(index).copied().flatten()
}

/// A function that builds a kernel for one op type.
pub type Builder = fn(&NodeSpec<'_>) -> Result<Box<dyn Kernel>>;
