//! Shape and type inference: fills in what can be known about each node output before
//! running. Dimensions may be symbolic (`batch`), bound when the inputs arrive; anything a rule
//! cannot derive stays unknown, which is always safe (it only limits what constant folding can do).

use spillway_kernels::{DType, Tensor};

use super::known_values::{Element, KnownValues, slice_count};
use super::{Dim, Graph, Node, ValueInfo};

/// Infers dtypes and shapes of node outputs in topological order, and returns the values known
/// before running on the way ([`KnownValues`]). Declared infos are kept where inference knows
/// less.
pub fn infer(graph: &mut Graph) -> KnownValues {
    // Constants made by passes (folded weights) know their type and shape from the tensor.
    for (v, t) in &graph.constants {
        let info = &mut graph.values[v.index()];
        info.dtype = Some(t.dtype());
        info.shape = Some(t.shape().iter().map(|&d| Dim::Fixed(d)).collect());
    }
    let mut values = KnownValues::default();
    for i in 0..graph.nodes.len() {
        if let Some(ty) = super::value_kinds::infer_output_type(graph, &graph.nodes[i]) {
            if let Some(Some(v)) = graph.nodes[i].outputs.first().copied() {
                super::value_kinds::apply(&mut graph.values[v.index()], ty);
            }
            continue;
        }
        let node = &graph.nodes[i];
        let (dtype, shapes) = infer_node(graph, node, &values);
        let outputs = node.outputs.clone();
        for (k, out) in outputs.iter().enumerate() {
            let Some(v) = out else { continue };
            let info = &mut graph.values[v.index()];
            if !info.kind.is_tensor() {
                continue;
            }
            if info.dtype.is_none() && k == 0 {
                info.dtype = dtype;
            }
            if let Some(Some(shape)) = shapes.get(k) {
                let shape = shape
                    .iter()
                    .enumerate()
                    .map(|(axis, d)| match d {
                        Dim::Unknown => Dim::derived(*v, &info.name, axis),
                        d => d.clone(),
                    })
                    .collect();
                update(info, shape);
            }
        }
        // A value computed before running knows its shape where the rules did not.
        if let Some((y, shape)) = values.record(graph, &graph.nodes[i]) {
            update(
                &mut graph.values[y.index()],
                shape.into_iter().map(Dim::Fixed).collect(),
            );
        }
    }
    values
}

/// Takes what `shape` (inferred now) says about `info`'s value where it says more than what
/// `info` holds, dim by dim; a declared shape of another rank is kept.
fn update(info: &mut ValueInfo, shape: Shape) {
    // A fixed dim says more than an input's symbol, that more than a derived one (which a
    // newer one replaces: it follows the graph as the passes left it), that more than nothing.
    let says = |d: &Dim| match d {
        Dim::Fixed(_) => 3,
        Dim::Symbol(_) if d.is_derived() => 1,
        Dim::Symbol(_) => 2,
        Dim::Unknown => 0,
    };
    info.shape = Some(match info.shape.take() {
        None => shape,
        Some(old) if old.len() != shape.len() => old,
        Some(old) => old
            .into_iter()
            .zip(shape)
            .map(|(old, new)| match says(&new).cmp(&says(&old)) {
                std::cmp::Ordering::Greater => new,
                std::cmp::Ordering::Equal if new.is_derived() => new,
                _ => old,
            })
            .collect(),
    });
}

type Shape = Vec<Dim>;

