//! Shape inference of the blocked layout's nodes (domain `spillway.nchw16c`): blocked values
//! are `[N, ⌈C / 16⌉, H, W, 16]`.

use spillway_kernels::cpu::nn::blocked::BLOCK;

use super::shape_rules::conv_like;
use super::{Dim, Node};

type Shape = Vec<Dim>;

/// The output shape of a `spillway.nchw16c` node (blocked values are `[N, ⌈C / 16⌉, H, W,
/// 16]`) from its input's and, for `Conv`, its weights'; the attribute `channels` of
/// `ReorderOutput` and `GlobalAveragePool` gives their planar output's `C`.
pub(super) fn blocked(node: &Node, x: Option<Shape>, w: Option<Shape>) -> Option<Shape> {
    let x = x?;
    let x_blocked = (x.len() == 5).then(|| x.clone());
    // The planar shape of a blocked input (a `Conv` may read planes), every lane counted.
    let planar = match x.as_slice() {
        [n, blocks, h, w, _] => {
            let c = blocks
                .fixed()
                .map_or(Dim::Unknown, |b| Dim::Fixed(b * BLOCK));
            vec![n.clone(), c, h.clone(), w.clone()]
        }
        _ => x,
    };
    let live = || match node.attrs.opt_int("channels").ok()? {
        Some(c) => Some(Dim::Fixed(usize::try_from(c).ok()?)),
        None => planar.get(1).cloned(),
    };
    match node.op_type.as_str() {
        "ReorderOutput" => {
            let mut y = planar.clone();
            *y.get_mut(1)? = live()?;
            Some(y)
        }
        "GlobalAveragePool" => Some(vec![
            planar.first()?.clone(),
            live()?,
            Dim::Fixed(1),
            Dim::Fixed(1),
        ]),
        "Conv" if node.attrs.int("blocked_output", 1).ok()? == 0 => {
            conv_like(node, Some(planar), w)
        }
        "Pad" => {
            let pads = node.attrs.opt_ints("pads").ok()??;
            let [top, left, bottom, right] = pads[..] else {
                return None;
            };
            let mut y = x_blocked?;
            for (d, grow) in y[2..4].iter_mut().zip([top + bottom, left + right]) {
                *d = match d.fixed() {
                    Some(v) => Dim::Fixed(usize::try_from(v as i64 + grow).ok()?),
                    None if grow == 0 => d.clone(),
                    None => Dim::Unknown,
                };
            }
            Some(y)
        }
        "Conv" | "MaxPool" | "AveragePool" => {
            conv_like(node, Some(planar), w).map(|y| crate::graph::passes::blocked_shape(&y))
        }
        _ => None,
    }
}

/// The output shape of the `spillway.nchw16c` `Concat`: the first input's, with blocks for the
/// sum of the attribute `channels`.
pub(super) fn blocked_concat(node: &Node, inputs: Option<Vec<Shape>>) -> Option<Shape> {
    let total: i64 = node.attrs.opt_ints("channels").ok()??.iter().sum();
    let mut y = inputs?.first()?.clone();
    if y.len() != 5 {
        return None;
    }
    y[1] = Dim::Fixed(usize::try_from(total).ok()?.div_ceil(BLOCK));
    Some(y)
}
