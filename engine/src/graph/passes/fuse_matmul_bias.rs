//! Fuses `MatMul(A, W)` and the `Add` of a bias after it (`y + b` or `b + y`) into one
//! `spillway` `MatMulBias`, whose kernel adds the bias in the packed GEMM's tiles while they
//! are in registers instead of in a second pass over the product (BERT-base's 72 bias `Add`s
//! on [128, 768] and [128, 3072]). ONNX Runtime fuses the same pairs into `Gemm` where `A` is
//! a matrix; transformers' `A` has a batch axis, so Spillway has its own op.
//!
//! Matched: `W` a constant `f32` matrix `k × n`, `b` a constant `f32` vector of `n`, and the
//! product read only by the `Add` (and no graph output). The fused node takes the `MatMul`'s
//! name, and the `Add`'s place and output.

use super::matching::{ChainFusion, fuse_chains, other_input, output_of, plain, sole_readers};
use crate::graph::Graph;
use spillway_kernels::DType;
use spillway_kernels::cpu::nn::SPILLWAY_DOMAIN;

/// Fuses every `MatMul` + bias `Add`; returns how many `MatMulBias` nodes it made.
pub fn fuse_matmul_bias(graph: &mut Graph) -> usize {
    let sole = sole_readers(graph);
    fuse_chains(graph, |graph, mm| {
        let node = &graph.nodes[mm];
        if !plain(node, "MatMul", 2) {
            return None;
        }
        let y = output_of(node)?;
        let add = sole[y.index()]?;
        if !plain(&graph.nodes[add], "Add", 2) {
            return None;
        }
        let n = weight_columns(graph, node.inputs[1]?)?;
        let bias = other_input(&graph.nodes[add], y)?;
        let b = graph.constants.get(&bias)?;
        (b.dtype() == DType::F32 && b.shape() == [n]).then_some(())?;
        Some(ChainFusion {
            from: mm,
            op_type: "MatMulBias",
            domain: SPILLWAY_DOMAIN,
            opset: 1,
            attrs: node.attrs.clone(),
            inputs: vec![node.inputs[0]?, node.inputs[1]?, bias],
            nodes: vec![mm, add],
            last: add,
        })
    })
}

/// The column count `n` of `w` when it is a constant `f32` matrix (`k × n`).
fn weight_columns(graph: &Graph, w: crate::graph::ValueId) -> Option<usize> {
    let w = graph.constants.get(&w)?;
    match (w.dtype(), w.shape()) {
        (DType::F32, &[_, n]) => Some(n),
        _ => None,
    }
}