/// Dtype and shapes of `node`'s outputs (`known`: the values before it known before running).
fn infer_node(
    graph: &Graph,
    node: &Node,
    known: &KnownValues,
) -> (Option<DType>, Vec<Option<Shape>>) {
    let input = |i: usize| node.inputs.get(i).copied().flatten();
    let shape_of = |i: usize| input(i).and_then(|v| graph.value(v).shape.clone());
    let dtype_of = |i: usize| input(i).and_then(|v| graph.value(v).dtype);
    let constant = |i: usize| input(i).and_then(|v| graph.constants.get(&v));
    let ints = |i: usize| constant(i).and_then(|t| t.to_i64_vec().ok());
    // An input's elements as far as they are known before running.
    let elements = |i: usize| {
        input(i)
            .and_then(|v| known.get(graph, v))
            .map(|p| p.elements)
    };
    let attrs = &node.attrs;
    let one = |s: Option<Shape>| vec![s];
    let same = (dtype_of(0), one(shape_of(0)));
    if node.domain == spillway_kernels::cpu::nn::blocked::DOMAIN {
        if node.op_type == "Concat" {
            let inputs: Option<Vec<Shape>> = (0..node.inputs.len()).map(shape_of).collect();
            return (
                dtype_of(0),
                one(super::blocked_inference::blocked_concat(node, inputs)),
            );
        }
        return (
            dtype_of(0),
            one(super::blocked_inference::blocked(
                node,
                shape_of(0),
                shape_of(1),
            )),
        );
    }
    match node.op_type.as_str() {
        "Relu"
        | "LeakyRelu"
        | "Sigmoid"
        | "HardSigmoid"
        | "HardSwish"
        | "Tanh"
        | "Clip"
        | "Elu"
        | "Selu"
        | "Softplus"
        | "Sqrt"
        | "Exp"
        | "Log"
        | "Neg"
        | "Abs"
        | "Sign"
        | "Floor"
        | "Ceil"
        | "Round"
        | "Reciprocal"
        | "Erf"
        | "Gelu"
        | "Softmax"
        | "LogSoftmax"
        | "Identity"
        | "Dropout"
        | "LRN"
        | "InstanceNormalization"
        | "LayerNormalization"
        | "CumSum"
        | "Trilu"
        | "PRelu" => same,
        "BatchNormalization" => (dtype_of(0), vec![shape_of(0)]),
        // `RMSNormalization`'s scale broadcasts over its input as a `Mul`'s operand does.
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Mod" | "Max" | "Min" | "Sum" | "Mean"
        | "RMSNormalization" => {
            let shapes: Option<Vec<Shape>> = node
                .inputs
                .iter()
                .map(|v| v.and_then(|v| graph.value(v).shape.clone()))
                .collect();
            (dtype_of(0), one(shapes.and_then(|s| broadcast(&s))))
        }
        "Equal" | "Greater" | "GreaterOrEqual" | "Less" | "LessOrEqual" | "And" | "Or" | "Xor" => {
            let s = match (shape_of(0), shape_of(1)) {
                (Some(a), Some(b)) => broadcast(&[a, b]),
                _ => None,
            };
            (Some(DType::Bool), one(s))
        }
        "Not" => (Some(DType::Bool), one(shape_of(0))),
        "Where" => {
            let s = match (shape_of(0), shape_of(1), shape_of(2)) {
                (Some(a), Some(b), Some(c)) => broadcast(&[a, b, c]),
                _ => None,
            };
            (dtype_of(1), one(s))
        }
        "Shape" => {
            let n = shape_of(0).map(|s| {
                let rank = s.len() as i64;
                let start = clamp_index(attrs.int("start", 0).unwrap_or(0), rank);
                let end = clamp_index(attrs.int("end", rank).unwrap_or(rank), rank);
                (end - start).max(0) as usize
            });
            (Some(DType::I64), one(n.map(|n| vec![Dim::Fixed(n)])))
        }
        "Size" => (Some(DType::I64), one(Some(vec![]))),
        "Cast" => {
            let to = attrs
                .int("to", 0)
                .ok()
                .and_then(|c| DType::from_onnx(c as i32));
            (to, one(shape_of(0)))
        }
        "Conv" | "FusedConv" | "MaxPool" | "AveragePool" => (
            dtype_of(0),
            vec![conv_like(node, shape_of(0), shape_of(1)), None],
        ),
        "GlobalAveragePool" | "GlobalMaxPool" => {
            let s = shape_of(0).map(|s| {
                s.iter()
                    .enumerate()
                    .map(|(i, d)| if i < 2 { d.clone() } else { Dim::Fixed(1) })
                    .collect()
            });
            (dtype_of(0), one(s))
        }
        "Gemm" => {
            let (a, b) = (shape_of(0), shape_of(1));
            let ta = attrs.int("transA", 0).unwrap_or(0) != 0;
            let tb = attrs.int("transB", 0).unwrap_or(0) != 0;
            let s = match (a, b) {
                (Some(a), Some(b)) if a.len() == 2 && b.len() == 2 => Some(vec![
                    a[usize::from(ta)].clone(),
                    b[usize::from(!tb)].clone(),
                ]),
                _ => None,
            };
            (dtype_of(0), one(s))
        }
        "MatMul" | "MatMulBias" => (dtype_of(0), one(matmul(shape_of(0), shape_of(1)))),
        "Flatten" => {
            let s = shape_of(0).and_then(|s| {
                let axis = attrs.int("axis", 1).ok()?;
                let axis = if axis < 0 {
                    axis + s.len() as i64
                } else {
                    axis
                } as usize;
                Some(vec![
                    product(&s[..axis.min(s.len())]),
                    product(&s[axis.min(s.len())..]),
                ])
            });
            (dtype_of(0), one(s))
        }
        "Transpose" => {
            let s = shape_of(0).and_then(|s| {
                let perm = attrs
                    .opt_ints("perm")
                    .ok()?
                    .unwrap_or_else(|| (0..s.len() as i64).rev().collect());
                perm.iter().map(|&p| s.get(p as usize).cloned()).collect()
            });
            (dtype_of(0), one(s))
        }
        "Reshape" => (
            dtype_of(0),
            one(reshape(
                shape_of(0),
                elements(1),
                attrs.int("allowzero", 0).unwrap_or(0) != 0,
            )),
        ),
        "ConstantOfShape" => {
            let dims = elements(0).map(|e| e.iter().map(Element::dim).collect());
            (dtype_only(node, dtype_of), one(dims))
        }
        "Expand" => {
            let target: Option<Shape> = elements(1).map(|e| e.iter().map(Element::dim).collect());
            let s = match (shape_of(0), target) {
                (Some(x), Some(t)) => broadcast(&[x, t]),
                _ => None,
            };
            (dtype_of(0), one(s))
        }
        "Tile" => {
            let s = match (shape_of(0), elements(1)) {
                (Some(x), Some(repeats)) if x.len() == repeats.len() => Some(
                    x.iter()
                        .zip(&repeats)
                        .map(|(d, r)| match (d, r.int()) {
                            (d, Some(1)) => d.clone(),
                            (Dim::Fixed(d), Some(r)) => {
                                usize::try_from(r).map_or(Dim::Unknown, |r| Dim::Fixed(d * r))
                            }
                            _ => Dim::Unknown,
                        })
                        .collect(),
                ),
                _ => None,
            };
            (dtype_of(0), one(s))
        }
        "Unsqueeze" => {
            let axes = if node.opset >= 13 {
                ints(1)
            } else {
                attrs.opt_ints("axes").ok().flatten()
            };
            let s = match (shape_of(0), axes) {
                (Some(s), Some(axes)) => {
                    let rank = (s.len() + axes.len()) as i64;
                    let mut axes: Vec<usize> = axes
                        .iter()
                        .map(|&a| if a < 0 { a + rank } else { a } as usize)
                        .collect();
                    axes.sort_unstable();
                    let mut out = s.clone();
                    for a in axes {
                        if a <= out.len() {
                            out.insert(a, Dim::Fixed(1));
                        }
                    }
                    Some(out)
                }
                _ => None,
            };
            (dtype_of(0), one(s))
        }
        "Concat" => {
            let shapes: Option<Vec<Shape>> = node
                .inputs
                .iter()
                .map(|v| v.and_then(|v| graph.value(v).shape.clone()))
                .collect();
            let s = shapes.and_then(|shapes| {
                let first = shapes.first()?.clone();
                let axis = attrs.int("axis", 0).ok()?;
                let axis = if axis < 0 {
                    axis + first.len() as i64
                } else {
                    axis
                } as usize;
                let mut out = first;
                let total: Option<usize> = shapes
                    .iter()
                    .map(|s| s.get(axis).and_then(Dim::fixed))
                    .sum();
                *out.get_mut(axis)? = total.map_or(Dim::Unknown, Dim::Fixed);
                Some(out)
            });
            (dtype_of(0), one(s))
        }
        "Gather" => {
            let s = match (shape_of(0), shape_of(1)) {
                (Some(data), Some(indices)) => {
                    let rank = data.len() as i64;
                    let axis = attrs
                        .int("axis", 0)
                        .ok()
                        .map(|a| if a < 0 { a + rank } else { a });
                    axis.filter(|a| (0..rank).contains(a)).map(|a| {
                        let a = a as usize;
                        let mut out = data[..a].to_vec();
                        out.extend(indices);
                        out.extend_from_slice(&data[a + 1..]);
                        out
                    })
                }
                _ => None,
            };
            (dtype_of(0), one(s))
        }
        "Slice" => {
            let s = match node.opset {
                ..10 => None,
                _ => shape_of(0).and_then(|x| {
                    let ints = |i: usize| elements(i)?.iter().map(Element::int).collect();
                    let optional = |i: usize| input(i).map(|_| ints(i));
                    sliced(x, ints(1)?, ints(2)?, optional(3), optional(4))
                }),
            };
            (dtype_of(0), one(s))
        }
        "Squeeze" => {
            // Axes given but not known leave the shape unknown; none given squeeze every 1.
            let axes = match node.opset {
                ..13 => attrs.opt_ints("axes").ok(),
                _ if input(1).is_some() => ints(1).map(Some),
                _ => Some(None),
            };
            let s = match (shape_of(0), axes) {
                (Some(x), Some(axes)) => squeezed(x, axes),
                _ => None,
            };
            (dtype_of(0), one(s))
        }
        "ReduceMax" | "ReduceMin" | "ReduceMean" | "ReduceSum" | "ReduceProd" | "ReduceL1"
        | "ReduceL2" | "ReduceLogSumExp" | "ReduceSumSquare" | "ArgMax" | "ArgMin" => {
            let arg = node.op_type.starts_with("Arg");
            // `axes` moved to an input in opset 13 for `ReduceSum`, in 18 for the others.
            let axes = if arg {
                Some(Some(vec![attrs.int("axis", 0).unwrap_or(0)]))
            } else if input(1).is_some() {
                ints(1).map(Some)
            } else {
                attrs.opt_ints("axes").ok()
            };
            let keep = attrs.int("keepdims", 1).unwrap_or(1) != 0;
            let noop = !arg && attrs.int("noop_with_empty_axes", 0).unwrap_or(0) != 0;
            let s = match (shape_of(0), axes) {
                (Some(x), Some(axes)) => reduced(x, axes, keep, noop),
                _ => None,
            };
            let dtype = if arg { Some(DType::I64) } else { dtype_of(0) };
            (dtype, one(s))
        }
        "Resize" => (
            dtype_of(0),
            one(super::resize_shape::resize_shape(graph, node, known)),
        ),
        "Pad" => {
            // Opset 11+ takes the pads as an input, earlier ones as an attribute.
            let pads = match node.opset {
                ..11 => attrs
                    .opt_ints("pads")
                    .ok()
                    .flatten()
                    .map(|p| p.into_iter().map(Element::Int).collect()),
                _ => elements(1),
            };
            (dtype_of(0), one(padded(shape_of(0), pads, ints(3))))
        }
        "Constant" => {
            let t = attrs.opt_tensor("value").ok().flatten();
            (
                t.map(Tensor::dtype),
                one(t.map(|t| t.shape().iter().map(|&d| Dim::Fixed(d)).collect())),
            )
        }
        _ => (dtype_only(node, dtype_of), vec![]),
    }
}

