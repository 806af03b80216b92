//! The shape formulas of single ops, for shape inference ([`super::shape_inference`]): what
//! each op's output shape is, given what is known of its inputs' shapes and values.

use super::known_values::{Element, KnownValues, slice_count};
use super::{Dim, Graph, Node};

pub(super) type Shape = Vec<Dim>;

/// `axis` of a rank-`rank` value, negative counting from the end; `None` outside the rank.
pub(super) fn axis_index(axis: i64, rank: usize) -> Option<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    usize::try_from(a).ok().filter(|&a| a < rank)
}

/// `Resize`'s output shape. Its rank is its input's, and its sizes are those of the `sizes`
/// input known before running: all of them when it is constant, and where it is computed the
/// ones the exporters take from shapes. PyTorch writes `F.interpolate(x, size=…)` as
/// `Concat(Slice(Shape(x), 0, 2), computed sizes)` (torchvision's detection transform and
/// FPN do), so the batch and the channels come through, which the blocked layout needs.
/// `known`: the values known before running; `None` when not even the rank is known.
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

/// `Pad`'s output (`pads` as far as known, and `axes` from opset 18, known before running): each
/// padded axis grows by its two pads; an axis of unknown or symbolic size stays so only when
/// unpadded, and one whose pads are not known becomes unknown.
pub(super) fn padded(
    input: Option<Shape>,
    pads: Option<Vec<Element>>,
    axes: Option<Vec<i64>>,
) -> Option<Shape> {
    let mut out = input?;
    let pads = pads?;
    let rank = out.len();
    let axes: Vec<i64> = axes.unwrap_or_else(|| (0..rank as i64).collect());
    if pads.len() != 2 * axes.len() {
        return None;
    }
    for (i, &axis) in axes.iter().enumerate() {
        let dim = out.get_mut(axis_index(axis, rank)?)?;
        let grow = match (pads[i].int(), pads[i + axes.len()].int()) {
            // Pads from data may be anything: a sum past i64 is no shape.
            (Some(begin), Some(end)) => begin.checked_add(end)?,
            _ => {
                *dim = Dim::Unknown;
                continue;
            }
        };
        if grow == 0 {
            continue;
        }
        *dim = match dim.fixed() {
            Some(d) => Dim::Fixed(usize::try_from((d as i64).checked_add(grow)?).ok()?),
            None => Dim::Unknown,
        };
    }
    Some(out)
}

/// `Slice`'s output for constant `starts`, `ends` and (if given) `axes` and `steps`: a sliced
/// axis of fixed size gets its count, one of other size stays only when sliced whole.
pub(super) fn sliced(
    mut x: Shape,
    starts: Vec<i64>,
    ends: Vec<i64>,
    axes: Option<Option<Vec<i64>>>,
    steps: Option<Option<Vec<i64>>>,
) -> Option<Shape> {
    let axes = axes.map_or(Some((0..starts.len() as i64).collect()), |a| a)?;
    let steps = steps.map_or(Some(vec![1; starts.len()]), |s| s)?;
    if [ends.len(), axes.len(), steps.len()] != [starts.len(); 3] {
        return None;
    }
    let rank = x.len();
    for k in 0..starts.len() {
        let dim = x.get_mut(axis_index(axes[k], rank)?)?;
        let whole = steps[k] == 1 && starts[k] == 0 && ends[k] >= i32::MAX as i64;
        *dim = match dim.fixed() {
            Some(d) => Dim::Fixed(slice_count(starts[k], ends[k], steps[k], d)?),
            None if whole => dim.clone(),
            None => Dim::Unknown,
        };
    }
    Some(x)
}

/// `Squeeze`'s output: the `axes` removed, or without them every axis of size 1 (known only
/// when every size is).
pub(super) fn squeezed(x: Shape, axes: Option<Vec<i64>>) -> Option<Shape> {
    let drop: Vec<usize> = match axes {
        Some(axes) => axes
            .iter()
            .map(|&a| axis_index(a, x.len()))
            .collect::<Option<_>>()?,
        None if x.iter().all(|d| d.fixed().is_some()) => {
            (0..x.len()).filter(|&k| x[k] == Dim::Fixed(1)).collect()
        }
        None => return None,
    };
    Some(
        (0..x.len())
            .filter(|k| !drop.contains(k))
            .map(|k| x[k].clone())
            .collect(),
    )
}

