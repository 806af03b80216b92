//! Structure-aware generation of small ONNX models from the schemas of the supported ops.
//!
//! The fuzzer's bytes drive every choice through [`arbitrary::Unstructured`]: the opset, a
//! base shape that most values broadcast against, the graph inputs, then a few nodes, each an
//! op of [`spillway::supported_ops`] whose schema version applies at that opset, with inputs
//! taken from the values made so far (of a type its constraints allow) or fresh constants
//! (small int64 vectors where the spec wants shapes, axes, pads or indices), and random
//! attributes of the right kind (the usual values of each known attribute, now and then an
//! extreme one). The values no node consumes are the graph's outputs. The bytes left over
//! become the input values.

use std::collections::HashSet;
use std::sync::OnceLock;

use arbitrary::{Result, Unstructured};
use prost::Message;
use spillway::onnx::proto::{
    self, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TypeProto, ValueInfoProto,
};
use spillway::{DType, Tensor};

use super::schema::{NEWEST_OPSET, SCHEMAS};
use super::{AttrKind, AttrSpec, OpSchema, Opt, Param};

/// A generated model and the inputs to run it on.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The serialized `ModelProto`.
    pub model: Vec<u8>,
    /// One tensor per graph input, by name.
    pub inputs: Vec<(String, Tensor)>,
    /// The default-domain opset it imports.
    pub opset: i64,
    /// The op types of its nodes, in order (for messages).
    pub ops: Vec<&'static str>,
}

/// The opsets a model may import.
const OPSETS: [i64; 7] = [11, 13, 17, 18, 19, 21, NEWEST_OPSET];
/// Element types a fresh input or constant may have (float most often).
const FRESH_TYPES: [i32; 10] = [1, 1, 1, 7, 7, 6, 9, 11, 2, 3];
/// Element types `Cast`'s `to` may name.
const CAST_TYPES: [i32; 12] = [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13];
/// Float values: ordinary ones, then the edge cases.
const FLOATS: [f64; 16] = [
    0.0,
    1.0,
    -1.0,
    0.5,
    -2.5,
    3.0,
    1e-3,
    -0.0,
    2.0,
    0.25,
    7.0,
    -7.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e30,
];
/// Input names whose values are shapes, axes, pads, indices and the like (small int64s).
const INDEX_LIKE: [&str; 17] = [
    "shape",
    "axes",
    "pads",
    "starts",
    "ends",
    "steps",
    "repeats",
    "sizes",
    "split",
    "K",
    "indices",
    "depth",
    "max_output_boxes_per_class",
    "input",
    "limit",
    "delta",
    "batch_indices",
];

/// Whether `SPILLWAY_FUZZ_AVOID_KNOWN` is set (the fuzz target's default for
/// [`generate_with`]'s `avoid_known`).
pub fn avoid_known_from_env() -> bool {
    static AVOID: OnceLock<bool> = OnceLock::new();
    *AVOID.get_or_init(|| std::env::var_os("SPILLWAY_FUZZ_AVOID_KNOWN").is_some())
}

/// The bytes of values: as they are, or when avoiding the known bugs mapped off the
/// palette's NaN, infinities and 1e30 (see [`tensor_from_bytes`]).
fn tame(bytes: &[u8], avoid_known: bool) -> Vec<u8> {
    if avoid_known {
        bytes.iter().map(|b| b % 12).collect()
    } else {
        bytes.to_vec()
    }
}

/// A value the next nodes may consume.
struct Val {
    name: String,
    elem: Option<i32>,
}

/// The ops both supported and described by a schema.
fn ops() -> &'static [&'static str] {
    static OPS: OnceLock<Vec<&'static str>> = OnceLock::new();
    OPS.get_or_init(|| {
        let supported = spillway::supported_ops();
        let mut ops: Vec<&'static str> = SCHEMAS
            .iter()
            .map(|s| s.op)
            .filter(|op| supported.contains(op))
            .collect();
        ops.dedup();
        ops
    })
}

