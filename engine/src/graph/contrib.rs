//! ONNX Runtime's `com.microsoft` contrib ops that its transformer optimizer writes into BERT-,
//! GPT- and ViT-style models, lowered at load into the standard ops that define them, so that
//! validation, shape inference, the fusions and every device see only standard ops:
//!
//! | contrib op | lowered to |
//! | --- | --- |
//! | `Gelu(X)` | `Gelu` (exact) |
//! | `BiasGelu(A, B)` | `Add`, `Gelu` (exact) |
//! | `FastGelu(X, bias?)` | (`Add`), `Gelu` (`approximate = "tanh"`) |
//! | `QuickGelu(X; alpha = 1.702)` | `Mul`, `Sigmoid`, `Mul` |
//! | `SkipLayerNormalization(X, skip, gamma, beta?, bias?; epsilon = 1e-12)` | `Add`, (`Add`), `LayerNormalization` (axis −1) |
//! | `SkipSimplifiedLayerNormalization(X, skip, gamma, bias?; epsilon = 1e-12)` | `Add`, (`Add`), `RMSNormalization` (axis −1) |
//!
//! The skip normalizations' optional outputs map onto the lowered nodes: `mean` and
//! `inv_std_var` are `LayerNormalization`'s second and third outputs, and
//! `input_skip_bias_sum` is the last `Add`'s output. Every other `com.microsoft` op stays as it
//! is and is refused, naming the node, when its kernel is built.

use spillway_kernels::{AttrValue, Attributes, Tensor};

use super::{Dim, Graph, Node, ValueId, ValueInfo};
use crate::error::{Error, Result};

/// The domain of ONNX Runtime's contrib ops.
pub const DOMAIN: &str = "com.microsoft";

/// The contrib ops [`lower`] rewrites.
pub const LOWERED_OPS: &[&str] = &[
    "BiasGelu",
    "FastGelu",
    "Gelu",
    "QuickGelu",
    "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization",
];

/// ONNX Runtime's default `epsilon` of the skip normalizations.
const SKIP_NORM_EPSILON: f32 = 1e-12;
/// `QuickGelu`'s default `alpha`.
const QUICK_GELU_ALPHA: f32 = 1.702;

/// Rewrites every contrib op of [`LOWERED_OPS`] in `graph` and its subgraphs; returns how many.
pub fn lower(graph: &mut Graph) -> Result<usize> {
    let mut count = 0;
    for node in &mut graph.nodes {
        for sub in &mut node.subgraphs {
            count += lower(&mut sub.graph)?;
        }
    }
    let nodes = std::mem::take(&mut graph.nodes);
    let mut lowered = Vec::with_capacity(nodes.len());
    for node in nodes {
        if node.domain == DOMAIN && LOWERED_OPS.contains(&node.op_type.as_str()) {
            lowered.extend(lower_node(graph, &node)?);
            count += 1;
        } else {
            lowered.push(node);
        }
    }
    graph.nodes = lowered;
    Ok(count)
}

