//! `Resize`'s output shape before running. Its rank is its input's. Its sizes are exact when
//! the `sizes` input is constant; otherwise each size the exporters take from a shape is
//! known: PyTorch writes `F.interpolate(x, size=…)` as
//! `Concat(Slice(Shape(x), 0, 2), computed sizes)` (torchvision's detection transform and FPN
//! do), so the batch and the channels come through, which the blocked layout needs.

use std::collections::HashMap;

use super::shape_inference::clamp_index;
use super::{Dim, Graph, Node, ValueId};

/// The output shape of `Resize` node `node` (`producers`: each value's producing node), as far
/// as it is known; `None` when not even the rank is.
pub(super) fn resize_shape(
    graph: &Graph,
    node: &Node,
    producers: &HashMap<ValueId, usize>,
) -> Option<Vec<Dim>> {
    let input = |i: usize| node.inputs.get(i).copied().flatten();
    let x = graph.value(input(0)?).shape.clone()?;
    let mut out = vec![Dim::Unknown; x.len()];
    // With `axes` or an aspect-ratio policy, `sizes` is not the output shape as it stands.
    let exact = node.attrs.opt_ints("axes").ok()?.is_none()
        && node
            .attrs
            .string("keep_aspect_ratio_policy", "stretch")
            .ok()?
            == "stretch";
    let Some(sizes) = input(3).filter(|_| exact) else {
        return Some(out);
    };
    if let Some(t) = graph.constants.get(&sizes) {
        let sizes = t.to_i64_vec().ok()?;
        if sizes.len() != x.len() || sizes.iter().any(|&s| s < 0) {
            return None;
        }
        return Some(sizes.into_iter().map(|s| Dim::Fixed(s as usize)).collect());
    }
    let parts = match producers.get(&sizes).map(|&p| &graph.nodes[p]) {
        Some(concat) if concat.op_type == "Concat" && concat.attrs.int("axis", 0).ok()? == 0 => {
            concat.inputs.clone()
        }
        _ => vec![Some(sizes)],
    };
    // Each part's sizes in turn: taken from a shape where one is sliced, else unknown; a part
    // of unknown length leaves the rest unknown.
    let mut at = 0;
    for part in parts {
        let dims = match part.and_then(|p| sliced_shape(graph, p, producers)) {
            Some(dims) => dims,
            None => {
                let len =
                    part.and_then(|p| graph.value(p).shape.clone())
                        .and_then(|s| match s[..] {
                            [Dim::Fixed(n)] => Some(n),
                            _ => None,
                        });
                let Some(len) = len else { break };
                vec![Dim::Unknown; len]
            }
        };
        if at + dims.len() > out.len() {
            return None;
        }
        out[at..at + dims.len()].clone_from_slice(&dims);
        at += dims.len();
    }
    Some(out)
}

/// The dims `value` holds when it is `Slice(Shape(y), start, end)` (constant bounds on axis 0,
/// step 1) of a `y` whose shape is known.
fn sliced_shape(
    graph: &Graph,
    value: ValueId,
    producers: &HashMap<ValueId, usize>,
) -> Option<Vec<Dim>> {
    let producer = |v: ValueId| producers.get(&v).map(|&p| &graph.nodes[p]);
    let slice = producer(value).filter(|n| n.op_type == "Slice")?;
    let constant = |i: usize| {
        let v = slice.inputs.get(i).copied().flatten()?;
        graph.constants.get(&v)?.to_i64_vec().ok()
    };
    let present = |i: usize| slice.inputs.get(i).copied().flatten().is_some();
    let (starts, ends) = (constant(1)?, constant(2)?);
    let axes_ok = !present(3) || constant(3)? == [0];
    let steps_ok = !present(4) || constant(4)? == [1];
    let shape = producer(slice.inputs.first().copied().flatten()?)
        .filter(|n| n.op_type == "Shape" && n.attrs.names().next().is_none())?;
    let y = graph
        .value(shape.inputs.first().copied().flatten()?)
        .shape
        .clone()?;
    let (&[start], &[end], true) = (&starts[..], &ends[..], axes_ok && steps_ok) else {
        return None;
    };
    let rank = y.len() as i64;
    let (start, end) = (clamp_index(start, rank), clamp_index(end, rank));
    Some(y[start as usize..end.max(start) as usize].to_vec())
}
