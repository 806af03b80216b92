//! Fuses the exact GELU that exporters write out op by op, `x · (1 + erf(x / √2)) / 2` (BERT's
//! `Div → Erf → Add → Mul → Mul`), into one ONNX `Gelu` (opset 20, `approximate = "none"`):
//! one vectorized pass over the tensor instead of five (ONNX Runtime's `GeluFusion`). The
//! shapes matched, with constant scalar `f32` operands in either position of `Add` and `Mul`:
//!
//! - `u = x / √2` (`Div`) or `u = x · (1/√2)` (`Mul`), then `e = Erf(u)`, `a = e + 1`;
//! - then `(x · a) · ½`, or `(x · ½) · a`.
//!
//! Every intermediate must be read only by the next node of the chain and not be a graph
//! output; `x` may have other readers. The fused node takes the `Erf` node's name.

use super::matching::{
    ChainFusion, fuse_chains, is_scalar, other_input, output_of, plain, sole_readers,
};
use crate::graph::{Graph, Node, ValueId};

/// The opset that defines `Gelu`.
const GELU_OPSET: i64 = 20;

/// Fuses every GELU chain; returns how many `Gelu` nodes it made.
pub fn fuse_gelu(graph: &mut Graph) -> usize {
    let producers = graph.producers();
    let sole = sole_readers(graph);
    let sole_reader = |v: ValueId| sole[v.index()];
    // At the last node's place: `x` is computed before the chain's first node.
    fuse_chains(graph, |graph, erf| {
        let chain = match_chain(graph, erf, &producers, &sole_reader)?;
        Some(ChainFusion {
            from: erf,
            op_type: "Gelu",
            domain: "",
            opset: GELU_OPSET,
            attrs: spillway_kernels::Attributes::new(),
            inputs: vec![chain.x],
            nodes: chain.nodes,
            last: chain.last,
        })
    })
}

/// One GELU chain: its input, its nodes, and the node that writes its output.
struct Chain {
    x: ValueId,
    nodes: Vec<usize>,
    last: usize,
}

/// The GELU chain through the `Erf` node at `erf`, if the nodes around it form one.
fn match_chain(
    graph: &Graph,
    erf: usize,
    producers: &std::collections::HashMap<ValueId, usize>,
    sole_reader: &dyn Fn(ValueId) -> Option<usize>,
) -> Option<Chain> {
    let node = &graph.nodes[erf];
    if !plain(node, "Erf", 1) {
        return None;
    }
    let u = node.inputs[0]?;
    let e = *node.outputs.first()?.as_ref()?;
    let scale = *producers.get(&u)?;
    sole_reader(u).filter(|&r| r == erf)?;
    let x = match graph.nodes[scale].op_type.as_str() {
        "Div" => divided_by(graph, &graph.nodes[scale], std::f32::consts::SQRT_2)?,
        "Mul" => scaled_by(graph, &graph.nodes[scale], std::f32::consts::FRAC_1_SQRT_2)?,
        _ => return None,
    };
    let add = sole_reader(e)?;
    let a = output_of(&graph.nodes[add])?;
    if !plain(&graph.nodes[add], "Add", 2) || !with_constant(graph, &graph.nodes[add], e, 1.0) {
        return None;
    }
    let mul = sole_reader(a)?;
    let m = output_of(&graph.nodes[mul])?;
    if !plain(&graph.nodes[mul], "Mul", 2) {
        return None;
    }
    let other = other_input(&graph.nodes[mul], a)?;
    // `(x · a) · ½`: the second `Mul` reads `x · a`.
    if other == x {
        let last = sole_reader(m)?;
        scaled_by(graph, &graph.nodes[last], 0.5).filter(|&v| v == m)?;
        return Some(Chain {
            x,
            nodes: vec![scale, erf, add, mul, last],
            last,
        });
    }
    // `(x · ½) · a`: `other` is `x · ½`, read only here.
    let half = *producers.get(&other)?;
    sole_reader(other).filter(|&r| r == mul)?;
    scaled_by(graph, &graph.nodes[half], 0.5).filter(|&v| v == x)?;
    Some(Chain {
        x,
        nodes: vec![scale, erf, add, half, mul],
        last: mul,
    })
}

/// The input `x` of `node` = `x · c` or `c · x` (a `Mul` whose other input is the constant
/// scalar `c`).
fn scaled_by(graph: &Graph, node: &Node, c: f32) -> Option<ValueId> {
    if !plain(node, "Mul", 2) {
        return None;
    }
    let (l, r) = (node.inputs[0]?, node.inputs[1]?);
    [(l, r), (r, l)]
        .into_iter()
        .find(|&(_, k)| is_scalar(graph, k, c))
        .map(|(x, _)| x)
}

/// Whether the two-input `node` reads `v` and the constant scalar `c`.
fn with_constant(graph: &Graph, node: &Node, v: ValueId, c: f32) -> bool {
    other_input(node, v).is_some_and(|k| is_scalar(graph, k, c))
}

/// The input `x` of `node` = `x / c` (a `Div` by the constant scalar `c`).
fn divided_by(graph: &Graph, node: &Node, c: f32) -> Option<ValueId> {
    if !plain(node, "Div", 2) {
        return None;
    }
    is_scalar(graph, node.inputs[1]?, c).then_some(node.inputs[0]?)
}
