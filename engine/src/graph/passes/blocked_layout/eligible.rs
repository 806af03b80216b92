//! Which nodes and values the blocked kernels take: the convolutions, pools, pads, concats
//! and elementwise ops the layout pass may rewrite, and the channel counts that fill blocks.

use spillway_kernels::DType;
use spillway_kernels::cpu::nn::blocked::{BLOCK, stored_channels};

use crate::graph::{Dim, Graph, Node, ValueId, ValueInfo};

pub(super) fn default_domain(node: &Node) -> bool {
    node.domain.is_empty() || node.domain == "ai.onnx"
}

/// Whether `node` is the default domain's `Relu` (no attributes, one output), which the
/// blocked kernels can fold into what it reads or what reads it.
pub(super) fn plain_relu(node: &Node) -> bool {
    node.op_type == "Relu"
        && default_domain(node)
        && node.attrs.names().next().is_none()
        && node.outputs.len() == 1
}

/// The constant weights of a `Conv` or `FusedConv` whose attributes the blocked kernels know
/// and whose declared inputs are all present, if `node` is one.
fn conv_weights<'g>(graph: &'g Graph, node: &Node) -> Option<&'g spillway_kernels::Tensor> {
    let fused = node.op_type == "FusedConv" && node.domain == "com.microsoft";
    if !(fused || node.op_type == "Conv" && default_domain(node)) {
        return None;
    }
    let mut known = spillway_kernels::cpu::nn::conv::ATTRIBUTES.to_vec();
    if fused {
        known.extend(["activation", "activation_params"]);
    }
    let w = node.inputs.get(1).copied().flatten()?;
    (node.attrs.names().all(|n| known.contains(&n))
        && node.declared_inputs == node.inputs.len()
        && node.outputs.len() == 1)
        .then(|| graph.constants.get(&w))
        .flatten()
        .filter(|w| w.dtype() == DType::F32)
}

/// A 2-D `Conv` or `FusedConv` the blocked kernel runs: group 1, `f32` constant 4-D weights,
/// at most `X, W, B, Z`, attributes it knows.
pub(super) fn blockable_conv(graph: &Graph, node: &Node) -> bool {
    conv_weights(graph, node).is_some_and(|w| w.shape().len() == 4)
        && node.attrs.int("group", 1).is_ok_and(|g| g == 1)
        && node.inputs.len() <= 4
}

/// A depthwise 2-D `Conv` or `FusedConv` the blocked kernel runs: `group` equal to the channel
/// count, which may be blocked ([`paddable`]), `f32` constant `[C, 1, kH, kW]` weights, at
/// most `X, W, B`.
pub(super) fn blockable_depthwise(graph: &Graph, node: &Node) -> bool {
    let weights = conv_weights(graph, node);
    let channels = weights.and_then(|w| match *w.shape() {
        [c, 1, _, _] if paddable(c) => Some(c),
        _ => None,
    });
    let image = node
        .inputs
        .first()
        .copied()
        .flatten()
        .map(|x| graph.value(x));
    let planar = image.is_some_and(|info| {
        info.dtype == Some(DType::F32)
            && matches!(info.shape.as_deref(), Some([_, Dim::Fixed(c), _, _]) if Some(*c) == channels)
    });
    channels.is_some_and(|c| node.attrs.int("group", 1).is_ok_and(|g| g as usize == c))
        && node.inputs.len() <= 3
        && planar
}

/// `Relu`, or `Add` or `Mul` of two `f32` 4-D values with the output's batch and fixed
/// channels, each of whose height and width is the output's or 1 (a squeeze-and-excitation
/// scale is `[N, C, 1, 1]`): on blocked values the same op, broadcasting over the 5-D values,
/// gives the blocked result. Their dims are fixed or proven equal (one symbol is one size: an
/// exported model's `batch`, or a height that shape inference followed from the same image).
pub(super) fn blockable_elementwise(graph: &Graph, node: &Node) -> bool {
    let arity = match node.op_type.as_str() {
        "Relu" => 1,
        "Add" | "Mul" => 2,
        _ => return false,
    };
    let shape = |v: Option<ValueId>| {
        let info = graph.value(v?);
        let s = info.shape.as_deref()?;
        (info.dtype == Some(DType::F32)
            && s.len() == 4
            && matches!(s[1], Dim::Fixed(_))
            && s.iter().all(|d| *d != Dim::Unknown))
        .then_some(s)
    };
    let Some(out) = node.outputs.first().and_then(|&y| shape(y)) else {
        return false;
    };
    // Each input gives the output's batch and channels, and its height and width or 1.
    let fits =
        |s: &[Dim]| s[..2] == out[..2] && (2..4).all(|k| s[k] == out[k] || s[k] == Dim::Fixed(1));
    default_domain(node)
        && node.attrs.names().next().is_none()
        && node.inputs.len() == arity
        && node.inputs.iter().all(|&v| shape(v).is_some_and(fits))
}

