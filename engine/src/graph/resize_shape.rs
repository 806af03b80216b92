//! `Resize`'s output shape before running. Its rank is its input's, and its sizes are those of
//! the `sizes` input known before running: all of them when it is constant, and where it is
//! computed the ones the exporters take from shapes. PyTorch writes `F.interpolate(x, size=…)`
//! as `Concat(Slice(Shape(x), 0, 2), computed sizes)` (torchvision's detection transform and
//! FPN do), so the batch and the channels come through, which the blocked layout needs.

use super::known_values::{Element, KnownValues};
use super::{Dim, Graph, Node};

/// The output shape of `Resize` node `node` (`known`: the values known before running), as
/// far as it is known; `None` when not even the rank is.
pub(super) fn resize_shape(graph: &Graph, node: &Node, known: &KnownValues) -> Option<Vec<Dim>> {
    let input = |i: usize| node.inputs.get(i).copied().flatten();
    let rank = graph.value(input(0)?).shape.as_ref()?.len();
    let unknown = vec![Dim::Unknown; rank];
    // With `axes` or an aspect-ratio policy, `sizes` is not the output shape as it stands.
    let exact = node.attrs.opt_ints("axes").ok()?.is_none()
        && node
            .attrs
            .string("keep_aspect_ratio_policy", "stretch")
            .ok()?
            == "stretch";
    let Some(sizes) = input(3).filter(|_| exact) else {
        return Some(unknown);
    };
    match known.get(graph, sizes) {
        Some(sizes) if sizes.elements.len() != rank => None,
        Some(sizes) => Some(sizes.elements.iter().map(Element::dim).collect()),
        None => Some(unknown),
    }
}