/// A reduction's output over `axes` (every axis when `None` or empty, unless `noop`).
pub(super) fn reduced(x: Shape, axes: Option<Vec<i64>>, keep: bool, noop: bool) -> Option<Shape> {
    let axes: Vec<usize> = match axes {
        Some(a) if a.is_empty() && noop => return Some(x),
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|&a| axis_index(a, x.len()))
            .collect::<Option<_>>()?,
        _ => (0..x.len()).collect(),
    };
    Some(
        (0..x.len())
            .filter_map(|k| match (axes.contains(&k), keep) {
                (false, _) => Some(x[k].clone()),
                (true, true) => Some(Dim::Fixed(1)),
                (true, false) => None,
            })
            .collect(),
    )
}

/// A `Shape`/`Slice` bound on an axis of length `rank`: negative counts from the end, and
/// the result lies in `0..=rank`.
pub(super) fn clamp_index(v: i64, rank: i64) -> i64 {
    if v < 0 {
        (v + rank).max(0)
    } else {
        v.min(rank)
    }
}

pub(super) fn product(dims: &[Dim]) -> Dim {
    if let [single] = dims {
        return single.clone();
    }
    dims.iter()
        .try_fold(1usize, |n, d| n.checked_mul(d.fixed()?))
        .map_or(Dim::Unknown, Dim::Fixed)
}

/// Multidirectional broadcasting of known ranks.
pub(super) fn broadcast(shapes: &[Shape]) -> Option<Shape> {
    let rank = shapes.iter().map(Vec::len).max()?;
    let mut out = vec![Dim::Fixed(1); rank];
    for s in shapes {
        let offset = rank - s.len();
        for (i, d) in s.iter().enumerate() {
            let o = &mut out[offset + i];
            *o = match (&*o, d) {
                (Dim::Fixed(1), d) => d.clone(),
                (o, Dim::Fixed(1)) => o.clone(),
                (a, b) if a == b => a.clone(),
                (Dim::Fixed(a), Dim::Fixed(b)) if a != b => return None,
                (Dim::Fixed(a), _) | (_, Dim::Fixed(a)) => Dim::Fixed(*a),
                _ => Dim::Unknown,
            };
        }
    }
    Some(out)
}

pub(super) fn matmul(a: Option<Shape>, b: Option<Shape>) -> Option<Shape> {
    let (a, b) = (a?, b?);
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let batch = broadcast(&[a[..a.len() - 2].to_vec(), b[..b.len() - 2].to_vec()])?;
    let mut out = batch;
    out.push(a[a.len() - 2].clone());
    out.push(b[b.len() - 1].clone());
    Some(out)
}

/// `Reshape`'s output for a target known element by element (an unknown element, which may
/// be `0` or `-1`, gives an unknown dim and leaves a `-1` unknown).
pub(super) fn reshape(
    input: Option<Shape>,
    target: Option<Vec<Element>>,
    allow_zero: bool,
) -> Option<Shape> {
    let target = target?;
    // An unknown input shape must not read as rank 0 (element count 1): `-1` stays unknown then.
    let input_known = input.is_some();
    let input = input.unwrap_or_default();
    let mut out: Shape = target
        .iter()
        .enumerate()
        .map(|(i, t)| match t {
            Element::Int(0) if !allow_zero => input.get(i).cloned().unwrap_or(Dim::Unknown),
            t => t.dim(),
        })
        .collect();
    if let Some(pos) = target.iter().position(|t| *t == Element::Int(-1)) {
        let total = input_known
            .then(|| checked_product(input.iter().map(Dim::fixed)))
            .flatten();
        let rest = checked_product(
            out.iter()
                .enumerate()
                .filter(|(i, _)| *i != pos)
                .map(|(_, d)| d.fixed()),
        );
        if let (Some(total), Some(rest)) = (total, rest)
            && rest > 0
            && total % rest == 0
        {
            out[pos] = Dim::Fixed(total / rest);
        }
    }
    Some(out)
}