/// `[top, left, bottom, right]` and the constant of a `Pad` in constant mode of a 4-D `f32`
/// image's height and width only, its pads (and constant, if given) constant; `None` for any
/// other node.
pub(super) fn spatial_pad(graph: &Graph, node: &Node) -> Option<([i64; 4], f32)> {
    if node.op_type != "Pad"
        || !default_domain(node)
        || node.outputs.len() != 1
        || node.attrs.names().any(|n| n != "mode" && n != "pads")
        || node.attrs.string("mode", "constant").ok()? != "constant"
    {
        return None;
    }
    let x = graph.value(node.inputs.first().copied().flatten()?);
    if x.dtype != Some(DType::F32) || x.shape.as_ref().is_none_or(|s| s.len() != 4) {
        return None;
    }
    let constant = |i: usize| {
        node.inputs
            .get(i)
            .copied()
            .flatten()
            .map(|v| graph.constants.get(&v))
    };
    // Opset 11 moved the pads into input 1, and 18 added the axes (input 3).
    let pads = match node.opset {
        ..11 => node.attrs.opt_ints("pads").ok()??,
        _ => constant(1)??.to_i64_vec().ok()?,
    };
    let value = match constant(2) {
        None => 0.0,
        Some(t) => {
            let t = t?;
            (t.dtype() == DType::F32 && t.len() == 1).then(|| t.to_f64_vec().ok())??[0] as f32
        }
    };
    match (pads.as_slice(), node.inputs.get(3).copied().flatten()) {
        (&[0, 0, top, left, 0, 0, bottom, right], None) => {
            Some(([top, left, bottom, right], value))
        }
        _ => None,
    }
}

/// A 2-D `MaxPool` or `AveragePool` the blocked kernel runs: one output, no dilations.
pub(super) fn plain_pool(node: &Node) -> bool {
    let known = [
        "auto_pad",
        "kernel_shape",
        "pads",
        "strides",
        "ceil_mode",
        "count_include_pad",
        "dilations",
        "storage_order",
    ];
    matches!(node.op_type.as_str(), "MaxPool" | "AveragePool")
        && default_domain(node)
        && node.opset >= 7
        && node.outputs.len() == 1
        && node.inputs.len() == 1
        && node.attrs.names().all(|n| known.contains(&n))
        && node
            .attrs
            .opt_ints("dilations")
            .is_ok_and(|d| d.is_none_or(|d| d.iter().all(|&d| d == 1)))
        && node.attrs.int("storage_order", 0).is_ok_and(|s| s == 0)
        && node
            .attrs
            .opt_ints("kernel_shape")
            .is_ok_and(|k| k.is_some_and(|k| k.len() == 2))
}

/// A `Concat` along the channels of 4-D images.
pub(super) fn channel_concat(node: &Node) -> bool {
    node.op_type == "Concat"
        && default_domain(node)
        && node.attrs.names().all(|n| n == "axis")
        && node.attrs.int("axis", 0).is_ok_and(|a| a == 1 || a == -3)
}

/// `⌈C / 16⌉` for a planar `[N, C, H, W]` value whose fixed `C` fills its blocks well enough
/// ([`paddable`]).
pub(super) fn block_count(info: &ValueInfo) -> Option<usize> {
    match info.shape.as_deref()? {
        [_, Dim::Fixed(c), _, _] if paddable(*c) => Some(c.div_ceil(BLOCK)),
        _ => None,
    }
}

/// True when `c` channels may be stored in blocks: whole ones, or with a last block's
/// padding at most a quarter of `c` (42 channels in 48, 168 in 176; not 24 in 32), which the
/// blocked kernels then compute and move for nothing.
fn paddable(c: usize) -> bool {
    c > 0 && 4 * (stored_channels(c) - c) <= c
}

/// The fixed channel count of a planar `[N, C, H, W]` value.
pub(super) fn channel_count(info: &ValueInfo) -> Option<usize> {
    match info.shape.as_deref()? {
        [_, Dim::Fixed(c), _, _] => Some(*c),
        _ => None,
    }
}

/// The channel count of a planar value whose blocks are padded (not a multiple of 16).
pub(super) fn padded_channels(info: &ValueInfo) -> Option<usize> {
    channel_count(info).filter(|c| c % BLOCK != 0)
}
