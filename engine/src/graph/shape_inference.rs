//! Shape and type inference: fills in what can be known about each node output before
//! running. Dimensions may be symbolic (`batch`), bound when the inputs arrive; anything a rule
//! cannot derive stays unknown, which is always safe (it only limits what constant folding can do).

use spillway_kernels::{DType, Tensor};

use super::known_values::{Element, KnownValues};
use super::shape_rules::{
    Shape, broadcast, clamp_index, conv_like, matmul, padded, product, recurrent, reduced, reshape,
    resize_shape, sliced, squeezed,
};
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

/// Dtype and shapes of `node`'s outputs (`known`: the values before it known before running).
fn infer_node(
    graph: &Graph,
    node: &Node,
    known: &KnownValues,
) -> (Option<DType>, Vec<Option<Shape>>) {
    let input = |i: usize| node.inputs.get(i).copied().flatten();
    let shape_of = |i: usize| input(i).and_then(|v| graph.value(v).shape.clone());
    let dtype_of = |i: usize| input(i).and_then(|v| graph.value(v).dtype);
    // An input's elements as far as they are known before running, and its integers when
    // all are known.
    let elements = |i: usize| {
        input(i)
            .and_then(|v| known.get(graph, v))
            .map(|p| p.elements)
    };
    let ints = |i: usize| -> Option<Vec<i64>> { elements(i)?.iter().map(Element::int).collect() };
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
        | "CumProd"
        | "Trilu"
        | "Celu"
        | "Softsign"
        | "Cos"
        | "Sin"
        | "Tan"
        | "Acos"
        | "Asin"
        | "Atan"
        | "Cosh"
        | "Sinh"
        | "Acosh"
        | "Asinh"
        | "Atanh"
        | "ThresholdedRelu"
        | "Shrink"
        | "Mish"
        | "Swish"
        | "Hardmax"
        | "LpNormalization"
        | "BitwiseNot"
        | "GroupNormalization"
        | "RotaryEmbedding"
        | "MeanVarianceNormalization"
        | "ReverseSequence"
        | "TensorScatter" => same,
        "BitCast" => {
            let to = attrs
                .int("to", 0)
                .ok()
                .and_then(|c| DType::from_onnx(c as i32));
            (to, one(shape_of(0)))
        }
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => {
            let loss = match attrs.string("reduction", "mean").as_deref() {
                Ok("none") => shape_of(1),
                Ok(_) => Some(vec![]),
                Err(_) => None,
            };
            (dtype_of(0), vec![loss, shape_of(0)])
        }
        "Attention" => {
            let (q, v) = (shape_of(0), shape_of(2));
            // Y keeps Q's layout with V's head size; the 3-D form only when its width is known.
            let y = match (&q, &v) {
                (Some(q), Some(v)) if q.len() == 4 && v.len() == 4 => {
                    Some(vec![q[0].clone(), q[1].clone(), q[2].clone(), v[3].clone()])
                }
                (Some(q), Some(v)) if q.len() == 3 && v.len() == 3 => {
                    let heads = (
                        attrs.opt_int("q_num_heads").ok().flatten(),
                        attrs.opt_int("kv_num_heads").ok().flatten(),
                    );
                    let width = match (heads, v[2].fixed()) {
                        ((Some(hq), Some(hkv)), Some(hidden))
                            if hkv > 0 && hidden % hkv as usize == 0 =>
                        {
                            Dim::Fixed(hidden / hkv as usize * hq as usize)
                        }
                        _ => Dim::Unknown,
                    };
                    Some(vec![q[0].clone(), q[1].clone(), width])
                }
                _ => None,
            };
            (dtype_of(0), vec![y])
        }
        "IsInf" | "IsNaN" => (Some(DType::Bool), one(shape_of(0))),
        "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "BitShift" => {
            let s = match (shape_of(0), shape_of(1)) {
                (Some(a), Some(b)) => broadcast(&[a, b]),
                _ => None,
            };
            (dtype_of(0), one(s))
        }
        "Det" => {
            let s = shape_of(0)
                .filter(|s| s.len() >= 2)
                .map(|s| s[..s.len() - 2].to_vec());
            (dtype_of(0), one(s))
        }
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => {
            let dtype = attrs
                .int("output_datatype", 1)
                .ok()
                .and_then(|c| DType::from_onnx(c as i32));
            let s = ints(0)
                .filter(|v| v.len() == 1)
                .and_then(|v| usize::try_from(v[0]).ok())
                .map(|n| vec![Dim::Fixed(n)]);
            (dtype, one(s))
        }
        "EyeLike" => {
            let dtype = match attrs.opt_int("dtype") {
                Ok(Some(c)) => DType::from_onnx(c as i32),
                _ => dtype_of(0),
            };
            (dtype, one(shape_of(0)))
        }
        "OneHot" => (dtype_of(2), vec![]),
        "BatchNormalization" => (dtype_of(0), vec![shape_of(0)]),
        // `RMSNormalization`'s scale broadcasts over its input as a `Mul`'s operand does.
        // `PRelu`'s slope broadcasts both ways, as ONNX's reference and ORT read it.
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Mod" | "Max" | "Min" | "Sum" | "Mean"
        | "PRelu" | "RMSNormalization" => {
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
        "Conv" | "FusedConv" | "MaxPool" | "AveragePool" | "LpPool" => (
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
        "LSTM" | "GRU" | "RNN" => (dtype_of(0), recurrent(node, shape_of(0), shape_of(2))),
        // Quantized outputs take the zero point's type (uint8 when absent, for QuantizeLinear
        // `output_dtype` when given); dequantized ones the scale's.
        "QuantizeLinear" => {
            let dtype = dtype_of(2).or_else(|| match attrs.int("output_dtype", 0) {
                Ok(0) | Err(_) => Some(DType::U8),
                Ok(code) => DType::from_onnx(code as i32),
            });
            (dtype, one(shape_of(0)))
        }
        "DequantizeLinear" => {
            let dtype = match attrs.int("output_dtype", 0) {
                Ok(0) | Err(_) => dtype_of(1),
                Ok(code) => DType::from_onnx(code as i32),
            };
            (dtype, one(shape_of(0)))
        }
        "DynamicQuantizeLinear" => (
            Some(DType::U8),
            vec![shape_of(0), Some(vec![]), Some(vec![])],
        ),
        "MatMulInteger" => (Some(DType::I32), one(matmul(shape_of(0), shape_of(1)))),
        "QLinearMatMul" => (
            dtype_of(7).or(dtype_of(0)),
            one(matmul(shape_of(0), shape_of(3))),
        ),
        "ConvInteger" => (
            Some(DType::I32),
            one(conv_like(node, shape_of(0), shape_of(1))),
        ),
        "QLinearConv" => (
            dtype_of(7).or(dtype_of(0)),
            one(conv_like(node, shape_of(0), shape_of(3))),
        ),
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
                let perm = spillway_kernels::cpu::shape::transpose::check_perm(&perm, s.len());
                perm.ok()?.iter().map(|&p| s.get(p).cloned()).collect()
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
                                let tiled = usize::try_from(r).ok().and_then(|r| d.checked_mul(r));
                                tiled.map_or(Dim::Unknown, Dim::Fixed)
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
                // Unknown where a length is, or where the sum overflows (the kernel refuses it).
                let total: Option<usize> = shapes.iter().try_fold(0usize, |sum, s| {
                    sum.checked_add(s.get(axis).and_then(Dim::fixed)?)
                });
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
            // Empty axes are none given, as the kernel reads them.
            let axes = axes.map(|a| a.filter(|a| !a.is_empty()));
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
        "Resize" => (dtype_of(0), one(resize_shape(graph, node, known))),
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
        | "Compress" | "Unique" | "CenterCropPad" | "DFT" | "STFT" | "Col2Im" | "MaxUnpool"
        | "GridSample" | "AffineGrid" => dtype_of(0),
        "MelWeightMatrix" => DType::from_onnx(node.attrs.int("output_datatype", 1).ok()? as i32),
        "NonZero" | "NonMaxSuppression" | "ArgMax" | "ArgMin" => Some(DType::I64),
        "ConstantOfShape" => match node.attrs.opt_tensor("value") {
            Ok(Some(t)) => Some(t.dtype()),
            Ok(None) => Some(DType::F32),
            Err(_) => None,
        },
        _ => None,
    }
}
