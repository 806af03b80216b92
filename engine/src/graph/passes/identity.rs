//! Removes `Identity` nodes, inference-mode `Dropout` nodes and `Cast`s to the type their input
//! already has, by wiring their consumers to their input.

use spillway_kernels::DType;

use crate::graph::Graph;

use super::rewire;

/// Removes Identity and Dropout (when its mask is unused and it cannot be in training mode).
/// A node whose output is a graph output is kept: removing it would rename the output.
pub fn remove_identities(graph: &mut Graph) {
    let mut keep = Vec::with_capacity(graph.nodes.len());
    let nodes = std::mem::take(&mut graph.nodes);
    let mut rewires = Vec::new();
    for node in nodes {
        let removable = match node.op_type.as_str() {
            "Identity" => true,
            // Inputs 1 (ratio) and 2 (training_mode) may only be absent: a training-mode input
            // could be true at run time.
            "Dropout" => node.inputs.len() <= 1 && node.outputs.iter().skip(1).all(Option::is_none),
            _ => false,
        };
        let (Some(Some(input)), Some(Some(output))) = (node.inputs.first(), node.outputs.first())
        else {
            keep.push(node);
            continue;
        };
        if removable && node.domain.is_empty() && !graph.outputs.contains(output) {
            rewires.push((*output, *input));
        } else {
            keep.push(node);
        }
    }
    graph.nodes = keep;
    for (from, to) in rewires.into_iter().rev() {
        rewire(graph, from, to);
    }
}

/// Removes `Cast` nodes to the element type their input already has (T5's norms cast their
/// `f32` input to `f32`), once shape inference has given the input its type. A node whose
/// output is a graph output is kept.
pub fn remove_identity_casts(graph: &mut Graph) {
    let same_type = |node: &crate::graph::Node| {
        let (Some(Some(input)), [Some(output)]) = (node.inputs.first(), node.outputs.as_slice())
        else {
            return None;
        };
        let to = node
            .attrs
            .int("to", 0)
            .ok()
            .and_then(|c| DType::from_onnx(c as i32));
        let identity = node.op_type == "Cast"
            && node.domain.is_empty()
            && to.is_some()
            && graph.value(*input).dtype == to
            && !graph.outputs.contains(output);
        identity.then_some((*output, *input))
    };
    let rewires: Vec<_> = graph.nodes.iter().map(same_type).collect();
    let remove: Vec<bool> = rewires.iter().map(Option::is_some).collect();
    graph.remove_nodes(&remove);
    for (from, to) in rewires.into_iter().flatten().rev() {
        rewire(graph, from, to);
    }
}
