//! The ops that pick and rearrange the elements of values known before running: `Concat`,
//! `Gather`, `Slice`, `Transpose` and the reductions, on row-major element lists.

use spillway_kernels::DType;

use super::super::shape_rules::axis_index;
use super::{Element, Partial, arithmetic};
use crate::graph::Node;

pub(super) fn concat(node: &Node, inputs: &[Partial]) -> Option<Partial> {
    let first = inputs.first()?;
    let axis = axis_index(node.attrs.int("axis", 0).ok()?, first.shape.len())?;
    let outer: usize = first.shape[..axis].iter().product();
    let mut shape = first.shape.clone();
    shape[axis] = 0;
    for p in inputs {
        let same = p.shape.len() == shape.len()
            && (0..shape.len()).all(|k| k == axis || p.shape[k] == shape[k]);
        if !same {
            return None;
        }
        shape[axis] += p.shape[axis];
    }
    let mut elements = Vec::new();
    for o in 0..outer {
        for p in inputs {
            let run = p.elements.len() / outer.max(1);
            elements.extend_from_slice(&p.elements[o * run..(o + 1) * run]);
        }
    }
    Partial::new(shape, elements)
}

pub(super) fn gather(node: &Node, data: Partial, indices: Partial) -> Option<Partial> {
    let axis = axis_index(node.attrs.int("axis", 0).ok()?, data.shape.len())?;
    let dim = data.shape[axis];
    let picked: Option<Vec<usize>> = indices
        .ints()?
        .into_iter()
        .map(|i| {
            usize::try_from(if i < 0 { i + dim as i64 } else { i })
                .ok()
                .filter(|&i| i < dim)
        })
        .collect();
    let picked = picked?;
    let outer: usize = data.shape[..axis].iter().product();
    let inner: usize = data.shape[axis + 1..].iter().product();
    let mut elements = Vec::new();
    for o in 0..outer {
        for &i in &picked {
            let at = (o * dim + i) * inner;
            elements.extend_from_slice(&data.elements[at..at + inner]);
        }
    }
    let mut shape = data.shape[..axis].to_vec();
    shape.extend(&indices.shape);
    shape.extend(&data.shape[axis + 1..]);
    Partial::new(shape, elements)
}

/// `Slice` (opset 10's inputs, or opset 1's attributes) of any rank and steps of any sign.
pub(super) fn slice(
    node: &Node,
    data: Partial,
    ints: impl Fn(usize) -> Option<Vec<i64>>,
) -> Option<Partial> {
    let present = |i: usize| node.inputs.get(i).copied().flatten().is_some();
    let attr = |name: &str| node.attrs.opt_ints(name).ok().flatten();
    let (starts, ends, axes, steps) = if node.opset < 10 {
        (attr("starts")?, attr("ends")?, attr("axes"), None)
    } else {
        let optional = |i: usize| {
            if present(i) {
                ints(i).map(Some)
            } else {
                Some(None)
            }
        };
        (ints(1)?, ints(2)?, optional(3)?, optional(4)?)
    };
    let rank = data.shape.len();
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return None;
    }
    let mut picks: Vec<Vec<usize>> = data.shape.iter().map(|&d| (0..d).collect()).collect();
    for k in 0..starts.len() {
        let axis = axis_index(axes[k], rank)?;
        let (dim, step) = (data.shape[axis] as i64, steps[k]);
        let first = slice_start(starts[k], step, dim);
        let count = slice_count(starts[k], ends[k], step, dim as usize)?;
        picks[axis] = (0..count as i64)
            .map(|i| (first + i * step) as usize)
            .collect();
    }
    let shape: Vec<usize> = picks.iter().map(Vec::len).collect();
    let elements = (0..shape.iter().product())
        .map(|at| {
            let (mut rest, mut index, mut stride) = (at, 0, 1);
            for k in (0..rank).rev() {
                index += picks[k][rest % shape[k]] * stride;
                rest /= shape[k];
                stride *= data.shape[k];
            }
            data.elements[index].clone()
        })
        .collect();
    Partial::new(shape, elements)
}

