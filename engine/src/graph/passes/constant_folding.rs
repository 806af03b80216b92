//! Constant folding: nodes whose inputs are all known before running are run once, at load,
//! and replaced by their outputs. So are the integer values that shape inference knows whole
//! although their inputs are not all constant ([`crate::graph::known_values`]): `Shape` of a
//! fixed shape, the fixed dims gathered from a symbolic one, and what exporters compute from
//! them, which collapses the Shape→Gather→Concat chains they emit.

use spillway_kernels::Tensor;

use crate::error::Result;
use crate::exec::build_kernel;
use crate::exec::value_ops::VALUE_OPS;
use crate::graph::known_values::KnownValues;
use crate::graph::{Dim, Graph, Node, shape_inference};

/// Folded outputs larger than this stay computed at run time (a model can ask for huge
/// constants, e.g. ConstantOfShape of a big shape, that would bloat the session).
const MAX_FOLDED_BYTES: usize = 64 << 20;

/// Folds until nothing changes. Errors from a kernel that fails on constant inputs are
/// reported (the same node would fail on every run).
pub fn fold_constants(graph: &mut Graph) -> Result<()> {
    loop {
        let mut changed = false;
        let known = shape_inference::infer(graph);
        let nodes = std::mem::take(&mut graph.nodes);
        let mut kept = Vec::with_capacity(nodes.len());
        for node in nodes {
            match fold_node(graph, &known, &node)? {
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
    }
}

/// The node's outputs if it can be computed now.
fn fold_node(graph: &Graph, known: &KnownValues, node: &Node) -> Result<Option<Vec<Tensor>>> {
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
    if let Some(t) = fold_known(graph, known, node) {
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

/// The output of a node with inputs not all constant whose `int64` value is known whole before
/// running.
fn fold_known(graph: &Graph, known: &KnownValues, node: &Node) -> Option<Tensor> {
    let [Some(y)] = node.outputs[..] else {
        return None;
    };
    if graph.value(y).dtype != Some(spillway_kernels::DType::I64)
        || node
            .present_inputs()
            .all(|v| graph.constants.contains_key(&v))
    {
        return None; // the generic path folds it
    }
    let value = known.get(graph, y)?;
    Tensor::from_shape_vec(&value.shape, value.ints()?).ok()
}