/// The first output's dtype of ops whose shape rule is not written (or not knowable before
/// running), where the ONNX definition fixes the dtype: the input's for ops that move, pick
/// or interpolate elements, `int64` for ops that return indices.
fn dtype_only(node: &Node, dtype_of: impl Fn(usize) -> Option<DType>) -> Option<DType> {
    match node.op_type.as_str() {
        "Upsample" | "Pad" | "Slice" | "GatherElements" | "GatherND" | "Squeeze" | "Expand"
        | "Tile" | "Split" | "TopK" | "RoiAlign" | "ScatterElements" | "ScatterND" | "Scatter"
        | "DepthToSpace" | "SpaceToDepth" | "ReduceMax" | "ReduceMin" | "ReduceMean"
        | "ReduceSum" | "ReduceProd" | "ReduceL1" | "ReduceL2" | "ReduceLogSumExp"
        | "ReduceSumSquare" | "ConvTranspose" | "LpNormalization" | "Range" | "ReverseSequence"
        | "Compress" => dtype_of(0),
        "NonZero" | "NonMaxSuppression" | "ArgMax" | "ArgMin" => Some(DType::I64),
        "ConstantOfShape" => match node.attrs.opt_tensor("value") {
            Ok(Some(t)) => Some(t.dtype()),
            Ok(None) => Some(DType::F32),
            Err(_) => None,
        },
        _ => None,
    }
}

