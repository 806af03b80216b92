//! Fuses the RMS norm that T5 exports op by op, `w · (x · 1/√(mean(x²) + ε))`
//! (`Pow → ReduceMean → Add → Sqrt → Div → Mul → Mul`), into one `spillway`
//! `RMSNormalization`: one pass over each row instead of seven nodes (ONNX Runtime's
//! `SimplifiedLayerNormalization`). The shapes matched, with constant operands in either
//! position of `Add` and `Mul`:
//!
//! - `p = x^2` (`Pow` by the constant scalar 2), `m = ReduceMean(p)` over the last axis with
//!   `keepdims`, `a = m + ε` (a constant scalar), `s = √a`;
//! - then `x · (1 / s)` or `x / s`, times the constant `f32` vector `w` of the last axis.
//!
//! Every intermediate must be read only by the next node of the chain and not be a graph
//! output; `x` may have other readers. The fused node takes the `ReduceMean`'s name and the
//! last `Mul`'s place.

use super::matching::{
    ChainFusion, fuse_chains, is_scalar, other_input, output_of, plain, sole_readers,
};
use crate::graph::{Dim, Graph, Node, ValueId};
use spillway_kernels::cpu::nn::SPILLWAY_DOMAIN;
use spillway_kernels::{AttrValue, Attributes, DType};

/// Fuses every RMS norm chain; returns how many `RMSNormalization` nodes it made.
pub fn fuse_rms_norm(graph: &mut Graph) -> usize {
    let producers = graph.producers();
    let sole = sole_readers(graph);
    fuse_chains(graph, |graph, mean| {
        let chain = match_chain(graph, mean, &producers, &sole)?;
        Some(ChainFusion {
            from: mean,
            op_type: "RMSNormalization",
            domain: SPILLWAY_DOMAIN,
            opset: 1,
            attrs: Attributes::new().with("epsilon", AttrValue::Float(chain.epsilon)),
            inputs: vec![chain.x, chain.scale],
            nodes: chain.nodes,
            last: chain.last,
        })
    })
}

/// One RMS norm chain: its input, scale and ε, its nodes, and the node that writes its output.
struct Chain {
    x: ValueId,
    scale: ValueId,
    epsilon: f32,
    nodes: Vec<usize>,
    last: usize,
}

/// The chain through the `ReduceMean` node at `mean`, if the nodes around it form one.
fn match_chain(
    graph: &Graph,
    mean: usize,
    producers: &std::collections::HashMap<ValueId, usize>,
    sole: &[Option<usize>],
) -> Option<Chain> {
    let next = |v: ValueId| sole[v.index()];
    let node = &graph.nodes[mean];
    let p = node.inputs.first().copied().flatten()?;
    let m = output_of(node)?;
    let pow = *producers.get(&p)?;
    next(p).filter(|&r| r == mean)?;
    let pow_node = &graph.nodes[pow];
    if !plain(pow_node, "Pow", 2) || !is_scalar(graph, pow_node.inputs[1]?, 2.0) {
        return None;
    }
    let x = pow_node.inputs[0]?;
    if !over_last_axis(graph, node, x) {
        return None;
    }
    let add = next(m)?;
    let epsilon = other_input(&graph.nodes[add], m)
        .filter(|_| plain(&graph.nodes[add], "Add", 2))
        .and_then(|e| graph.constant_f32_scalar(e))?;
    let a = output_of(&graph.nodes[add])?;
    let sqrt = next(a)?;
    let s = output_of(&graph.nodes[sqrt]).filter(|_| plain(&graph.nodes[sqrt], "Sqrt", 1))?;
    let div = next(s)?;
    let div_node = &graph.nodes[div];
    if !plain(div_node, "Div", 2) || div_node.inputs[1]? != s {
        return None;
    }
    let r = output_of(div_node)?;
    // `x / s`, or `1 / s` and then `x · r`.
    let (normalized, mut nodes) = if div_node.inputs[0]? == x {
        (r, vec![pow, mean, add, sqrt, div])
    } else {
        is_scalar(graph, div_node.inputs[0]?, 1.0).then_some(())?;
        let mul = next(r)?;
        (other_input(&graph.nodes[mul], r) == Some(x) && plain(&graph.nodes[mul], "Mul", 2))
            .then_some(())?;
        (
            output_of(&graph.nodes[mul])?,
            vec![pow, mean, add, sqrt, div, mul],
        )
    };
    let last = next(normalized)?;
    let scale = other_input(&graph.nodes[last], normalized)
        .filter(|_| plain(&graph.nodes[last], "Mul", 2))?;
    let n = match graph.constants.get(&scale)?.shape() {
        [n] if graph.constants[&scale].dtype() == DType::F32 => *n,
        _ => return None,
    };
    // The scale must broadcast as the last `Mul` broadcasts it; over an axis whose size is
    // not known yet, the kernel broadcasts an axis of 1 to the scale's length as `Mul` does.
    if last_dim(graph, x).is_some_and(|d| d != n && d != 1 && n != 1) {
        return None;
    }
    nodes.push(last);
    Some(Chain {
        x,
        scale,
        epsilon,
        nodes,
        last,
    })
}

/// The fixed size of `v`'s last axis, when it is known.
fn last_dim(graph: &Graph, v: ValueId) -> Option<usize> {
    match graph.value(v).shape.as_ref()?.last()? {
        Dim::Fixed(n) => Some(*n),
        _ => None,
    }
}

/// Whether the `ReduceMean` `node` averages its input `x` over the last axis only, keeping it:
/// `axes` the attribute (before opset 18) or a constant second input.
fn over_last_axis(graph: &Graph, node: &Node, x: ValueId) -> bool {
    let last = graph.value(x).shape.as_ref().map(|s| s.len() as i64 - 1);
    if node.op_type != "ReduceMean"
        || !(node.domain.is_empty() || node.domain == "ai.onnx")
        || node.outputs.len() != 1
        || node.attrs.int("keepdims", 1).ok() != Some(1)
        || node.attrs.names().any(|a| a != "keepdims" && a != "axes")
    {
        return false;
    }
    let axes = match node.inputs.as_slice() {
        [Some(_)] => node.attrs.ints("axes").ok(),
        [Some(_), Some(axes)] if !node.attrs.has("axes") => {
            graph.constants.get(axes).and_then(|t| t.to_i64_vec().ok())
        }
        _ => None,
    };
    matches!(axes.as_deref(), Some(&[a]) if a == -1 || Some(a) == last)
}
