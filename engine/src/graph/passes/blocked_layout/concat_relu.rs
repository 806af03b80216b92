//! Folds a `Relu` into the concatenation of blocks it alone reads: the blocked `Concat` with
//! `relu` 1 writes `Relu` of the joined blocks, so the joined image is not read and written
//! again. NASNet's cells end in a `Concat` of their branches whose only reader is a `Relu`
//! (23 such pairs; those `Relu`s took about 2 ms of 136 on 2 threads).

use spillway_kernels::AttrValue;
use spillway_kernels::cpu::nn::blocked::{BLOCK, DOMAIN};

use super::eligible::{default_domain, plain_relu};
use crate::graph::{Dim, Graph, Node};

/// Folds every `Relu` whose input is a concatenation of blocks read by nothing else (and no
/// graph output) into it; returns how many it folded.
pub(super) fn fold_relus_into_concats(graph: &mut Graph) -> usize {
    let producers = graph.producers();
    let uses = graph.use_counts();
    let mut remove = vec![false; graph.nodes.len()];
    let mut folds = Vec::new();
    for (r, relu) in graph.nodes.iter().enumerate() {
        let Some(Some(x)) = relu.inputs.first().copied().filter(|_| plain_relu(relu)) else {
            continue;
        };
        let Some(&c) = producers.get(&x) else {
            continue;
        };
        if uses[x.index()] != 1 || graph.outputs.contains(&x) {
            continue;
        }
        let Some(channels) = joined_channels(graph, &graph.nodes[c]) else {
            continue;
        };
        folds.push((c, r, channels));
        remove[r] = true;
    }
    for (c, r, channels) in folds {
        let outputs = graph.nodes[r].outputs.clone();
        let concat = &mut graph.nodes[c];
        concat.attrs.remove("axis");
        concat.attrs.insert("channels", AttrValue::Ints(channels));
        concat.attrs.insert("relu", AttrValue::Int(1));
        concat.domain = DOMAIN.into();
        concat.opset = super::VERSION;
        concat.outputs = outputs;
    }
    graph.remove_nodes(&remove)
}

/// Each input's channels when `node` joins blocks: the blocked `Concat`'s own count, or for
/// the default domain's `Concat` along axis 1 of 5-D blocks, every block of each input (the
/// padding lanes of a last input go through as the plain `Concat` would pass them).
fn joined_channels(graph: &Graph, node: &Node) -> Option<Vec<i64>> {
    if node.op_type != "Concat" || node.outputs.len() != 1 {
        return None;
    }
    if node.domain == DOMAIN {
        return node.attrs.opt_ints("channels").ok().flatten();
    }
    if !default_domain(node) || node.attrs.int("axis", 0).ok()? != 1 {
        return None;
    }
    node.inputs
        .iter()
        .map(|v| match graph.value((*v)?).shape.as_deref()? {
            [_, Dim::Fixed(blocks), _, _, Dim::Fixed(lanes)] if *lanes == BLOCK => {
                Some((blocks * BLOCK) as i64)
            }
            _ => None,
        })
        .collect()
}