/// The standard nodes that compute `node`, in order.
fn lower_node(graph: &mut Graph, node: &Node) -> Result<Vec<Node>> {
    let invalid = |rule: String| Error::InvalidNode {
        node: node.name.clone(),
        op_type: node.op_type.clone(),
        rule,
    };
    let input = |i: usize| node.inputs.get(i).copied().flatten();
    let (least, most, outputs) = match node.op_type.as_str() {
        "Gelu" => (1, 1, 1),
        "BiasGelu" => (2, 2, 1),
        "FastGelu" => (1, 2, 1),
        "QuickGelu" => (1, 1, 1),
        "SkipLayerNormalization" => (3, 5, 4),
        _ => (3, 4, 4), // SkipSimplifiedLayerNormalization
    };
    let declared = node.declared_inputs;
    if declared < least || declared > most || (0..least).any(|i| input(i).is_none()) {
        return Err(invalid(format!(
            "takes {least} to {most} inputs, the first {least} present; it has {declared}"
        )));
    }
    if node.outputs.len() > outputs || node.outputs.first().copied().flatten().is_none() {
        return Err(invalid(format!(
            "has at most {outputs} outputs, the first present; it has {}",
            node.outputs.len()
        )));
    }
    let output = |i: usize| node.outputs.get(i).copied().flatten();
    let mut lowering = Lowering {
        graph,
        from: node,
        nodes: Vec::new(),
    };
    let x = input(0).expect("checked: the first input is present");
    let y = output(0).expect("checked: the first output is present");
    match node.op_type.as_str() {
        "Gelu" => lowering.gelu(x, "none", y),
        "BiasGelu" => {
            let sum = lowering.add(x, input(1).expect("checked"), None);
            lowering.gelu(sum, "none", y);
        }
        "FastGelu" => {
            let sum = match input(1) {
                Some(bias) => lowering.add(x, bias, None),
                None => x,
            };
            lowering.gelu(sum, "tanh", y);
        }
        "QuickGelu" => {
            let alpha = node
                .attrs
                .float("alpha", QUICK_GELU_ALPHA)
                .map_err(|e| invalid(e.to_string()))?;
            let alpha = lowering.constant(Tensor::scalar(alpha));
            let scaled = lowering.push("Mul", 14, Attributes::new(), vec![x, alpha], None);
            let gate = lowering.push("Sigmoid", 13, Attributes::new(), vec![scaled], None);
            lowering.push("Mul", 14, Attributes::new(), vec![x, gate], Some(y));
        }
        simplified => {
            let simplified = simplified == "SkipSimplifiedLayerNormalization";
            let epsilon = node
                .attrs
                .float("epsilon", SKIP_NORM_EPSILON)
                .map_err(|e| invalid(e.to_string()))?;
            let bias = input(if simplified { 3 } else { 4 });
            let skip = input(1).expect("checked");
            let sum_output = output(3);
            let sum = lowering.add(x, skip, sum_output.filter(|_| bias.is_none()));
            let sum = match bias {
                Some(bias) => lowering.add(sum, bias, sum_output),
                None => sum,
            };
            let attrs = Attributes::new()
                .with("axis", AttrValue::Int(-1))
                .with("epsilon", AttrValue::Float(epsilon));
            let gamma = input(2).expect("checked");
            if simplified {
                if output(1).is_some() || output(2).is_some() {
                    return Err(invalid(
                        "its mean and inv_std_var outputs are not supported".into(),
                    ));
                }
                lowering.push("RMSNormalization", 23, attrs, vec![sum, gamma], Some(y));
            } else {
                let mut inputs = vec![Some(sum), Some(gamma)];
                if let Some(beta) = input(3) {
                    inputs.push(Some(beta));
                }
                lowering.push_node(
                    "LayerNormalization",
                    17,
                    attrs,
                    inputs,
                    vec![Some(y), output(1), output(2)],
                );
            }
        }
    }
    Ok(lowering.nodes)
}

/// The nodes replacing one contrib node, named after it.
struct Lowering<'a> {
    graph: &'a mut Graph,
    from: &'a Node,
    nodes: Vec<Node>,
}

impl Lowering<'_> {
    /// Adds a node reading `inputs`; returns its output: `output`, or a new value.
    fn push(
        &mut self,
        op_type: &str,
        opset: i64,
        attrs: Attributes,
        inputs: Vec<ValueId>,
        output: Option<ValueId>,
    ) -> ValueId {
        let output = output.unwrap_or_else(|| {
            let name = format!("{}/{op_type}#{}", self.from.name, self.nodes.len());
            self.graph.add_value(ValueInfo::named(name))
        });
        let inputs = inputs.into_iter().map(Some).collect();
        self.push_node(op_type, opset, attrs, inputs, vec![Some(output)]);
        output
    }

    fn push_node(
        &mut self,
        op_type: &str,
        opset: i64,
        attrs: Attributes,
        inputs: Vec<Option<ValueId>>,
        outputs: Vec<Option<ValueId>>,
    ) {
        // Named after the contrib node, so that errors name what the model has.
        let name = format!("{}/{op_type}", self.from.name);
        self.nodes.push(Node {
            name,
            op_type: op_type.to_string(),
            domain: String::new(),
            opset,
            attrs,
            declared_inputs: inputs.len(),
            inputs,
            outputs,
            subgraphs: Vec::new(),
            type_attrs: Vec::new(),
        });
    }

    fn add(&mut self, a: ValueId, b: ValueId, output: Option<ValueId>) -> ValueId {
        self.push("Add", 14, Attributes::new(), vec![a, b], output)
    }

    fn gelu(&mut self, x: ValueId, approximate: &str, output: ValueId) {
        let attrs = Attributes::new().with("approximate", AttrValue::String(approximate.into()));
        self.push("Gelu", 20, attrs, vec![x], Some(output));
    }

    fn constant(&mut self, value: Tensor) -> ValueId {
        let name = format!("{}/constant#{}", self.from.name, self.nodes.len());
        let id = self.graph.add_value(ValueInfo {
            dtype: Some(value.dtype()),
            shape: Some(value.shape().iter().map(|&d| Dim::Fixed(d)).collect()),
            ..ValueInfo::named(name)
        });
        self.graph.constants.insert(id, value);
        id
    }
}
