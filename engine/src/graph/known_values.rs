//! Values known before running, element by element. Exporters compute shapes, pads and sizes
//! at run time from `Shape`s: torchvision's detection transform pads each image to a multiple
//! of 32 with pads made by `Shape`, `Gather`, `Sub`, `Concat`, `Reshape`, a reversing `Slice`
//! and `Transpose`. Where the image's channels are known and its height and width are not,
//! the channel entries of that computation are known and the others are not; shape inference
//! reads them to keep the dims they fix (`Pad`, `Reshape`, `Resize`, `ConstantOfShape`,
//! `Expand`, `Tile`), and constant folding folds the values known whole.
//!
//! Only small values are tracked ([`MAX_ELEMENTS`]). A float is tracked only while it holds an
//! integer (`Cast` to float and back, `ReduceMax` of a float copy); an operation whose result
//! would not be exact in the value's type gives an unknown element.

use std::collections::HashMap;

use spillway_kernels::{DType, Tensor};

use super::shape_inference::clamp_index;
use super::{Dim, Graph, Node, ValueId};

/// One element of a value, as far as it is known before running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Element {
    /// This integer.
    Int(i64),
    /// A symbolic size of the graph's inputs (`batch`): one size wherever it appears.
    Symbol(String),
    /// Not known before running.
    Unknown,
}

impl Element {
    /// The integer, if known.
    pub fn int(&self) -> Option<i64> {
        match self {
            Element::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// As a dimension: a non-negative integer is fixed, a symbol stays one.
    pub fn dim(&self) -> Dim {
        match self {
            Element::Int(v) => usize::try_from(*v).map_or(Dim::Unknown, Dim::Fixed),
            Element::Symbol(s) => Dim::Symbol(s.clone()),
            Element::Unknown => Dim::Unknown,
        }
    }

    fn of_dim(d: &Dim) -> Element {
        match d {
            Dim::Fixed(n) => Element::Int(*n as i64),
            Dim::Symbol(s) => Element::Symbol(s.clone()),
            Dim::Unknown => Element::Unknown,
        }
    }
}

/// A value of known shape and its elements in row-major order, each known or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Partial {
    /// The value's shape.
    pub shape: Vec<usize>,
    /// Its elements.
    pub elements: Vec<Element>,
}

impl Partial {
    /// Every element's integer, when all are known.
    pub fn ints(&self) -> Option<Vec<i64>> {
        self.elements.iter().map(Element::int).collect()
    }

    fn new(shape: Vec<usize>, elements: Vec<Element>) -> Option<Partial> {
        (elements.len() == shape.iter().product::<usize>() && elements.len() <= MAX_ELEMENTS)
            .then_some(Partial { shape, elements })
    }
}

/// Values with more elements than this are not tracked: shapes, pads and sizes are short.
pub const MAX_ELEMENTS: usize = 64;

/// The partial values of a graph, filled in node order by shape inference.
#[derive(Debug, Default)]
pub struct KnownValues(HashMap<ValueId, Partial>);

impl KnownValues {
    /// `v`'s partial value: computed, constant, or all unknown where only its (small, fixed)
    /// shape is known; `None` when not even that is.
    pub fn get(&self, graph: &Graph, v: ValueId) -> Option<Partial> {
        if let Some(p) = self.0.get(&v) {
            return Some(p.clone());
        }
        if let Some(t) = graph.constants.get(&v) {
            return of_tensor(t);
        }
        let shape = graph.value(v).fixed_shape()?;
        let n = shape.iter().product();
        Partial::new(shape, vec![Element::Unknown; n])
    }

