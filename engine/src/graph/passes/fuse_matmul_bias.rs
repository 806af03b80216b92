//! Fuses `MatMul(A, W)` and the `Add` of a bias after it (`y + b` or `b + y`) into one
//! `spillway` `MatMulBias`, whose kernel adds the bias in the packed GEMM's tiles while they
//! are in registers instead of in a second pass over the product (BERT-base's 72 bias `Add`s
//! on [128, 768] and [128, 3072]). ONNX Runtime fuses the same pairs into `Gemm` where `A` is
//! a matrix; transformers' `A` has a batch axis, so Spillway has its own op.
//!
//! Matched: `W` a constant `f32` matrix `k × n`, `b` a constant `f32` vector of `n`, and the
//! product read only by the `Add` (and no graph output). The fused node takes the `MatMul`'s
//! name and place, and the `Add`'s output.

use super::matching::{other_input, output_of, plain, sole_readers};
use crate::graph::Graph;
use spillway_kernels::DType;
use spillway_kernels::cpu::nn::SPILLWAY_DOMAIN;

/// Fuses every `MatMul` + bias `Add`; returns how many `MatMulBias` nodes it made.
pub fn fuse_matmul_bias(graph: &mut Graph) -> usize {
    let sole = sole_readers(graph);
    let mut remove = vec![false; graph.nodes.len()];
    let mut fused = 0;
    for mm in 0..graph.nodes.len() {
        let node = &graph.nodes[mm];
        if !plain(node, "MatMul", 2) {
            continue;
        }
        let Some(y) = output_of(node) else { continue };
        let Some(add) = sole[y.index()] else { continue };
        if !plain(&graph.nodes[add], "Add", 2) {
            continue;
        }
        let Some(n) = node.inputs[1].and_then(|w| weight_columns(graph, w)) else {
            continue;
        };
        let Some(bias) = other_input(&graph.nodes[add], y) else {
            continue;
        };
        let is_bias = graph
            .constants
            .get(&bias)
            .is_some_and(|b| b.dtype() == DType::F32 && b.shape() == [n]);
        if !is_bias {
            continue;
        }
        let mut fused_node = graph.nodes[mm].clone();
        fused_node.op_type = "MatMulBias".into();
        fused_node.domain = SPILLWAY_DOMAIN.into();
        fused_node.opset = 1;
        fused_node.inputs.push(Some(bias));
        fused_node.declared_inputs = 3;
        fused_node.outputs = graph.nodes[add].outputs.clone();
        graph.nodes[mm] = fused_node;
        remove[add] = true;
        fused += 1;
    }
    graph.remove_nodes(&remove);
    fused
}

/// The column count `n` of `w` when it is a constant `f32` matrix (`k × n`).
fn weight_columns(graph: &Graph, w: crate::graph::ValueId) -> Option<usize> {
    let w = graph.constants.get(&w)?;
    match (w.dtype(), w.shape()) {
        (DType::F32, &[_, n]) => Some(n),
        _ => None,
    }
}
