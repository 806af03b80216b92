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

use super::shape_rules::clamp_index;
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
        (small_count(&shape) == Some(elements.len())).then_some(Partial { shape, elements })
    }

    /// `shape` filled with `value`, when it is small enough to track.
    fn filled(shape: Vec<usize>, value: Element) -> Option<Partial> {
        let n = small_count(&shape)?;
        Partial::new(shape, vec![value; n])
    }
}

/// The element count of `shape` when it is at most [`MAX_ELEMENTS`], and no product of its
/// dimensions overflows (shapes come from the model: `[0, 2^40, 2^40]` holds no element, but
/// the size of its last two axes overflows).
fn small_count(shape: &[usize]) -> Option<usize> {
    shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |n, &d| n.checked_mul(d))?;
    let n = shape.iter().product();
    (n <= MAX_ELEMENTS).then_some(n)
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
        Partial::filled(graph.value(v).fixed_shape()?, Element::Unknown)
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
            let size = dims
                .iter()
                .try_fold(1usize, |n, d| n.checked_mul(d.fixed()?));
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
            Partial::filled(shape, value)
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
            "Div" if a.checked_rem(*b) == Some(0) => checked(a.checked_div(*b), dtype),
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
    let n = small_count(&shape)?;
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

mod rearrange;

pub(super) use rearrange::slice_count;
use rearrange::{concat, gather, reduce, slice, transpose};

#[cfg(test)]
mod tests;