    /// Computes and keeps the partial value of `node`'s first output, once its inputs' are
    /// kept and its outputs' shapes inferred; returns that output and its shape, if computed.
    pub(super) fn record(&mut self, graph: &Graph, node: &Node) -> Option<(ValueId, Vec<usize>)> {
        let y = node.outputs.first().copied().flatten()?;
        let p = evaluate(self, graph, node, y)?;
        let shape = p.shape.clone();
        self.0.insert(y, p);
        Some((y, shape))
    }
}

/// A constant's elements (floats that are not integers unknown).
fn of_tensor(t: &Tensor) -> Option<Partial> {
    if t.len() > MAX_ELEMENTS {
        return None;
    }
    let elements = if t.dtype().is_int() {
        t.to_i64_vec().ok()?.into_iter().map(Element::Int).collect()
    } else {
        let values = match t {
            Tensor::Bool(a) => a.iter().map(|&b| f64::from(u8::from(b))).collect(),
            t => t.to_f64_vec().ok()?,
        };
        values.into_iter().map(integral).collect()
    };
    Partial::new(t.shape().to_vec(), elements)
}

/// `v` as an integer element when it is one, exactly.
fn integral(v: f64) -> Element {
    if v.fract() == 0.0 && v.abs() <= (1u64 << 53) as f64 {
        Element::Int(v as i64)
    } else {
        Element::Unknown
    }
}

/// True when `dtype` holds `v` exactly.
fn fits(dtype: DType, v: i64) -> bool {
    let within = |bits: u32| v.unsigned_abs() <= 1u64 << bits;
    match dtype {
        DType::I64 => true,
        DType::I32 => i32::try_from(v).is_ok(),
        DType::I16 => i16::try_from(v).is_ok(),
        DType::I8 => i8::try_from(v).is_ok(),
        DType::U64 => v >= 0,
        DType::U32 => u32::try_from(v).is_ok(),
        DType::U16 => u16::try_from(v).is_ok(),
        DType::U8 => u8::try_from(v).is_ok(),
        DType::Bool => v == 0 || v == 1,
        DType::F64 => within(53),
        DType::F32 => within(24),
        DType::F16 => within(11),
        DType::BF16 => within(8),
        _ => false,
    }
}

/// The partial value of `node`'s output `y`.
fn evaluate(known: &KnownValues, graph: &Graph, node: &Node, y: ValueId) -> Option<Partial> {
    if !(node.domain.is_empty() || node.domain == "ai.onnx") {
        return None;
    }
    let input = |i: usize| known.get(graph, node.inputs.get(i).copied().flatten()?);
    let ints = |i: usize| input(i)?.ints();
    let out_dtype = graph.value(y).dtype?;
    let attrs = &node.attrs;
    // What moves elements without changing them gets its shape from shape inference.
    let reshaped = |elements: Vec<Element>| Partial::new(graph.value(y).fixed_shape()?, elements);
    match node.op_type.as_str() {
        "Shape" => {
            let dims = graph
                .value(node.inputs.first().copied().flatten()?)
                .shape
                .clone()?;
            let rank = dims.len() as i64;
            let start = clamp_index(attrs.int("start", 0).ok()?, rank) as usize;
            let end = clamp_index(attrs.int("end", rank).ok()?, rank) as usize;
            let dims = &dims[start..end.max(start)];
            Partial::new(vec![dims.len()], dims.iter().map(Element::of_dim).collect())
        }
        "Size" => {
            let dims = graph
                .value(node.inputs.first().copied().flatten()?)
                .shape
                .clone()?;
            let size = dims.iter().map(Dim::fixed).product::<Option<usize>>();
            Partial::new(
                vec![],
                vec![size.map_or(Element::Unknown, |n| Element::Int(n as i64))],
            )
        }
        "Identity" | "Unsqueeze" | "Squeeze" | "Flatten" | "Reshape" => {
            reshaped(input(0)?.elements)
        }
        "Cast" => {
            let to = DType::from_onnx(attrs.int("to", 0).ok()? as i32)?;
            let elements = input(0)?
                .elements
                .into_iter()
                .map(|e| cast(e, to))
                .collect();
            reshaped(elements)
        }
        "Expand" => {
            let x = input(0)?;
            let shape = graph.value(y).fixed_shape()?;
            elementwise(&[&x], shape, |e| e[0].clone())
        }
        "Concat" => concat(node, &node_inputs(known, graph, node)?),
        "Gather" => gather(node, input(0)?, input(1)?),
        "Slice" => slice(node, input(0)?, ints),
        "Transpose" => transpose(node, input(0)?),
        "ReduceMax" | "ReduceMin" | "ReduceSum" | "ReduceProd" => {
            let axes = match node.inputs.get(1).copied().flatten() {
                Some(_) => Some(ints(1)?),
                None => attrs.opt_ints("axes").ok()?,
            };
            reduce(node, input(0)?, axes, out_dtype)
        }
        "ConstantOfShape" => {
            let shape: Option<Vec<usize>> = ints(0)?
                .into_iter()
                .map(|d| usize::try_from(d).ok())
                .collect();
            let shape = shape?;
            let value = match attrs.opt_tensor("value").ok()? {
                Some(t) => of_tensor(t)?.elements.first()?.clone(),
                None => Element::Int(0),
            };
            let n = shape.iter().product();
            Partial::new(shape, vec![value; n])
        }
        "Range" => {
            let (start, limit, delta) =
                (scalar(input(0)?)?, scalar(input(1)?)?, scalar(input(2)?)?);
            let span = limit.checked_sub(start).filter(|_| delta != 0)?;
            // ⌈span / delta⌉ elements, none when the signs differ.
            let n = span / delta + i64::from(span % delta != 0);
            let n = usize::try_from(n.max(0))
                .ok()
                .filter(|&n| n <= MAX_ELEMENTS)?;
            let elements = (0..n as i64)
                .map(|i| Element::Int(start + i * delta))
                .collect();
            Partial::new(vec![n], elements)
        }
        "Neg" | "Abs" | "Ceil" | "Floor" | "Round" | "Not" => {
            let x = input(0)?;
            let op = node.op_type.as_str();
            let shape = x.shape.clone();
            elementwise(&[&x], shape, |e| match (&e[0], op) {
                (Element::Int(v), "Neg") => checked(v.checked_neg(), out_dtype),
                (Element::Int(v), "Abs") => checked(v.checked_abs(), out_dtype),
                (Element::Int(v), "Not") => Element::Int(1 - v),
                (e, "Ceil" | "Floor" | "Round") => e.clone(),
                _ => Element::Unknown,
            })
        }
        "Add" | "Sub" | "Mul" | "Div" | "Max" | "Min" | "Equal" | "Less" | "Greater" | "Where" => {
            let inputs = node_inputs(known, graph, node)?;
            let refs: Vec<&Partial> = inputs.iter().collect();
            let shape = broadcast_shape(&refs)?;
            let op = node.op_type.as_str();
            elementwise(&refs, shape, |e| arithmetic(op, e, out_dtype))
        }
        _ => None,
    }
}

/// Each input's partial value, all present.
fn node_inputs(known: &KnownValues, graph: &Graph, node: &Node) -> Option<Vec<Partial>> {
    node.inputs
        .iter()
        .map(|v| known.get(graph, (*v)?))
        .collect()
}

/// A one-element value's integer.
fn scalar(p: Partial) -> Option<i64> {
    match &p.elements[..] {
        [e] => e.int(),
        _ => None,
    }
}

fn checked(v: Option<i64>, dtype: DType) -> Element {
    v.filter(|&v| fits(dtype, v))
        .map_or(Element::Unknown, Element::Int)
}

/// `Cast` of one element to `to` (symbols only to the integer types that hold any size).
fn cast(e: Element, to: DType) -> Element {
    match e {
        Element::Int(v) if to == DType::Bool => Element::Int(i64::from(v != 0)),
        Element::Int(v) if fits(to, v) => Element::Int(v),
        Element::Symbol(s) if matches!(to, DType::I64 | DType::I32) => Element::Symbol(s),
        _ => Element::Unknown,
    }
}

/// One element of a binary (or `Where`'s ternary) op, in type `dtype`.
fn arithmetic(op: &str, e: &[Element], dtype: DType) -> Element {
    use Element::{Int, Symbol};
    let flag = |b: bool| Int(i64::from(b));
    match (op, e) {
        ("Where", [Int(c), a, b]) => (if *c != 0 { a } else { b }).clone(),
        (_, [Int(a), Int(b)]) => match op {
            "Add" => checked(a.checked_add(*b), dtype),
            "Sub" => checked(a.checked_sub(*b), dtype),
            "Mul" => checked(a.checked_mul(*b), dtype),
            // Only exact quotients: integer and float division agree on those.
            "Div" if *b != 0 && a % b == 0 => checked(a.checked_div(*b), dtype),
            "Max" => Int(*a.max(b)),
            "Min" => Int(*a.min(b)),
            "Equal" => flag(a == b),
            "Less" => flag(a < b),
            "Greater" => flag(a > b),
            _ => Element::Unknown,
        },
        // A symbol is one size: it equals itself, and 0 and 1 leave it as it is.
        ("Sub", [Symbol(a), Symbol(b)]) if a == b => Int(0),
        ("Equal", [Symbol(a), Symbol(b)]) if a == b => Int(1),
        ("Max" | "Min", [Symbol(a), Symbol(b)]) if a == b => Symbol(a.clone()),
        ("Add" | "Sub", [s @ Symbol(_), Int(0)])
        | ("Add", [Int(0), s @ Symbol(_)])
        | ("Mul" | "Div", [s @ Symbol(_), Int(1)])
        | ("Mul", [Int(1), s @ Symbol(_)]) => s.clone(),
        _ => Element::Unknown,
    }
}

/// The shape `inputs` broadcast to (multidirectional broadcasting).
fn broadcast_shape(inputs: &[&Partial]) -> Option<Vec<usize>> {
    let rank = inputs.iter().map(|p| p.shape.len()).max()?;
    let mut out = vec![1; rank];
    for p in inputs {
        for (o, &d) in out[rank - p.shape.len()..].iter_mut().zip(&p.shape) {
            match (*o, d) {
                (1, d) => *o = d,
                (_, 1) => {}
                (a, d) if a == d => {}
                _ => return None,
            }
        }
    }
    Some(out)
}

/// `f` of the elements of `inputs` broadcast to `shape`.
fn elementwise(
    inputs: &[&Partial],
    shape: Vec<usize>,
    f: impl Fn(&[Element]) -> Element,
) -> Option<Partial> {
    let n: usize = shape.iter().product();
    if n > MAX_ELEMENTS {
        return None;
    }
    let elements = (0..n)
        .map(|i| {
            let args: Vec<Element> = inputs
                .iter()
                .map(|p| p.elements[broadcast_index(i, &shape, &p.shape)].clone())
                .collect();
            f(&args)
        })
        .collect();
    Partial::new(shape, elements)
}

/// The element of a value of shape `from` that broadcasting puts at flat index `at` of `to`.
fn broadcast_index(at: usize, to: &[usize], from: &[usize]) -> usize {
    let (mut rest, mut index, mut stride) = (at, 0, 1);
    for k in (0..to.len()).rev() {
        let coord = rest % to[k];
        rest /= to[k];
        if let Some(j) = (k + from.len()).checked_sub(to.len()) {
            if from[j] != 1 {
                index += coord * stride;
            }
            stride *= from[j];
        }
    }
    index
}

/// `axis` of a rank-`rank` value, negative counting from the end.
fn axis_of(axis: i64, rank: usize) -> Option<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    usize::try_from(a).ok().filter(|&a| a < rank)
}