/// The schema of `op` in force at `opset`.
fn schema(op: &str, opset: i64) -> Option<&'static OpSchema> {
    SCHEMAS
        .iter()
        .filter(|s| s.op == op && s.since <= opset)
        .max_by_key(|s| s.since)
}

struct Gen<'a, 'b> {
    u: &'a mut Unstructured<'b>,
    avoid_known: bool,
    graph: GraphProto,
    pool: Vec<Val>,
    consumed: HashSet<String>,
    base: Vec<i64>,
    inputs: Vec<(String, i32, Vec<usize>)>,
    next: usize,
}

/// Draws a model and its inputs from `u` ([`generate_with`], avoiding the known bugs when
/// `SPILLWAY_FUZZ_AVOID_KNOWN` is set).
pub fn generate(u: &mut Unstructured<'_>) -> Result<Generated> {
    generate_with(u, avoid_known_from_env())
}

/// Draws a model and its inputs from `u`. With `avoid_known`, the generator steers clear of
/// the bugs known and being fixed when it was written (see `fuzz/README.md`), so that a long
/// campaign spends its time looking for new ones: no extreme integers (huge `Range`,
/// `ConstantOfShape`, `Resize`, `INT64_MIN / -1`), no `Pad`, valid `Transpose` permutations,
/// no huge or infinite floats.
pub fn generate_with(u: &mut Unstructured<'_>, avoid_known: bool) -> Result<Generated> {
    let opset = *u.choose(&OPSETS)?;
    let rank = u.int_in_range(0..=4)?;
    let base = (0..rank)
        .map(|_| u.int_in_range(1..=5))
        .collect::<Result<Vec<i64>>>()?;
    let mut g = Gen {
        u,
        avoid_known,
        graph: GraphProto {
            name: Some("fuzz".into()),
            ..Default::default()
        },
        pool: Vec::new(),
        consumed: HashSet::new(),
        base,
        inputs: Vec::new(),
        next: 0,
    };
    for _ in 0..g.u.int_in_range(1..=3)? {
        let elem = *g.u.choose(&FRESH_TYPES)?;
        let shape = g.shape_like()?;
        let name = g.fresh_name("in");
        g.graph
            .input
            .push(value_info(&name, Some(elem), Some(&shape)));
        g.inputs.push((
            name.clone(),
            elem,
            shape.iter().map(|&d| d as usize).collect(),
        ));
        g.pool.push(Val {
            name,
            elem: Some(elem),
        });
    }
    let mut ops_used = Vec::new();
    for _ in 0..g.u.int_in_range(1..=5)? {
        let op = *g.u.choose(ops())?;
        if avoid_known && op == "Pad" {
            continue;
        }
        let Some(s) = schema(op, opset) else { continue };
        g.node(s)?;
        ops_used.push(op);
    }
    let outputs: Vec<ValueInfoProto> = g
        .pool
        .iter()
        .filter(|v| !g.consumed.contains(&v.name))
        .filter(|v| !g.inputs.iter().any(|(n, _, _)| n == &v.name))
        .map(|v| value_info(&v.name, v.elem, None))
        .collect();
    if outputs.is_empty() {
        return Err(arbitrary::Error::IncorrectFormat);
    }
    g.graph.output = outputs;
    let mut inputs = Vec::new();
    for (name, elem, shape) in std::mem::take(&mut g.inputs) {
        let count: usize = shape.iter().product();
        let bytes = tame(g.u.bytes(count.min(g.u.len()))?, avoid_known);
        let dtype = DType::from_onnx(elem).ok_or(arbitrary::Error::IncorrectFormat)?;
        let t =
            tensor_from_bytes(dtype, &shape, &bytes).ok_or(arbitrary::Error::IncorrectFormat)?;
        inputs.push((name, t));
    }
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        producer_name: Some("spillway-fuzz".into()),
        graph: Some(g.graph),
        ..Default::default()
    }
    .encode_to_vec();
    Ok(Generated {
        model,
        inputs,
        opset,
        ops: ops_used,
    })
}

