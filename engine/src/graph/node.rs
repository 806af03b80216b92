//! A node of the graph: one operator application.

use spillway_kernels::{Attributes, KernelOptions, NodeSpec};

use super::{Graph, ValueId, ValueType};

/// A graph-valued attribute (`If`'s branches, `Loop`'s body).
#[derive(Debug, Clone)]
pub struct Subgraph {
    /// The attribute name (`then_branch`, `else_branch`, `body`).
    pub attr: String,
    /// The subgraph. Its `inputs` are its formal inputs followed by one value per captured
    /// outer-scope value.
    pub graph: Graph,
    /// How many of `graph.inputs` are formal inputs; the rest are captures.
    pub formal_inputs: usize,
    /// For each capture, its position in the owning node's `inputs`.
    pub capture_positions: Vec<usize>,
}

/// One operator application.
#[derive(Debug, Clone)]
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
    /// Inputs; `None` for an omitted optional input. For nodes with subgraphs, the values the
    /// subgraphs capture from this scope follow the declared inputs.
    pub inputs: Vec<Option<ValueId>>,
    /// How many of `inputs` the model declares (the rest are captures).
    pub declared_inputs: usize,
    /// Outputs; `None` for an output the model does not use.
    pub outputs: Vec<Option<ValueId>>,
    /// Graph-valued attributes.
    pub subgraphs: Vec<Subgraph>,
    /// Type-valued attributes (`Optional`'s `type`), by name.
    pub type_attrs: Vec<(String, ValueType)>,
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

    /// What a kernel builder sees of this node: op, opset, attributes, and the declared inputs
    /// and outputs, with the default [`KernelOptions`].
    #[cfg(any(test, feature = "cuda", feature = "internals"))]
    pub fn spec(&self) -> NodeSpec<'_> {
        self.spec_with(KernelOptions::default())
    }

    /// [`Node::spec`] with the kernel options `options` (the graph's).
    pub fn spec_with(&self, options: KernelOptions) -> NodeSpec<'_> {
        NodeSpec {
            op_type: &self.op_type,
            domain: &self.domain,
            opset: self.opset,
            attrs: &self.attrs,
            num_inputs: self.declared_inputs,
            num_outputs: self.outputs.len(),
            options,
        }
    }
}