/// `Pad`'s output (`pads` as far as known, and `axes` from opset 18, known before running): each
/// padded axis grows by its two pads; an axis of unknown or symbolic size stays so only when
/// unpadded, and one whose pads are not known becomes unknown.
fn padded(
    input: Option<Shape>,
    pads: Option<Vec<Element>>,
    axes: Option<Vec<i64>>,
) -> Option<Shape> {
    let mut out = input?;
    let pads = pads?;
    let rank = out.len() as i64;
    let axes: Vec<i64> = axes.unwrap_or_else(|| (0..rank).collect());
    if pads.len() != 2 * axes.len() {
        return None;
    }
    for (i, &axis) in axes.iter().enumerate() {
        let axis = if axis < 0 { axis + rank } else { axis };
        let dim = out.get_mut(usize::try_from(axis).ok()?)?;
        let grow = match (pads[i].int(), pads[i + axes.len()].int()) {
            (Some(begin), Some(end)) => begin + end,
            _ => {
                *dim = Dim::Unknown;
                continue;
            }
        };
        if grow == 0 {
            continue;
        }
        *dim = match dim.fixed() {
            Some(d) => Dim::Fixed(usize::try_from(d as i64 + grow).ok()?),
            None => Dim::Unknown,
        };
    }
    Some(out)
}

