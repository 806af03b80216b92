//! Validation at load, before any pass runs: what `onnx.checker` with full shape inference
//! rejects, and ONNX Runtime at session creation. Each node of the default domain against its
//! operator's schema (input and output counts, required inputs and attributes, attribute names
//! and types), every graph output produced, and the shapes the rules can infer consistent
//! (a `Conv`'s image against its weights, a `MatMul`'s inner dimensions, broadcasting).
//!
//! An invalid model is an [`Error::InvalidNode`] naming the node and the rule.

mod schema;
mod schemas;
mod shapes;

use schema::{AttrKind, Schema};

use super::{Graph, Node, shape_inference};
use crate::error::{Error, Result};

/// Checks `graph` (and its subgraphs) before it is optimized; infers its shapes on the way.
pub fn validate(graph: &mut Graph) -> Result<()> {
    check_structure(graph)?;
    shape_inference::infer(graph);
    shapes::check(graph)
}

/// Every rule that needs no shapes, in `graph` and its subgraphs.
fn check_structure(graph: &Graph) -> Result<()> {
    check_outputs(graph)?;
    for node in &graph.nodes {
        if node.domain.is_empty() || node.domain == "ai.onnx" {
            check_node(node)?;
        }
        for sub in &node.subgraphs {
            check_structure(&sub.graph)?;
        }
    }
    Ok(())
}

/// Every graph output is an input, a constant or some node's output.
fn check_outputs(graph: &Graph) -> Result<()> {
    let produced = graph.producers();
    for &v in &graph.outputs {
        if !produced.contains_key(&v)
            && !graph.inputs.contains(&v)
            && !graph.constants.contains_key(&v)
        {
            return Err(Error::InvalidModel(format!(
                "graph output '{}' is not produced by any node, input or initializer",
                graph.name(v)
            )));
        }
    }
    Ok(())
}

fn invalid(node: &Node, rule: String) -> Error {
    Error::InvalidNode {
        node: node.name.clone(),
        op_type: node.op_type.clone(),
        rule,
    }
}

/// A default-domain node against its operator's schema at the node's opset.
fn check_node(node: &Node) -> Result<()> {
    let Some(schema) = Schema::find(&node.op_type, node.opset) else {
        if Schema::exists(&node.op_type) {
            return Err(invalid(
                node,
                format!("{} does not exist in opset {}", node.op_type, node.opset),
            ));
        }
        // Not an ONNX operator: building its kernel says it is unsupported.
        return Ok(());
    };
    let counts = |what: &str, n: usize, (lo, hi): (u32, u32)| {
        let range = match hi {
            u32::MAX => format!("at least {lo}"),
            hi if hi == lo => format!("{lo}"),
            hi => format!("{lo} to {hi}"),
        };
        match (lo as usize..=hi as usize).contains(&n) {
            true => Ok(()),
            false => Err(invalid(
                node,
                format!(
                    "has {n} {what}s; opset {} {} takes {range}",
                    schema.since, node.op_type
                ),
            )),
        }
    };
    counts("input", node.declared_inputs, schema.inputs)?;
    counts("output", node.outputs.len(), schema.outputs)?;
    for (i, input) in node.inputs[..node.declared_inputs].iter().enumerate() {
        if input.is_none() && schema.requires_input(i) {
            return Err(invalid(node, format!("input {i} is required but empty")));
        }
    }
    for name in node.attrs.names() {
        let Some(&(_, kind, _)) = schema.attrs.iter().find(|(n, ..)| *n == name) else {
            return Err(invalid(node, format!("has no attribute '{name}'")));
        };
        let value = node.attrs.get(name).expect("a listed attribute");
        if !kind.admits(value) && !is_empty_list(value) {
            return Err(invalid(
                node,
                format!("attribute '{name}' must be of type {kind:?}"),
            ));
        }
    }
    let held_apart = node
        .subgraphs
        .iter()
        .map(|s| (s.attr.as_str(), AttrKind::Graph))
        .chain(
            node.type_attrs
                .iter()
                .map(|(n, _)| (n.as_str(), AttrKind::TypeProto)),
        );
    for (name, kind) in held_apart {
        if !schema.attrs.iter().any(|&(n, k, _)| n == name && k == kind) {
            return Err(invalid(node, format!("has no {kind:?} attribute '{name}'")));
        }
    }
    let present = |name: &str| {
        node.attrs.has(name)
            || node.subgraphs.iter().any(|s| s.attr == name)
            || node.type_attrs.iter().any(|(n, _)| n == name)
    };
    if let Some((name, ..)) = schema.attrs.iter().find(|(n, _, req)| *req && !present(n)) {
        return Err(invalid(
            node,
            format!("required attribute '{name}' is missing"),
        ));
    }
    Ok(())
}

/// An empty list, which old models store without saying of what.
fn is_empty_list(value: &spillway_kernels::AttrValue) -> bool {
    use spillway_kernels::AttrValue::*;
    matches!(value, Floats(v) if v.is_empty())
        || matches!(value, Ints(v) if v.is_empty())
        || matches!(value, Strings(v) if v.is_empty())
}
