//! Fuses a `Conv` with the activation that follows it into ONNX Runtime's `com.microsoft`
//! `FusedConv`, whose kernel applies the activation to each output tile while it is still in
//! cache (ORT's `ConvActivationFusion` and, for a residual, `ConvAddActivationFusion`):
//!
//! - `Conv → Relu | LeakyRelu | Sigmoid | Tanh | Clip | HardSigmoid | HardSwish` becomes one
//!   `FusedConv` (`HardSwish` is Spillway's addition to ORT's list);
//! - `Conv → Add(other) → Relu` becomes one `FusedConv` with `Z = other` (a ResNet block's
//!   residual) unless the shapes are known to differ. Detectors' shapes depend on the image, so
//!   equal shapes often cannot be proven: the kernel adds `Z` in the product's epilogue when it
//!   has the output's shape and broadcasts it as `Add` does otherwise;
//! - `Conv → Add(other)` with no activation after it becomes a `FusedConv` with `Z = other`
//!   and no activation (ORT's NCHWc transformer fuses such sums too), for group 1.
//!
//! Only `f32` convolutions whose output is read by that one node and is not a graph output are
//! fused; the fused node keeps the `Conv` node's name, so errors and traces still name it. The
//! `FusedConv` kernel exists on the CPU only: sessions with a GPU do not run this pass.

use spillway_kernels::{AttrValue, DType};

use crate::graph::{Dim, Graph, Node, ValueId};

/// The domain and version of the fused node.
const DOMAIN: &str = "com.microsoft";
const VERSION: i64 = 1;

/// Fuses every eligible `Conv → activation`, `Conv → Add → Relu` and `Conv → Add`; returns how many
/// `FusedConv` nodes it made.
pub fn fuse_conv_activations(graph: &mut Graph) -> usize {
    let producers = graph.producers();
    let uses = graph.use_counts();
    // The node that only reads `v`, when `v` has exactly one reader and is no graph output.
    let sole_value = |v: ValueId| uses[v.index()] == 1 && !graph.outputs.contains(&v);
    let conv_at = |v: ValueId| -> Option<usize> {
        let &i = producers.get(&v)?;
        (sole_value(v) && is_fusable_conv(graph, &graph.nodes[i])).then_some(i)
    };
    // The `Add` inputs `(l, r)` as (the fusable `Conv` producing one of them, that `eligible`
    // takes, and the other as `Z`).
    let residual_of = |(l, r): (ValueId, ValueId), eligible: &dyn Fn(usize) -> bool| {
        [(l, r), (r, l)].into_iter().find_map(|(conv_out, other)| {
            let c = conv_at(conv_out).filter(|&c| eligible(c))?;
            (other != conv_out && may_share_shape(graph, conv_out, other)).then_some((c, other))
        })
    };
    let mut fusions: Vec<Fusion> = Vec::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        if !default_domain(node) || node.present_outputs().count() != 1 {
            continue;
        }
        let Some(activation) = activation_of(graph, node) else {
            continue;
        };
        let Some(Some(x)) = node.inputs.first().copied() else {
            continue;
        };
        if let Some(c) = conv_at(x) {
            fusions.push(Fusion {
                act: i,
                conv: c,
                add: None,
                activation: Some(activation),
            });
            continue;
        }
        // Conv → Add(other) → Relu.
        if node.op_type != "Relu" || !sole_value(x) {
            continue;
        }
        let Some(&a) = producers.get(&x) else {
            continue;
        };
        let add = &graph.nodes[a];
        if add.op_type != "Add" || !default_domain(add) || add.inputs.len() != 2 {
            continue;
        }
        let (Some(l), Some(r)) = (add.inputs[0], add.inputs[1]) else {
            continue;
        };
        if let Some((c, z)) = residual_of((l, r), &|_| true) {
            fusions.push(Fusion {
                act: i,
                conv: c,
                add: Some((a, z)),
                activation: Some(activation),
            });
        }
    }
    // Conv → Add(other) with no activation after it (NASNet's branch sums, MobileNet's
    // linear bottlenecks): `Z = other`, the identity activation. Group 1 only: the blocked
    // depthwise kernel takes no `Z`.
    // Every node some fusion already rewrites or removes.
    let mut taken: std::collections::HashSet<usize> = fusions
        .iter()
        .flat_map(|f| [f.conv, f.act].into_iter().chain(f.add.map(|(a, _)| a)))
        .collect();
    for (i, node) in graph.nodes.iter().enumerate() {
        let plain_add = node.op_type == "Add"
            && default_domain(node)
            && node.opset >= 7
            && node.attrs.names().next().is_none()
            && node.inputs.len() == 2
            && node.present_outputs().count() == 1;
        if !plain_add || taken.contains(&i) {
            continue;
        }
        let (Some(l), Some(r)) = (node.inputs[0], node.inputs[1]) else {
            continue;
        };
        let free = |c: usize| {
            !taken.contains(&c) && graph.nodes[c].attrs.int("group", 1).is_ok_and(|g| g == 1)
        };
        if let Some((c, z)) = residual_of((l, r), &free) {
            taken.insert(c);
            fusions.push(Fusion {
                act: i,
                conv: c,
                add: Some((i, z)),
                activation: None,
            });
        }
    }
    let mut remove = vec![false; graph.nodes.len()];
    for Fusion {
        act,
        conv,
        add,
        activation,
    } in &fusions
    {
        let mut fused = graph.nodes[*conv].clone();
        fused.op_type = "FusedConv".into();
        fused.domain = DOMAIN.into();
        fused.opset = VERSION;
        if let Some(activation) = activation {
            fused
                .attrs
                .insert("activation", AttrValue::String(activation.name.into()));
            if !activation.params.is_empty() {
                fused.attrs.insert(
                    "activation_params",
                    AttrValue::Floats(activation.params.clone()),
                );
            }
        }
        if let Some((a, z)) = add {
            fused.inputs.resize(3, None);
            fused.inputs.push(Some(*z));
            // The `Add` itself is replaced when it ends the chain.
            remove[*a] = *a != *act;
        }
        fused.declared_inputs = fused.inputs.len();
        fused.outputs = graph.nodes[*act].outputs.clone();
        // At the activation's place: every input of the fused node (Z included) is computed
        // before it, so the node order stays topological.
        graph.nodes[*act] = fused;
        remove[*conv] = true;
    }
    graph.remove_nodes(&remove);
    fusions.len()
}