/// The first index a `Slice` of an axis of size `dim` takes (when it takes any).
pub(super) fn slice_start(start: i64, step: i64, dim: i64) -> i64 {
    let start = if start < 0 {
        start.saturating_add(dim)
    } else {
        start
    };
    if step > 0 {
        start.clamp(0, dim)
    } else {
        start.clamp(0, (dim - 1).max(0))
    }
}

/// How many indices a `Slice` from `start` to `end` by `step` takes of an axis of size `dim`
/// (negative bounds count from the end; `None` for a zero step).
pub(in crate::graph) fn slice_count(start: i64, end: i64, step: i64, dim: usize) -> Option<usize> {
    let dim = i64::try_from(dim).ok()?;
    let first = slice_start(start, step, dim);
    let end = if end < 0 {
        end.saturating_add(dim)
    } else {
        end
    };
    // In i128: a step near i64's limits overflows the rounding-up in i64.
    let (first, dim, s) = (i128::from(first), i128::from(dim), i128::from(step));
    let end = i128::from(end);
    let count = match s {
        0 => return None,
        _ if dim == 0 => 0,
        s if s > 0 => (end.clamp(0, dim) - first + s - 1) / s,
        s => (first - end.clamp(-1, dim - 1) - s - 1) / -s,
    };
    usize::try_from(count.max(0)).ok()
}

pub(super) fn transpose(node: &Node, x: Partial) -> Option<Partial> {
    let rank = x.shape.len();
    let perm = node
        .attrs
        .opt_ints("perm")
        .ok()?
        .unwrap_or_else(|| (0..rank as i64).rev().collect());
    let perm = spillway_kernels::cpu::shape::transpose::check_perm(&perm, rank).ok()?;
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
    let mut strides = vec![1; rank];
    for k in (0..rank.saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * x.shape[k + 1];
    }
    let elements = (0..x.elements.len())
        .map(|at| {
            let (mut rest, mut index) = (at, 0);
            for k in (0..rank).rev() {
                index += (rest % shape[k]) * strides[perm[k]];
                rest /= shape[k];
            }
            x.elements[index].clone()
        })
        .collect();
    Partial::new(shape, elements)
}

/// `ReduceMax`, `ReduceMin`, `ReduceSum` or `ReduceProd` over `axes` (all when `None`).
pub(super) fn reduce(
    node: &Node,
    x: Partial,
    axes: Option<Vec<i64>>,
    dtype: DType,
) -> Option<Partial> {
    let rank = x.shape.len();
    let keep = node.attrs.int("keepdims", 1).ok()? != 0;
    let noop = node.attrs.int("noop_with_empty_axes", 0).ok()? != 0;
    let axes: Vec<usize> = match axes {
        Some(a) if a.is_empty() && noop => return Some(x),
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|&a| axis_index(a, rank))
            .collect::<Option<_>>()?,
        _ => (0..rank).collect(),
    };
    let kept: Vec<usize> = (0..rank)
        .map(|k| if axes.contains(&k) { 1 } else { x.shape[k] })
        .collect();
    let mut groups: Vec<Vec<&Element>> = vec![Vec::new(); kept.iter().product()];
    for (at, e) in x.elements.iter().enumerate() {
        let (mut rest, mut index, mut stride) = (at, 0, 1);
        for k in (0..rank).rev() {
            index += (rest % x.shape[k]) % kept[k] * stride;
            rest /= x.shape[k];
            stride *= kept[k];
        }
        groups[index].push(e);
    }
    let combine = match node.op_type.as_str() {
        "ReduceMax" => "Max",
        "ReduceMin" => "Min",
        "ReduceSum" => "Add",
        _ => "Mul",
    };
    let elements = groups
        .into_iter()
        .map(|group| {
            let (first, rest) = group.split_first()?;
            rest.iter().try_fold((*first).clone(), |acc, e| {
                match arithmetic(combine, &[acc, (*e).clone()], dtype) {
                    Element::Unknown => None,
                    e => Some(e),
                }
            })
        })
        .map(|e| e.unwrap_or(Element::Unknown))
        .collect();
    let shape = if keep {
        kept
    } else {
        (0..rank)
            .filter(|k| !axes.contains(k))
            .map(|k| x.shape[k])
            .collect()
    };
    Partial::new(shape, elements)
}