/// The product of sizes that are all known and whose product fits in `usize`.
fn checked_product(mut dims: impl Iterator<Item = Option<usize>>) -> Option<usize> {
    dims.try_fold(1usize, |n, d| n.checked_mul(d?))
}

/// Output shape of Conv / MaxPool / AveragePool with explicit pads (auto_pad handled for
/// SAME_* and VALID).
pub(super) fn conv_like(node: &Node, x: Option<Shape>, w: Option<Shape>) -> Option<Shape> {
    let x = x?;
    if x.len() < 3 {
        return None;
    }
    let spatial = x.len() - 2;
    let attrs = &node.attrs;
    let channels = if matches!(
        node.op_type.as_str(),
        "Conv" | "FusedConv" | "ConvInteger" | "QLinearConv"
    ) {
        w.as_ref()
            .and_then(|w| w.first().cloned())
            .unwrap_or(Dim::Unknown)
    } else {
        x[1].clone()
    };
    let kernel: Vec<i64> = match attrs.opt_ints("kernel_shape").ok()? {
        Some(k) => k,
        None => w?
            .get(2..)?
            .iter()
            .map(|d| d.fixed().map(|v| v as i64))
            .collect::<Option<Vec<_>>>()?,
    };
    let strides = attrs
        .opt_ints("strides")
        .ok()?
        .unwrap_or_else(|| vec![1; spatial]);
    let dilations = attrs
        .opt_ints("dilations")
        .ok()?
        .unwrap_or_else(|| vec![1; spatial]);
    let pads = attrs
        .opt_ints("pads")
        .ok()?
        .unwrap_or_else(|| vec![0; 2 * spatial]);
    let auto_pad = attrs.string("auto_pad", "NOTSET").ok()?;
    let ceil = attrs.int("ceil_mode", 0).ok()? != 0;
    if kernel.len() != spatial
        || strides.len() != spatial
        || dilations.len() != spatial
        || pads.len() != 2 * spatial
    {
        return None;
    }
    let mut out = vec![x[0].clone(), channels];
    // The attributes come from the model: in i128, no sum or product of them overflows.
    let wide = |v: &[i64]| v.iter().map(|&v| i128::from(v)).collect::<Vec<_>>();
    let (kernel, strides, dilations, pads) =
        (wide(&kernel), wide(&strides), wide(&dilations), wide(&pads));
    for i in 0..spatial {
        let k = (kernel[i] - 1) * dilations[i] + 1;
        let s = strides[i].max(1);
        let d = match x[2 + i].fixed() {
            Some(d) => d as i128,
            None => {
                // A window of stride 1 padded by its extent less one keeps the size.
                let same = match auto_pad.as_str() {
                    "SAME_UPPER" | "SAME_LOWER" => true,
                    "VALID" => k == 1,
                    _ => pads[i] + pads[i + spatial] == k - 1,
                };
                out.push(if s == 1 && same {
                    x[2 + i].clone()
                } else {
                    Dim::Unknown
                });
                continue;
            }
        };
        let n = match auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => (d + s - 1) / s,
            "VALID" => (d - k) / s + 1,
            _ => {
                let span = d + pads[i] + pads[i + spatial] - k;
                let mut n = if ceil {
                    (span + s - 1) / s + 1
                } else {
                    span / s + 1
                };
                // With ceil_mode the last window must start inside the input or its begin pad.
                if ceil && (n - 1) * s >= d + pads[i] {
                    n -= 1;
                }
                n
            }
        };
        out.push(match usize::try_from(n) {
            Ok(n) if n > 0 => Dim::Fixed(n),
            _ => Dim::Unknown,
        });
    }
    Some(out)
}

