//! Models with their weights re-drawn: a model whose stored weights make its outputs constant
//! (the onnx wheel's `light_*` models keep only their structure) checks nothing but shapes.
//! [`redraw_weights`] gives every weight of a `Conv`, `Gemm` or `MatMul` seeded values of He's
//! scale, normalizations sane statistics and biases small ones, and makes the input of each
//! `Softmax` that ends the graph an output too, so that the logits are compared before a
//! softmax can saturate them.

use prost::Message;
use spillway::onnx::proto::{ModelProto, TensorProto, ValueInfoProto};

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
    let name = t.name.as_deref()?;
    let dims: Vec<usize> = t.dims.iter().map(|&d| d.max(0) as usize).collect();
    let total: usize = dims.iter().product();
    let graph = model.graph.as_ref()?;
    for node in &graph.node {
        let Some(slot) = node.input.iter().position(|i| i == name) else {
            continue;
        };
        let trans_b = node
            .attribute
            .iter()
            .any(|a| a.name.as_deref() == Some("transB") && a.i == Some(1));
        return Some(match (node.op_type.as_deref()?, slot) {
            ("Conv" | "ConvTranspose", 1) => Weight(total / dims.first().copied()?.max(1)),
            ("Gemm", 1) if trans_b => Weight(*dims.get(1)?),
            ("Gemm" | "MatMul", 1) => Weight(*dims.first()?),
            ("BatchNormalization" | "InstanceNormalization" | "LayerNormalization", 1) => Scale,
            ("BatchNormalization", 4) => Variance,
            (_, _) if dims.len() <= 1 => Small,
            _ => return None,
        });
    }
    None
}
use Role::*;

/// `model` (ONNX protobuf bytes) with every float weight re-drawn from `seed` and each final
/// `Softmax`'s input added as an output named `<its name>` (float, shape unstated).
pub fn redraw_weights(model: &[u8], seed: u64) -> Vec<u8> {
    let mut m = ModelProto::decode(model).expect("a model");
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
        let Some(role) = role else { continue };
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