/// `Slice`'s output for constant `starts`, `ends` and (if given) `axes` and `steps`: a sliced
/// axis of fixed size gets its count, one of other size stays only when sliced whole.
fn sliced(
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
    let rank = x.len() as i64;
    for k in 0..starts.len() {
        let axis = if axes[k] < 0 { axes[k] + rank } else { axes[k] };
        let dim = x.get_mut(usize::try_from(axis).ok()?)?;
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
fn squeezed(x: Shape, axes: Option<Vec<i64>>) -> Option<Shape> {
    let rank = x.len() as i64;
    let drop: Vec<usize> = match axes {
        Some(axes) => axes
            .iter()
            .map(|&a| usize::try_from(if a < 0 { a + rank } else { a }).ok())
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
fn reduced(x: Shape, axes: Option<Vec<i64>>, keep: bool, noop: bool) -> Option<Shape> {
    let rank = x.len() as i64;
    let axes: Vec<usize> = match axes {
        Some(a) if a.is_empty() && noop => return Some(x),
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|&a| usize::try_from(if a < 0 { a + rank } else { a }).ok())
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

fn product(dims: &[Dim]) -> Dim {
    if let [single] = dims {
        return single.clone();
    }
    dims.iter()
        .map(Dim::fixed)
        .product::<Option<usize>>()
        .map_or(Dim::Unknown, Dim::Fixed)
}

/// Multidirectional broadcasting of known ranks.
fn broadcast(shapes: &[Shape]) -> Option<Shape> {
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

fn matmul(a: Option<Shape>, b: Option<Shape>) -> Option<Shape> {
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
fn reshape(input: Option<Shape>, target: Option<Vec<Element>>, allow_zero: bool) -> Option<Shape> {
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
            .then(|| input.iter().map(Dim::fixed).product::<Option<usize>>())
            .flatten();
        let rest = out
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != pos)
            .map(|(_, d)| d.fixed())
            .product::<Option<usize>>();
        if let (Some(total), Some(rest)) = (total, rest)
            && rest > 0
            && total % rest == 0
        {
            out[pos] = Dim::Fixed(total / rest);
        }
    }
    Some(out)
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
    let channels = if matches!(node.op_type.as_str(), "Conv" | "FusedConv") {
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
    for i in 0..spatial {
        let k = (kernel[i] - 1) * dilations[i] + 1;
        let s = strides[i].max(1);
        let d = match x[2 + i].fixed() {
            Some(d) => d as i64,
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
        out.push(if n > 0 {
            Dim::Fixed(n as usize)
        } else {
            Dim::Unknown
        });
    }
    Some(out)
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
