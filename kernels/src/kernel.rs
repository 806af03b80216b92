//! The [`Kernel`] trait and the [`NodeSpec`] a kernel is built from.

use crate::error::{KernelError, Result};
use crate::{Attributes, KernelOptions, Tensor};

/// What a kernel builder knows about the node it implements. No graph, no names:
/// just the operator, its version and its attributes, and the session's [`KernelOptions`].
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
    /// The session's kernel-algorithm choices (GEMM instruction set, Winograd, ...).
    pub options: KernelOptions,
}

/// A built operator, ready to run any number of times from any thread.
///
/// `inputs[i]` is `None` for an omitted optional input. A kernel returns exactly
/// the node's outputs, in order.
pub trait Kernel: Send + Sync + std::fmt::Debug {
    /// Computes the outputs from the inputs.
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>>;

    /// The algorithm this kernel's runs so far took, where it has several (for reports and
    /// tests): see [`crate::options::Choice`]. `None` for kernels with one way to compute,
    /// and before a run that chose.
    fn choice(&self) -> Option<String> {
        None
    }
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