/// One rewrite: the node that ends the chain (the activation, or the `Add` when none
/// follows), the `Conv` node, the `Add` node and `Z` (for a residual), and the activation's
/// attributes (none: the identity).
struct Fusion {
    act: usize,
    conv: usize,
    add: Option<(usize, ValueId)>,
    activation: Option<Activation>,
}

/// `FusedConv`'s `activation` and `activation_params`.
#[derive(Debug, Clone)]
struct Activation {
    name: &'static str,
    params: Vec<f32>,
}

fn default_domain(node: &Node) -> bool {
    node.domain.is_empty() || node.domain == "ai.onnx"
}

/// A default-domain `Conv` with one output, at most `X, W, B`, `f32` input and no subgraph.
fn is_fusable_conv(graph: &Graph, node: &Node) -> bool {
    node.op_type == "Conv"
        && default_domain(node)
        && node.outputs.len() == 1
        && node.inputs.len() <= 3
        && node.declared_inputs == node.inputs.len()
        && node.subgraphs.is_empty()
        && node
            .inputs
            .first()
            .copied()
            .flatten()
            .is_some_and(|x| graph.value(x).dtype == Some(DType::F32))
}

/// The fused form of an activation node with exactly the attributes (and, for `Clip`,
/// constant scalar bounds) its own kernel accepts; `None` for any other node.
fn activation_of(graph: &Graph, node: &Node) -> Option<Activation> {
    let only = |known: &[&str]| node.attrs.names().all(|n| known.contains(&n));
    let plain = |name: &'static str| {
        (only(&[]) && node.inputs.len() == 1).then(|| Activation {
            name,
            params: Vec::new(),
        })
    };
    let float = |name: &str, default: f32| node.attrs.float(name, default).ok();
    // The activations' kernels start at opset 6 (earlier ones take `consumed_inputs`).
    if node.opset < 6 {
        return None;
    }
    match node.op_type.as_str() {
        "Relu" => plain("Relu"),
        "Sigmoid" => plain("Sigmoid"),
        "Tanh" => plain("Tanh"),
        "HardSwish" => plain("HardSwish"),
        "LeakyRelu" if only(&["alpha"]) && node.inputs.len() == 1 => Some(Activation {
            name: "LeakyRelu",
            params: vec![float("alpha", 0.01)?],
        }),
        "HardSigmoid" if only(&["alpha", "beta"]) && node.inputs.len() == 1 => Some(Activation {
            name: "HardSigmoid",
            params: vec![float("alpha", 0.2)?, float("beta", 0.5)?],
        }),
        "Clip" => clip_bounds(graph, node).map(|(lo, hi)| Activation {
            name: "Clip",
            params: vec![lo, hi],
        }),
        _ => None,
    }
}

/// `Clip`'s bounds: attributes before opset 11 (absent: the f32 range), constant scalar
/// `f32` inputs from 11 (absent: unbounded).
fn clip_bounds(graph: &Graph, node: &Node) -> Option<(f32, f32)> {
    if node.opset < 11 {
        if !node.attrs.names().all(|n| n == "min" || n == "max") || node.inputs.len() != 1 {
            return None;
        }
        let lo = node.attrs.float("min", f32::MIN).ok()?;
        let hi = node.attrs.float("max", f32::MAX).ok()?;
        return Some((lo, hi));
    }
    if node.attrs.names().next().is_some() || node.inputs.len() > 3 {
        return None;
    }
    let bound = |i: usize, unbounded: f32| -> Option<f32> {
        match node.inputs.get(i).copied().flatten() {
            None => Some(unbounded),
            Some(v) => graph.constant_f32_scalar(v),
        }
    };
    Some((bound(1, f32::NEG_INFINITY)?, bound(2, f32::INFINITY)?))
}

/// Both values have the same element type, and their shapes are not known to differ (a rank
/// or a fixed size that differs): when they are equal at run time the sum is fused.
fn may_share_shape(graph: &Graph, a: ValueId, b: ValueId) -> bool {
    let (va, vb) = (graph.value(a), graph.value(b));
    if va.dtype.is_none() || va.dtype != vb.dtype {
        return false;
    }
    let (Some(sa), Some(sb)) = (&va.shape, &vb.shape) else {
        return true;
    };
    sa.len() == sb.len()
        && sa.iter().zip(sb).all(|(da, db)| match (da, db) {
            (Dim::Fixed(x), Dim::Fixed(y)) => x == y,
            _ => true,
        })
}
