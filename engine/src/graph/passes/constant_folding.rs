//! Constant folding: nodes whose inputs are all known before running are run once, at load,
//! and replaced by their outputs. `Shape` and `Size` of values whose shape inference fixed are
//! folded too, which collapses the Shape→Gather→Concat chains exporters emit.

use std::collections::HashMap;

use spillway_kernels::Tensor;

use crate::error::Result;
use crate::exec::build_kernel;
use crate::exec::value_ops::VALUE_OPS;
use crate::graph::{Dim, Graph, Node, ValueId, shape_inference};

/// Folded outputs larger than this stay computed at run time (a model can ask for huge
/// constants, e.g. ConstantOfShape of a big shape, that would bloat the session).
const MAX_FOLDED_BYTES: usize = 64 << 20;

/// Folds until nothing changes. Errors from a kernel that fails on constant inputs are
/// reported (the same node would fail on every run).
pub fn fold_constants(graph: &mut Graph) -> Result<()> {
    loop {
        let mut changed = false;
        let shapes = shape_nodes(graph);
        let nodes = std::mem::take(&mut graph.nodes);
        let mut kept = Vec::with_capacity(nodes.len());
        for node in nodes {
            match fold_node(graph, &shapes, &node)? {
                Some(outputs) => {
                    for (slot, t) in node.outputs.iter().zip(outputs) {
                        if let Some(v) = slot {
                            let info = &mut graph.values[v.index()];
                            info.dtype = Some(t.dtype());
                            info.shape = Some(t.shape().iter().map(|&d| Dim::Fixed(d)).collect());
                            graph.constants.insert(*v, t);
                        }
                    }
                    changed = true;
                }
                None => kept.push(node),
            }
        }
        graph.nodes = kept;
        if !changed {
            return Ok(());
        }
        shape_inference::infer(graph);
    }
}

/// The node's outputs if it can be computed now.
fn fold_node(graph: &Graph, shapes: &ShapeNodes, node: &Node) -> Result<Option<Vec<Tensor>>> {
    let default_domain = node.domain.is_empty() || node.domain == "ai.onnx";
    if !default_domain || !node.subgraphs.is_empty() {
        return Ok(None);
    }
    // Sequences and optionals are never folded into tensors: their operators (Identity
    // aside, which the kernels fold on a constant tensor) are left to run, and so is any
    // node touching a value declared as a sequence or an optional.
    if (node.op_type != "Identity" && VALUE_OPS.contains(&node.op_type.as_str()))
        || node
            .present_inputs()
            .chain(node.present_outputs())
            .any(|v| !graph.value(v).kind.is_tensor())
    {
        return Ok(None);
    }
    if let Some(t) = fold_shape(graph, node).or_else(|| fold_gathered_dims(graph, shapes, node)) {
        return Ok(Some(vec![t]));
    }
    let inputs: Option<Vec<Option<&Tensor>>> = node
        .inputs
        .iter()
        .map(|v| match v {
            None => Some(None),
            Some(v) => graph.constants.get(v).map(Some),
        })
        .collect();
    let Some(inputs) = inputs else {
        return Ok(None);
    };
    // Dropout may be random in training mode; everything else we support is deterministic.
    if node.op_type == "Dropout" && node.inputs.len() > 2 {
        return Ok(None);
    }
    let kernel = build_kernel(node)?;
    let outputs = kernel.run(&inputs).map_err(|cause| crate::Error::Kernel {
        node: node.name.clone(),
        op_type: node.op_type.clone(),
        cause,
    })?;
    if outputs.iter().map(Tensor::byte_len).sum::<usize>() > MAX_FOLDED_BYTES {
        return Ok(None);
    }
    Ok(Some(outputs))
}

/// Each `Shape` node's output: the value it measures and the node (for `start` and `end`).
type ShapeNodes = HashMap<ValueId, (ValueId, Node)>;

fn shape_nodes(graph: &Graph) -> ShapeNodes {
    graph
        .nodes
        .iter()
        .filter(|n| n.op_type == "Shape" && n.domain.is_empty())
        .filter_map(|n| {
            Some((
                n.outputs.first().copied()??,
                (n.inputs.first().copied()??, n.clone()),
            ))
        })
        .collect()
}

/// `Gather` (axis 0, constant indices) of a `Shape` whose gathered dimensions are fixed, even
/// where others are not: exporters compute "same" padding from an image's height and width
/// this way (timm's NASNet), and with a symbolic batch the whole `Shape` cannot fold.
fn fold_gathered_dims(graph: &Graph, shapes: &ShapeNodes, node: &Node) -> Option<Tensor> {
    if node.op_type != "Gather" || node.attrs.int("axis", 0).ok()? != 0 {
        return None;
    }
    let (measured, shape_node) = shapes.get(&node.inputs.first().copied()??)?;
    let indices = graph.constants.get(&node.inputs.get(1).copied()??)?;
    let dims = graph.value(*measured).shape.as_ref()?;
    let (start, end) = shape_range(shape_node, dims.len())?;
    let dims = &dims[start..end];
    let count = dims.len() as i64;
    let values: Option<Vec<i64>> = indices
        .to_i64_vec()
        .ok()?
        .into_iter()
        .map(|i| {
            let i = if i < 0 { i + count } else { i };
            dims.get(usize::try_from(i).ok()?)?
                .fixed()
                .map(|d| d as i64)
        })
        .collect();
    Tensor::from_shape_vec(indices.shape(), values?).ok()
}

/// The dimensions `start..end` a `Shape` node of a rank-`rank` value returns (opset 15's
/// attributes, negative from the end, clamped to the rank; empty when `end < start`).
fn shape_range(node: &Node, rank: usize) -> Option<(usize, usize)> {
    let rank = rank as i64;
    let clamp = |x: i64| if x < 0 { (x + rank).clamp(0, rank) } else { x.min(rank) } as usize;
    let start = clamp(node.attrs.int("start", 0).ok()?);
    let end = clamp(node.attrs.int("end", rank).ok()?);
    Some((start, end.max(start)))
}

/// `Shape` / `Size` of a value whose shape is fully fixed.
fn fold_shape(graph: &Graph, node: &Node) -> Option<Tensor> {
    if !matches!(node.op_type.as_str(), "Shape" | "Size") {
        return None;
    }
    let v = node.inputs.first().copied().flatten()?;
    if graph.constants.contains_key(&v) {
        return None; // the generic path folds it
    }
    let dims = graph.value(v).fixed_shape()?;
    if node.op_type == "Size" {
        return Some(Tensor::scalar(dims.iter().product::<usize>() as i64));
    }
    let (start, end) = shape_range(node, dims.len())?;
    let values: Vec<i64> = dims.get(start..end)?.iter().map(|&d| d as i64).collect();
    Tensor::from_shape_vec(&[values.len()], values).ok()
}