fn concat(node: &Node, inputs: &[Partial]) -> Option<Partial> {
    let first = inputs.first()?;
    let axis = axis_of(node.attrs.int("axis", 0).ok()?, first.shape.len())?;
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

fn gather(node: &Node, data: Partial, indices: Partial) -> Option<Partial> {
    let axis = axis_of(node.attrs.int("axis", 0).ok()?, data.shape.len())?;
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
fn slice(node: &Node, data: Partial, ints: impl Fn(usize) -> Option<Vec<i64>>) -> Option<Partial> {
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
        let axis = axis_of(axes[k], rank)?;
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
fn slice_start(start: i64, step: i64, dim: i64) -> i64 {
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
pub(super) fn slice_count(start: i64, end: i64, step: i64, dim: usize) -> Option<usize> {
    let dim = i64::try_from(dim).ok()?;
    let first = slice_start(start, step, dim);
    let end = if end < 0 {
        end.saturating_add(dim)
    } else {
        end
    };
    let count = match step {
        0 => return None,
        _ if dim == 0 => 0,
        s if s > 0 => (end.clamp(0, dim) - first + s - 1) / s,
        s => (first - end.clamp(-1, dim - 1) - s - 1) / -s,
    };
    usize::try_from(count.max(0)).ok()
}

fn transpose(node: &Node, x: Partial) -> Option<Partial> {
    let rank = x.shape.len();
    let perm = node
        .attrs
        .opt_ints("perm")
        .ok()?
        .unwrap_or_else(|| (0..rank as i64).rev().collect());
    let perm: Option<Vec<usize>> = perm.iter().map(|&p| axis_of(p, rank)).collect();
    let perm = perm.filter(|p| p.len() == rank)?;
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
fn reduce(node: &Node, x: Partial, axes: Option<Vec<i64>>, dtype: DType) -> Option<Partial> {
    let rank = x.shape.len();
    let keep = node.attrs.int("keepdims", 1).ok()? != 0;
    let noop = node.attrs.int("noop_with_empty_axes", 0).ok()? != 0;
    let axes: Vec<usize> = match axes {
        Some(a) if a.is_empty() && noop => return Some(x),
        Some(a) if !a.is_empty() => a.iter().map(|&a| axis_of(a, rank)).collect::<Option<_>>()?,
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

#[cfg(test)]
mod tests;