impl Gen<'_, '_> {
    fn fresh_name(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    /// A shape that broadcasts against the base shape most of the time.
    fn shape_like(&mut self) -> Result<Vec<i64>> {
        Ok(match self.u.int_in_range(0..=5)? {
            0..=1 => self.base.clone(),
            2 => {
                let skip = self.u.int_in_range(0..=self.base.len())?;
                let mut s = self.base[skip..].to_vec();
                for d in &mut s {
                    if self.u.ratio(1, 3)? {
                        *d = 1;
                    }
                }
                s
            }
            3 => Vec::new(),
            _ => {
                let rank = self.u.int_in_range(0..=4)?;
                (0..rank)
                    .map(|_| self.u.int_in_range(0..=4))
                    .collect::<Result<_>>()?
            }
        })
    }

    /// A small int64, now and then an extreme one.
    fn small_int(&mut self, lo: i64, hi: i64) -> Result<i64> {
        if self.avoid_known {
            return self.u.int_in_range(lo..=hi);
        }
        Ok(match self.u.int_in_range(0..=40)? {
            0 => i64::MIN,
            1 => i64::MAX,
            2 => 1 << 40,
            3 => -(1 << 33),
            _ => self.u.int_in_range(lo..=hi)?,
        })
    }

    fn float(&mut self) -> Result<f64> {
        if self.avoid_known {
            return Ok(*self.u.choose(&FLOATS[..12])?);
        }
        Ok(*self.u.choose(&FLOATS)?)
    }

    /// A fresh initializer: an int64 vector for index-like inputs, else a tensor of a shape
    /// like the base shape.
    fn constant(&mut self, param: &Param, elem: i32) -> Result<String> {
        let name = self.fresh_name("c");
        let index_like = elem == 7 && (param.types == [7] || INDEX_LIKE.contains(&param.name));
        let (dims, bytes): (Vec<i64>, Vec<u8>) = if index_like {
            let len = if self.u.ratio(1, 2)? {
                self.base.len() as i64
            } else {
                self.u.int_in_range(0..=6)?
            };
            let mut raw = Vec::new();
            for _ in 0..len {
                raw.extend(self.small_int(-3, 6)?.to_le_bytes());
            }
            let dims = if self.u.ratio(1, 6)? && len == 1 {
                Vec::new()
            } else {
                vec![len]
            };
            (dims, raw)
        } else {
            let dims = self.shape_like()?;
            let count: usize = dims.iter().map(|&d| d as usize).product();
            let dtype = DType::from_onnx(elem).ok_or(arbitrary::Error::IncorrectFormat)?;
            let seed = tame(self.u.bytes(count.min(self.u.len()))?, self.avoid_known);
            let t = tensor_from_bytes(
                dtype,
                &dims.iter().map(|&d| d as usize).collect::<Vec<_>>(),
                &seed,
            )
            .ok_or(arbitrary::Error::IncorrectFormat)?;
            (dims, le_bytes(&t).ok_or(arbitrary::Error::IncorrectFormat)?)
        };
        self.graph.initializer.push(TensorProto {
            name: Some(name.clone()),
            dims,
            data_type: Some(elem),
            raw_data: Some(bytes.into()),
            ..Default::default()
        });
        Ok(name)
    }

    /// One value for a formal input: a value made earlier when one fits, else a constant.
    fn operand(&mut self, param: &Param, bound: Option<i32>) -> Result<(String, Option<i32>)> {
        let allowed: Vec<i32> = param
            .types
            .iter()
            .copied()
            .filter(|&t| DType::from_onnx(t).is_some())
            .collect();
        let fits = |e: Option<i32>| match (e, bound) {
            (None, _) => true,
            (Some(e), Some(b)) => e == b,
            (Some(e), None) => allowed.contains(&e),
        };
        let candidates: Vec<usize> = (0..self.pool.len())
            .filter(|&i| fits(self.pool[i].elem))
            .collect();
        let index_like = param.types == [7] || INDEX_LIKE.contains(&param.name);
        if !candidates.is_empty() && (!index_like || self.u.ratio(1, 4)?) && self.u.ratio(4, 5)? {
            let v = &self.pool[*self.u.choose(&candidates)?];
            return Ok((v.name.clone(), v.elem));
        }
        let elem = match bound {
            Some(b) => b,
            None => {
                let fresh: Vec<i32> = allowed
                    .iter()
                    .copied()
                    .filter(|t| FRESH_TYPES.contains(t))
                    .collect();
                if fresh.contains(&1) && !index_like && self.u.ratio(1, 2)? {
                    1
                } else if fresh.contains(&7) && index_like {
                    7
                } else if fresh.is_empty() {
                    *self.u.choose(&FRESH_TYPES)?
                } else {
                    *self.u.choose(&fresh)?
                }
            }
        };
        Ok((self.constant(param, elem)?, Some(elem)))
    }

    fn node(&mut self, s: &'static OpSchema) -> Result<()> {
        let mut bound: Vec<(&str, i32)> = Vec::new();
        let mut inputs: Vec<String> = Vec::new();
        for p in s.inputs {
            let count = match p.option {
                Opt::Single => 1,
                Opt::Optional => {
                    // Present one time in two; absent trailing ones are left off.
                    if self.u.ratio(1, 2)? {
                        1
                    } else {
                        inputs.push(String::new());
                        continue;
                    }
                }
                Opt::Variadic => self.u.int_in_range(1..=3)?,
            };
            for _ in 0..count {
                let b = bound
                    .iter()
                    .find(|(c, _)| *c == p.constraint)
                    .map(|&(_, e)| e);
                let (name, elem) = self.operand(p, b)?;
                if b.is_none()
                    && let Some(e) = elem
                {
                    bound.push((p.constraint, e));
                }
                self.consumed.insert(name.clone());
                inputs.push(name);
            }
        }
        while inputs.last().is_some_and(|n| n.is_empty()) {
            inputs.pop();
        }
        let attribute = s
            .attrs
            .iter()
            .filter_map(
                |a| match a.required || self.u.ratio(1, 3).unwrap_or(false) {
                    true => Some(self.attr(a)),
                    false => None,
                },
            )
            .collect::<Result<Vec<_>>>()?;
        let cast_to = attribute
            .iter()
            .find(|a| a.name() == "to")
            .and_then(|a| a.i)
            .map(|v| v as i32);
        let mut outputs = Vec::new();
        for p in s.outputs {
            let count = match p.option {
                Opt::Single => 1,
                Opt::Optional => usize::from(self.u.ratio(1, 3)?),
                Opt::Variadic => self.u.int_in_range(1..=3)?,
            };
            for _ in 0..count {
                let name = self.fresh_name("v");
                let elem = bound
                    .iter()
                    .find(|(c, _)| *c == p.constraint)
                    .map(|&(_, e)| e)
                    .or_else(|| (p.types.len() == 1).then(|| p.types[0]))
                    .or(if s.op == "Cast" { cast_to } else { None });
                self.pool.push(Val {
                    name: name.clone(),
                    elem,
                });
                outputs.push(name);
            }
        }
        self.graph.node.push(NodeProto {
            name: Some(format!("{}_{}", s.op, self.graph.node.len())),
            op_type: Some(s.op.into()),
            input: inputs,
            output: outputs,
            attribute,
            ..Default::default()
        });
        Ok(())
    }

    fn ints(&mut self, len: std::ops::RangeInclusive<usize>, lo: i64, hi: i64) -> Result<Vec<i64>> {
        let n = self.u.int_in_range(len)?;
        (0..n).map(|_| self.small_int(lo, hi)).collect()
    }

    fn attr(&mut self, a: &AttrSpec) -> Result<AttributeProto> {
        use proto::attribute_proto::AttributeType as T;
        let mut p = AttributeProto {
            name: Some(a.name.into()),
            ..Default::default()
        };
        let rank = self.base.len();
        match a.kind {
            AttrKind::Int => {
                p.i = Some(match a.name {
                    "axis" | "batch_dims" => self.small_int(-4, 4)?,
                    "to" => *self.u.choose(&CAST_TYPES)? as i64,
                    "group" => self.u.int_in_range(1..=4)?,
                    "blocksize" => self.u.int_in_range(1..=3)?,
                    "size" => self.u.int_in_range(1..=5)?,
                    "keepdims"
                    | "ceil_mode"
                    | "count_include_pad"
                    | "transA"
                    | "transB"
                    | "select_last_index"
                    | "exclusive"
                    | "reverse"
                    | "upper"
                    | "noop_with_empty_axes"
                    | "largest"
                    | "sorted"
                    | "center_point_box"
                    | "allowzero"
                    | "storage_order"
                    | "training_mode"
                    | "fmod"
                    | "stash_type"
                    | "exclude_outside"
                    | "seed" => self.u.int_in_range(0..=1)?,
                    _ => self.small_int(-2, 8)?,
                });
                p.set_type(T::Int);
            }
            AttrKind::Ints => {
                p.ints = match a.name {
                    "perm" if self.avoid_known || self.u.ratio(3, 4)? => {
                        let mut perm: Vec<i64> = (0..rank as i64).collect();
                        for i in (1..perm.len()).rev() {
                            let j = self.u.int_in_range(0..=i)?;
                            perm.swap(i, j);
                        }
                        perm
                    }
                    "kernel_shape" => {
                        let n = self.u.int_in_range(1..=3)?;
                        (0..n)
                            .map(|_| self.u.int_in_range(1..=3))
                            .collect::<Result<_>>()?
                    }
                    "strides" | "dilations" => {
                        let n = self.u.int_in_range(1..=3)?;
                        (0..n)
                            .map(|_| self.u.int_in_range(1..=3))
                            .collect::<Result<_>>()?
                    }
                    "pads" => {
                        let n = 2 * self.u.int_in_range(1..=3)?;
                        (0..n)
                            .map(|_| self.u.int_in_range(0..=2))
                            .collect::<Result<_>>()?
                    }
                    "axes" => self.ints(0..=3, -3, 3)?,
                    _ => self.ints(0..=4, -1, 4)?,
                };
                p.set_type(T::Ints);
            }
            AttrKind::Float => {
                p.f = Some(self.float()? as f32);
                p.set_type(T::Float);
            }
            AttrKind::Floats => {
                let n = self.u.int_in_range(0..=4)?;
                p.floats = (0..n)
                    .map(|_| self.float().map(|f| f as f32))
                    .collect::<Result<_>>()?;
                p.set_type(T::Floats);
            }
            AttrKind::Str => {
                let choices: &[&str] = match a.name {
                    "mode" => &[
                        "constant", "reflect", "edge", "wrap", "nearest", "linear", "cubic",
                        "bilinear", "DCR", "CRD", "avg", "max",
                    ],
                    "auto_pad" => &["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"],
                    "coordinate_transformation_mode" => &[
                        "half_pixel",
                        "half_pixel_symmetric",
                        "pytorch_half_pixel",
                        "align_corners",
                        "asymmetric",
                        "tf_crop_and_resize",
                    ],
                    "nearest_mode" => &["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"],
                    "reduction" => &["none", "add", "mul", "max", "min"],
                    "keep_aspect_ratio_policy" => &["stretch", "not_larger", "not_smaller"],
                    "approximate" => &["none", "tanh"],
                    "direction" => &["LEFT", "RIGHT"],
                    "equation" => &[
                        "ij,jk->ik",
                        "i,i->",
                        "ii->i",
                        "ij->ji",
                        "bij,bjk->bik",
                        "...ii->...i",
                        "i,j->ij",
                        "ij->",
                        "abc,cd->abd",
                    ],
                    "coordinate_transformation" => &["half_pixel", "output_half_pixel"],
                    _ => &["", "x"],
                };
                p.s = Some(bytes::Bytes::from_static(
                    self.u.choose(choices)?.as_bytes(),
                ));
                p.set_type(T::String);
            }
            AttrKind::Strs => {
                p.strings = vec![bytes::Bytes::from_static(b"a")];
                p.set_type(T::Strings);
            }
            AttrKind::Tensor => {
                let elem = *self.u.choose(&FRESH_TYPES)?;
                let dims: Vec<i64> = if self.u.ratio(1, 2)? {
                    vec![1]
                } else {
                    self.shape_like()?
                };
                let count: usize = dims.iter().map(|&d| d as usize).product();
                let dtype = DType::from_onnx(elem).ok_or(arbitrary::Error::IncorrectFormat)?;
                let seed = self.u.bytes(count.min(self.u.len()))?.to_vec();
                let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
                let t = tensor_from_bytes(dtype, &shape, &seed)
                    .ok_or(arbitrary::Error::IncorrectFormat)?;
                p.t = Some(TensorProto {
                    dims,
                    data_type: Some(elem),
                    raw_data: Some(
                        le_bytes(&t)
                            .ok_or(arbitrary::Error::IncorrectFormat)?
                            .into(),
                    ),
                    ..Default::default()
                });
                p.set_type(T::Tensor);
            }
        }
        Ok(p)
    }
}

/// A tensor value's declaration; no type at all when the element type is unknown.
fn value_info(name: &str, elem: Option<i32>, dims: Option<&[i64]>) -> ValueInfoProto {
    use proto::tensor_shape_proto::{Dimension, dimension::Value};
    ValueInfoProto {
        name: Some(name.into()),
        r#type: elem.is_some().then(|| TypeProto {
            value: Some(proto::type_proto::Value::TensorType(
                proto::type_proto::Tensor {
                    elem_type: elem,
                    shape: dims.map(|dims| proto::TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|&d| Dimension {
                                value: Some(Value::DimValue(d)),
                                ..Default::default()
                            })
                            .collect(),
                    }),
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A tensor of `shape` whose elements come from `bytes` (cycled; zeros when empty): floats
/// from a palette with NaN, infinities and -0, integers in -5..=10, booleans from the low bit.
/// `None` for element types the generator does not make.
pub fn tensor_from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Option<Tensor> {
    let count: usize = shape.iter().product();
    let byte = |i: usize| {
        if bytes.is_empty() {
            0
        } else {
            bytes[i % bytes.len()]
        }
    };
    let float = |i: usize| FLOATS[(byte(i) % 16) as usize];
    let int = |i: usize| (byte(i) % 16) as i64 - 5;
    match dtype {
        DType::F32 => Tensor::from_shape_vec(shape, (0..count).map(|i| float(i) as f32).collect()),
        DType::F64 => Tensor::from_shape_vec(shape, (0..count).map(float).collect()),
        DType::I64 => Tensor::from_shape_vec(shape, (0..count).map(int).collect()),
        DType::I32 => Tensor::from_shape_vec(shape, (0..count).map(|i| int(i) as i32).collect()),
        DType::I8 => Tensor::from_shape_vec(shape, (0..count).map(|i| int(i) as i8).collect()),
        DType::U8 => Tensor::from_shape_vec(shape, (0..count).map(byte).collect()),
        DType::Bool => {
            Tensor::from_shape_vec(shape, (0..count).map(|i| byte(i) & 1 == 1).collect())
        }
        _ => return None,
    }
    .ok()
}

/// The little-endian bytes of a tensor the generator made.
fn le_bytes(t: &Tensor) -> Option<Vec<u8>> {
    Some(match t.dtype() {
        DType::F32 => t
            .view::<f32>()
            .ok()?
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::F64 => t
            .view::<f64>()
            .ok()?
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::I64 => t
            .view::<i64>()
            .ok()?
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::I32 => t
            .view::<i32>()
            .ok()?
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        DType::I8 => t.view::<i8>().ok()?.iter().map(|&v| v as u8).collect(),
        DType::U8 => t.view::<u8>().ok()?.iter().copied().collect(),
        DType::Bool => t
            .view::<bool>()
            .ok()?
            .iter()
            .map(|&v| u8::from(v))
            .collect(),
        _ => return None,
    })
}
