//! Models with their weights re-drawn: a model whose stored weights make its outputs constant
//! (the onnx wheel's `light_*` models keep only their structure: every weight is one value
//! repeated by a `ConstantOfShape`) checks nothing but shapes. [`redraw_weights`] gives every
//! weight of a `Conv`, `Gemm` or `MatMul` seeded values of He's scale, normalizations and
//! per-channel `Mul`s scales around one and sane statistics, biases small values, and makes
//! the input of each `Softmax` that ends the graph an output too, so that the logits are
//! compared before a softmax can saturate them.

use prost::Message;
use spillway::onnx::proto::{GraphProto, ModelProto, TensorProto, ValueInfoProto};

/// A seeded xorshift stream of uniform values in [-1, 1).
struct Uniform(u64);

impl Uniform {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// What an initializer is to the node that reads it.
enum Role {
    /// A product's weights, with their fan-in.
    Weight(usize),
    /// A bias or a shift.
    Small,
    /// A normalization's scale (around 1).
    Scale,
    /// A normalization's variance (positive).
    Variance,
}

fn role(model: &ModelProto, t: &TensorProto) -> Option<Role> {
    let dims: Vec<usize> = t.dims.iter().map(|&d| d.max(0) as usize).collect();
    role_of(model.graph.as_ref()?, t.name.as_deref()?, &dims, 0)
}

/// The role of value `name` (of `dims`) to its first reader, looking through the ops that
/// only reshape it (Caffe2's exports unsqueeze a per-channel scale before a `Mul`).
fn role_of(graph: &GraphProto, name: &str, dims: &[usize], depth: usize) -> Option<Role> {
    let total: usize = dims.iter().product();
    let node = graph
        .node
        .iter()
        .find(|n| n.input.iter().any(|i| i == name))?;
    let slot = node.input.iter().position(|i| i == name)?;
    let trans_b = node
        .attribute
        .iter()
        .any(|a| a.name.as_deref() == Some("transB") && a.i == Some(1));
    Some(match (node.op_type.as_deref()?, slot) {
        ("Unsqueeze" | "Reshape" | "Squeeze" | "Identity" | "Flatten", 0) if depth < 4 => {
            return role_of(graph, node.output.first()?, dims, depth + 1);
        }
        ("Conv" | "ConvTranspose", 1) => Weight(total / dims.first().copied()?.max(1)),
        ("Gemm", 1) if trans_b => Weight(*dims.get(1)?),
        ("Gemm" | "MatMul", 1) => Weight(*dims.first()?),
        ("BatchNormalization" | "InstanceNormalization" | "LayerNormalization", 1) => Scale,
        ("BatchNormalization", 4) => Variance,
        ("Mul", _) => Scale,
        (_, _) if dims.len() <= 1 => Small,
        _ => return None,
    })
}
use Role::*;

/// The int64 values of an initializer (`int64_data` or little-endian `raw_data`).
fn int64s(t: &TensorProto) -> Vec<i64> {
    match &t.raw_data {
        Some(raw) => raw
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect(),
        None => t.int64_data.clone(),
    }
}

/// Turns each float `ConstantOfShape` of a constant shape into an initializer of that shape:
/// the `light_*` models make their weights this way (one value repeated), and the weights
/// are then re-drawn like any other.
fn weights_from_constant_of_shape(m: &mut ModelProto) {
    let Some(graph) = m.graph.as_mut() else {
        return;
    };
    let shapes: std::collections::HashMap<String, Vec<i64>> = graph
        .initializer
        .iter()
        .filter(|t| t.data_type == Some(7) && t.dims.len() == 1)
        .filter_map(|t| Some((t.name.clone()?, int64s(t))))
        .collect();
    let mut made = Vec::new();
    graph.node.retain(|n| {
        let float_value = n
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some("value"))
            .and_then(|a| a.t.as_ref())
            .is_none_or(|t| t.data_type == Some(1));
        let shape = n.input.first().and_then(|i| shapes.get(i));
        match (n.op_type.as_deref(), shape, n.output.first()) {
            (Some("ConstantOfShape"), Some(dims), Some(out)) if float_value => {
                made.push(TensorProto {
                    name: Some(out.clone()),
                    dims: dims.clone(),
                    data_type: Some(1),
                    ..Default::default()
                });
                false
            }
            _ => true,
        }
    });
    graph.initializer.extend(made);
}

/// Drops the graph inputs that name an initializer (IR 3 listed every initializer as an input,
/// which makes it an input a caller may override: a caller filling every input with random
/// values replaces the weights), and raises the IR version to 4, where they need not be.
fn initializers_not_inputs(m: &mut ModelProto) {
    if let Some(graph) = m.graph.as_mut() {
        let initializers: std::collections::HashSet<String> = graph
            .initializer
            .iter()
            .filter_map(|t| t.name.clone())
            .collect();
        graph
            .input
            .retain(|i| !i.name.as_ref().is_some_and(|n| initializers.contains(n)));
    }
    m.ir_version = Some(m.ir_version.unwrap_or(4).max(4));
}

/// `model` (ONNX protobuf bytes) with every float weight re-drawn from `seed` and each final
/// `Softmax`'s input added as an output named `<its name>` (float, shape unstated).
pub fn redraw_weights(model: &[u8], seed: u64) -> Vec<u8> {
    let mut m = ModelProto::decode(model).expect("a model");
    weights_from_constant_of_shape(&mut m);
    initializers_not_inputs(&mut m);
    let mut rng = Uniform(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let roles: Vec<Option<Role>> = m
        .graph
        .as_ref()
        .map(|g| g.initializer.iter().map(|t| role(&m, t)).collect())
        .unwrap_or_default();
    let graph = m.graph.as_mut().expect("a graph");
    for (t, role) in graph.initializer.iter_mut().zip(roles) {
        if t.data_type != Some(1) {
            continue;
        }
        // An initializer made above has no values yet: whatever reads it, it gets small ones.
        let role = match role {
            Some(role) => role,
            None if t.float_data.is_empty() && t.raw_data.is_none() => Small,
            None => continue,
        };
        let n: usize = t.dims.iter().map(|&d| d.max(0) as usize).product();
        let draw = |rng: &mut Uniform| match role {
            Weight(fan_in) => rng.next() * (6.0 / fan_in.max(1) as f32).sqrt(),
            Small => 0.1 * rng.next(),
            Scale => 1.0 + 0.1 * rng.next(),
            Variance => 1.0 + 0.5 * rng.next(),
        };
        t.float_data = (0..n).map(|_| draw(&mut rng)).collect();
        t.raw_data = None;
    }
    let outputs: Vec<String> = graph.output.iter().filter_map(|o| o.name.clone()).collect();
    let logits: Vec<String> = graph
        .node
        .iter()
        .filter(|n| n.op_type.as_deref() == Some("Softmax"))
        .filter(|n| n.output.iter().any(|o| outputs.contains(o)))
        .filter_map(|n| n.input.first().cloned())
        .filter(|i| !outputs.contains(i))
        .collect();
    for name in logits {
        graph.output.push(ValueInfoProto {
            name: Some(name),
            r#type: Some(crate::build::tensor_type(1)),
            ..Default::default()
        });
    }
    m.encode_to_vec()
}
