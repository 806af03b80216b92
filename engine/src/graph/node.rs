//! A node of the graph: one operator application.

use spillway_kernels::Attributes;

use super::ValueId;

/// One operator application.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The node's name (the model's, or `op_type#index` when the model gives none).
    pub name: String,
    /// ONNX op type.
    pub op_type: String,
    /// ONNX domain (`""` for `ai.onnx`).
    pub domain: String,
    /// Opset version the model imports for the domain.
    pub opset: i64,
    /// Attributes, as the kernels see them.
    pub attrs: Attributes,
    /// Inputs; `None` for an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs; `None` for an output the model does not use.
    pub outputs: Vec<Option<ValueId>>,
}

impl Node {
    /// The inputs that are present.
    pub fn present_inputs(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.inputs.iter().flatten().copied()
    }

    /// The outputs that are used.
    pub fn present_outputs(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.outputs.iter().flatten().copied()
    }
}