/// `LSTM`, `GRU` and `RNN`, from `X` and `R`: `Y` is `[seq, directions, batch, hidden]`, the
/// last states (`Y_h`, `Y_c`) are `[directions, batch, hidden]`; with `layout = 1` the batch
/// comes first (`[batch, seq, directions, hidden]`, `[batch, directions, hidden]`).
pub(super) fn recurrent(node: &Node, x: Option<Shape>, r: Option<Shape>) -> Vec<Option<Shape>> {
    let Some(x) = x.filter(|x| x.len() == 3) else {
        return vec![];
    };
    let attrs = &node.attrs;
    let dirs = match attrs.string("direction", "forward").ok().as_deref() {
        Some("bidirectional") => Dim::Fixed(2),
        _ => Dim::Fixed(1),
    };
    let hidden = match attrs.opt_int("hidden_size").ok().flatten() {
        Some(h) => usize::try_from(h).map_or(Dim::Unknown, Dim::Fixed),
        None => r.and_then(|r| r.get(2).cloned()).unwrap_or(Dim::Unknown),
    };
    let (y, state) = if attrs.int("layout", 0).unwrap_or(0) == 1 {
        let (batch, seq) = (x[0].clone(), x[1].clone());
        (
            vec![batch.clone(), seq, dirs.clone(), hidden.clone()],
            vec![batch, dirs, hidden],
        )
    } else {
        let (seq, batch) = (x[0].clone(), x[1].clone());
        (
            vec![seq, dirs.clone(), batch.clone(), hidden.clone()],
            vec![dirs, batch, hidden],
        )
    };
    vec![Some(y), Some(state.clone()), Some(state)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(values: &[i64]) -> Vec<Element> {
        values.iter().map(|&v| Element::Int(v)).collect()
    }

    #[test]
    fn reshape_of_unknown_shape_leaves_minus_one_unknown() {
        // torchvision's anchor generator: Reshape(Range(..) of data-dependent length, [-1, 1]).
        assert_eq!(
            reshape(None, Some(ints(&[-1, 1])), false),
            Some(vec![Dim::Unknown, Dim::Fixed(1)])
        );
        // With the input known, -1 takes the remaining element count: 20 / 1.
        assert_eq!(
            reshape(Some(vec![Dim::Fixed(20)]), Some(ints(&[-1, 1])), false),
            Some(vec![Dim::Fixed(20), Dim::Fixed(1)])
        );
    }

    #[test]
    fn pad_grows_each_padded_axis_by_its_two_pads() {
        let n = Dim::Symbol("n".into());
        let x = Some(vec![n.clone(), Dim::Fixed(3), Dim::Fixed(5), Dim::Fixed(7)]);
        assert_eq!(
            padded(x.clone(), Some(ints(&[0, 0, 1, 0, 0, 0, 1, -2])), None),
            Some(vec![n.clone(), Dim::Fixed(3), Dim::Fixed(7), Dim::Fixed(5)])
        );
        // Opset 18's axes, one negative; a padded symbolic axis becomes unknown.
        assert_eq!(
            padded(x.clone(), Some(ints(&[1, 2, 0, 1])), Some(vec![-1, 0])),
            Some(vec![
                Dim::Unknown,
                Dim::Fixed(3),
                Dim::Fixed(5),
                Dim::Fixed(8)
            ])
        );
        assert_eq!(
            padded(x.clone(), Some(ints(&[1, 1])), None),
            None,
            "pads of another rank"
        );
        // Pads known in part (torchvision's: the channels' known, the height's and width's
        // computed from the image): an axis with an unknown pad becomes unknown.
        let mut pads = ints(&[0, 0, 0, 0, 0, 0, 0, 0]);
        pads[7] = Element::Unknown;
        assert_eq!(
            padded(x.clone(), Some(pads), None),
            Some(vec![n, Dim::Fixed(3), Dim::Fixed(5), Dim::Unknown])
        );
        assert_eq!(padded(x, None, None), None, "pads known only when running");
    }
}
