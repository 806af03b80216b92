//! Fuses the QDQ pattern `DequantizeLinear → Conv → QuantizeLinear` into one `QLinearConv`
//! and `DequantizeLinear → MatMul → QuantizeLinear` into one `QLinearMatMul`, as ONNX
//! Runtime's QDQ selectors do: the product is computed in integers and rounded once, instead of
//! dequantizing, computing in float and quantizing again (a result may then differ by one
//! quantization step, as ORT's does from the unfused graph).
//!
//! Matched: the input and weight each made by a `DequantizeLinear` of uint8 or int8 with
//! constant scale and zero point (the input's one value; the weight's one value or one per
//! output channel along axis 0 for `Conv`, one value for `MatMul`; the weight itself constant),
//! an optional `Conv` bias made by a `DequantizeLinear` of a constant int32 with zero point 0
//! whose scale is the input's scale times the weight's (so the int32 values are the bias in
//! accumulator units), the product read only by a `QuantizeLinear` to uint8 or int8 with
//! constant one-value scale and zero point, and no blocked or non-default axis. The fused
//! node takes the `Conv`'s (or `MatMul`'s) name and attributes and the `QuantizeLinear`'s
//! place and output; the `DequantizeLinear`s left unread are removed with the dead nodes.
//!
//! It must run before constant folding, which would otherwise turn the weights'
//! `DequantizeLinear`s into float constants.

use super::matching::{ChainFusion, fuse_chains, output_of, sole_readers};
use crate::graph::{Graph, Node, ValueId};
use spillway_kernels::{DType, Tensor};

/// Fuses every matched chain; returns how many `QLinearConv` and `QLinearMatMul` it made.
pub fn fuse_qdq(graph: &mut Graph) -> usize {
    let producers = graph.producers();
    let sole = sole_readers(graph);
    fuse_chains(graph, |graph, i| {
        let node = &graph.nodes[i];
        let conv = match (node.op_type.as_str(), default_domain(node)) {
            ("Conv", true) => true,
            ("MatMul", true) => false,
            _ => return None,
        };
        let y = output_of(node)?;
        let q = sole[y.index()]?;
        let qn = &graph.nodes[q];
        let (ys, yz) = quantize_params(graph, qn)?;
        let dq = |v: Option<ValueId>| -> Option<Dq> {
            let p = *producers.get(&v?)?;
            dequantize(graph, &graph.nodes[p])
        };
        let x = dq(node.inputs.first().copied().flatten())?;
        let w = dq(node.inputs.get(1).copied().flatten())?;
        let (xs, ws) = (
            graph.constants.get(&x.scale)?,
            graph.constants.get(&w.scale)?,
        );
        if xs.len() != 1 || !graph.constants.contains_key(&w.data) {
            return None;
        }
        let w_tensor = graph.constants.get(&w.data)?;
        let channels = *w_tensor.shape().first()?;
        let per_channel = conv && ws.len() == channels && w.axis == 0;
        if ws.len() != 1 && !per_channel {
            return None;
        }
        let mut inputs = vec![
            x.data,
            x.scale,
            x.zero_point?,
            w.data,
            w.scale,
            w.zero_point?,
            ys,
            yz,
        ];
        if conv && let Some(Some(b)) = node.inputs.get(2) {
            let bias = dq(Some(*b))?;
            let bt = graph.constants.get(&bias.data)?;
            let bz = bias.zero_point.and_then(|z| graph.constants.get(&z));
            let zero_bias_zp =
                bz.is_none_or(|z| z.to_i64_vec().is_ok_and(|v| v.iter().all(|&x| x == 0)));
            let bs = graph.constants.get(&bias.scale)?;
            if bt.dtype() != DType::I32 || !zero_bias_zp || !bias_scale_fits(xs, ws, bs) {
                return None;
            }
            inputs.push(bias.data);
        }
        if !conv && node.inputs.len() != 2 {
            return None;
        }
        Some(ChainFusion {
            from: i,
            op_type: if conv { "QLinearConv" } else { "QLinearMatMul" },
            domain: "",
            opset: node.opset.max(10),
            attrs: node.attrs.clone(),
            inputs,
            nodes: vec![i, q],
            last: q,
        })
    })
}

fn default_domain(node: &Node) -> bool {
    node.domain.is_empty() || node.domain == "ai.onnx"
}

/// A `DequantizeLinear`'s operands.
struct Dq {
    data: ValueId,
    scale: ValueId,
    zero_point: Option<ValueId>,
    axis: i64,
}

/// The operands of a default-axis, unblocked `DequantizeLinear` of uint8, int8 or int32 with
/// constant `f32` scale and zero point.
fn dequantize(graph: &Graph, node: &Node) -> Option<Dq> {
    if node.op_type != "DequantizeLinear" || !default_domain(node) {
        return None;
    }
    if node.attrs.int("block_size", 0).ok()? != 0 || node.attrs.int("output_dtype", 0).ok()? != 0 {
        return None;
    }
    let data = node.inputs.first().copied().flatten()?;
    let scale = node.inputs.get(1).copied().flatten()?;
    let zero_point = node.inputs.get(2).copied().flatten();
    let dtype = graph.value(data).dtype?;
    let s = graph.constants.get(&scale)?;
    if !matches!(dtype, DType::U8 | DType::I8 | DType::I32) || s.dtype() != DType::F32 {
        return None;
    }
    if let Some(z) = zero_point {
        let z = graph.constants.get(&z)?;
        if z.len() != s.len() || z.dtype() != dtype {
            return None;
        }
    }
    Some(Dq {
        data,
        scale,
        zero_point,
        axis: node.attrs.int("axis", 1).ok()?,
    })
}

/// A one-value `QuantizeLinear` to uint8 or int8: its scale and zero point.
fn quantize_params(graph: &Graph, node: &Node) -> Option<(ValueId, ValueId)> {
    if node.op_type != "QuantizeLinear" || !default_domain(node) {
        return None;
    }
    let scale = node.inputs.get(1).copied().flatten()?;
    let zp = node.inputs.get(2).copied().flatten()?;
    let (s, z) = (graph.constants.get(&scale)?, graph.constants.get(&zp)?);
    let ok = s.len() == 1
        && z.len() == 1
        && s.dtype() == DType::F32
        && matches!(z.dtype(), DType::U8 | DType::I8)
        && node.attrs.int("block_size", 0).ok()? == 0;
    ok.then_some((scale, zp))
}

/// Whether the bias scale is the input scale times the weight scale (per channel), as
/// `onnxruntime.quantization` writes it: then the int32 bias is in accumulator units.
fn bias_scale_fits(xs: &Tensor, ws: &Tensor, bs: &Tensor) -> bool {
    let (Ok(x), Ok(w), Ok(b)) = (xs.to_f64_vec(), ws.to_f64_vec(), bs.to_f64_vec()) else {
        return false;
    };
    let (x, w_at) = (x[0] as f32, |i: usize| {
        w[if w.len() == 1 { 0 } else { i }] as f32
    });
    b.len() == w.len().max(1)
        && b.iter().enumerate().all(|(i, &bv)| {
            let want = x * w_at(i);
            (bv as f32 - want).abs() <= 1e-6 * want.abs()
        })
}
