//! Folds an inference-mode BatchNormalization into the Conv that feeds it (or into each Conv
//! of a channel `Concat` that feeds it): `W' = W · s`, `B' = (B − mean) · s + bias` with
//! `s = scale / sqrt(var + ε)` per channel.

use ndarray::{ArrayD, Axis};
use spillway_kernels::Tensor;

use crate::graph::{Graph, Node, ValueId, ValueInfo};

/// Folds every Conv → BatchNormalization pair where the Conv output has no other reader, the
/// weights and BN parameters are f32 constants, and BN has a single output (inference mode);
/// and likewise a BatchNormalization of a channel `Concat` of such Convs (NASNet's
/// `final_path_bn` after its two strided paths), each Conv taking its slice of the channels.
#[allow(clippy::needless_range_loop)] // nodes are read and rewritten by index in the same loop
pub fn fold_batchnorm_into_conv(graph: &mut Graph) {
    let producers = graph.producers();
    let uses = graph.use_counts();
    let mut remove = vec![false; graph.nodes.len()];
    for bn_index in 0..graph.nodes.len() {
        let bn = &graph.nodes[bn_index];
        if bn.op_type != "BatchNormalization" || bn.present_outputs().count() != 1 {
            continue;
        }
        if bn.attrs.int("training_mode", 0).unwrap_or(1) != 0 {
            continue;
        }
        let Some(Some(x)) = bn.inputs.first() else {
            continue;
        };
        let Some(&producer) = producers.get(x) else {
            continue;
        };
        let sole_reader = |v: &ValueId| uses[v.index()] == 1 && !graph.outputs.contains(v);
        if !sole_reader(x) {
            continue;
        }
        // The convolutions whose outputs BN normalizes, in channel order.
        let convs: Vec<usize> = match graph.nodes[producer].op_type.as_str() {
            "Conv" => vec![producer],
            "Concat" if channel_concat(&graph.nodes[producer]) => {
                let inputs = &graph.nodes[producer].inputs;
                let convs: Option<Vec<usize>> = inputs
                    .iter()
                    .map(|v| {
                        let v = v.as_ref()?;
                        let &p = producers.get(v)?;
                        (graph.nodes[p].op_type == "Conv" && sole_reader(v)).then_some(p)
                    })
                    .collect();
                match convs {
                    Some(c) if !c.is_empty() => c,
                    _ => continue,
                }
            }
            _ => continue,
        };
        let Some(folds) = folded(graph, bn_index, &convs) else {
            continue;
        };
        let bn_out = graph.nodes[bn_index].outputs[0];
        for (&conv_index, (w, b)) in convs.iter().zip(folds) {
            let conv_name = graph.nodes[conv_index].name.clone();
            let channels = b.len();
            let w_id = graph.add_value(ValueInfo::named(format!("{conv_name}/folded_weight")));
            let b_id = graph.add_value(ValueInfo::named(format!("{conv_name}/folded_bias")));
            graph.constants.insert(w_id, Tensor::from(w));
            graph.constants.insert(
                b_id,
                Tensor::from(
                    ArrayD::from_shape_vec(ndarray::IxDyn(&[channels]), b).expect("length matches"),
                ),
            );
            let conv = &mut graph.nodes[conv_index];
            conv.inputs.resize(3, None);
            // The bias may be new: the kernel must see three declared inputs.
            conv.declared_inputs = 3;
            conv.inputs[1] = Some(w_id);
            conv.inputs[2] = Some(b_id);
        }
        graph.nodes[producer].outputs[0] = bn_out;
        remove[bn_index] = true;
    }
    graph.remove_nodes(&remove);
}

/// A `Concat` along axis 1 (the channels of the convolutions it joins).
fn channel_concat(node: &Node) -> bool {
    node.attrs.int("axis", 0).is_ok_and(|a| a == 1)
        && node.present_outputs().count() == 1
        && node.subgraphs.is_empty()
}

/// The weights and biases of the convolutions `convs` (consecutive slices of the channels of
/// BatchNormalization `bn_index`) with the normalization folded in; `None` unless every
/// weight, bias and BN parameter is an `f32` constant and the channels add up.
fn folded(graph: &Graph, bn_index: usize, convs: &[usize]) -> Option<Vec<(ArrayD<f32>, Vec<f32>)>> {
    let constant = |i: usize, node: &Node| -> Option<ArrayD<f32>> {
        let v = node.inputs.get(i).copied().flatten()?;
        graph
            .constants
            .get(&v)?
            .view::<f32>()
            .ok()
            .map(|a| a.to_owned())
    };
    let bn = &graph.nodes[bn_index];
    let epsilon = bn.attrs.float("epsilon", 1e-5).unwrap_or(1e-5);
    // In f64, then rounded once: the folded bias subtracts two products that nearly cancel
    // when the variance is tiny, and f32 intermediates lose digits there.
    let flat = |a: ArrayD<f32>| a.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    let (scale, bias, mean, var) = (
        flat(constant(1, bn)?),
        flat(constant(2, bn)?),
        flat(constant(3, bn)?),
        flat(constant(4, bn)?),
    );
    let channels = scale.len();
    if [&bias, &mean, &var].iter().any(|a| a.len() != channels) {
        return None;
    }
    let factor: Vec<f64> = scale
        .iter()
        .zip(var.iter())
        .map(|(s, v)| s / (v + f64::from(epsilon)).sqrt())
        .collect();
    let mut first = 0;
    let mut folds = Vec::with_capacity(convs.len());
    for &conv_index in convs {
        let conv = &graph.nodes[conv_index];
        let w = constant(1, conv)?;
        let out_channels = *w.shape().first()?;
        if first + out_channels > channels {
            return None;
        }
        let conv_bias: Vec<f32> = match conv.inputs.get(2).copied().flatten() {
            Some(_) => {
                let b = constant(2, conv)?;
                if b.len() != out_channels {
                    return None;
                }
                b.iter().copied().collect()
            }
            None => vec![0.0; out_channels],
        };
        let mut new_w = w;
        for (c, mut slice) in new_w.axis_iter_mut(Axis(0)).enumerate() {
            slice.mapv_inplace(|x| (f64::from(x) * factor[first + c]) as f32);
        }
        let new_b: Vec<f32> = (0..out_channels)
            .map(|c| {
                let k = first + c;
                ((f64::from(conv_bias[c]) - mean[k]) * factor[k] + bias[k]) as f32
            })
            .collect();
        folds.push((new_w, new_b));
        first += out_channels;
    }
    (first == channels).then_some(folds)
}
