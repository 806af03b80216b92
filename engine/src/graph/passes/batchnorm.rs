//! Folds an inference-mode BatchNormalization into the Conv that feeds it:
//! `W' = W · s`, `B' = (B − mean) · s + bias` with `s = scale / sqrt(var + ε)` per channel.

use ndarray::{ArrayD, Axis};
use spillway_kernels::Tensor;

use crate::graph::{Graph, ValueInfo};

/// Folds every Conv → BatchNormalization pair where the Conv output has no other reader, the
/// weights and BN parameters are f32 constants, and BN has a single output (inference mode).
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
        let Some(&conv_index) = producers.get(x) else {
            continue;
        };
        let conv = &graph.nodes[conv_index];
        if conv.op_type != "Conv" || uses[x.index()] != 1 || graph.outputs.contains(x) {
            continue;
        }
        let constant = |i: usize, node: &crate::graph::Node| -> Option<ArrayD<f32>> {
            let v = node.inputs.get(i).copied().flatten()?;
            graph
                .constants
                .get(&v)?
                .view::<f32>()
                .ok()
                .map(|a| a.to_owned())
        };
        let epsilon = bn.attrs.float("epsilon", 1e-5).unwrap_or(1e-5);
        let (Some(w), Some(scale), Some(bias), Some(mean), Some(var)) = (
            constant(1, conv),
            constant(1, bn),
            constant(2, bn),
            constant(3, bn),
            constant(4, bn),
        ) else {
            continue;
        };
        let out_channels = w.shape()[0];
        if [&scale, &bias, &mean, &var]
            .iter()
            .any(|a| a.len() != out_channels)
        {
            continue;
        }
        let conv_bias: Vec<f32> = match conv.inputs.get(2).copied().flatten() {
            Some(_) => match constant(2, conv) {
                Some(b) if b.len() == out_channels => b.iter().copied().collect(),
                _ => continue,
            },
            None => vec![0.0; out_channels],
        };
        // In f64, then rounded once: the folded bias subtracts two products that nearly cancel
        // when the variance is tiny, and f32 intermediates lose digits there.
        let flat = |a: &ArrayD<f32>| a.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
        let (scale, bias, mean, var) = (flat(&scale), flat(&bias), flat(&mean), flat(&var));
        let factor: Vec<f64> = scale
            .iter()
            .zip(var.iter())
            .map(|(s, v)| s / (v + f64::from(epsilon)).sqrt())
            .collect();
        let mut new_w = w;
        for (c, mut slice) in new_w.axis_iter_mut(Axis(0)).enumerate() {
            slice.mapv_inplace(|x| (f64::from(x) * factor[c]) as f32);
        }
        let new_b: Vec<f32> = (0..out_channels)
            .map(|c| ((f64::from(conv_bias[c]) - mean[c]) * factor[c] + bias[c]) as f32)
            .collect();
        let bn_out = bn.outputs[0];
        let conv_name = conv.name.clone();
        let w_id = graph.add_value(ValueInfo::named(format!("{conv_name}/folded_weight")));
        let b_id = graph.add_value(ValueInfo::named(format!("{conv_name}/folded_bias")));
        graph.constants.insert(w_id, Tensor::from(new_w));
        graph.constants.insert(
            b_id,
            Tensor::from(
                ArrayD::from_shape_vec(ndarray::IxDyn(&[out_channels]), new_b)
                    .expect("length matches"),
            ),
        );
        let conv = &mut graph.nodes[conv_index];
        conv.inputs.resize(3, None);
        // The bias may be new: the kernel must see three declared inputs.
        conv.declared_inputs = 3;
        conv.inputs[1] = Some(w_id);
        conv.inputs[2] = Some(b_id);
        conv.outputs[0] = bn_out;
        remove[bn_index] = true;
    }
    let mut i = 0;
    graph.nodes.retain(|_| {
        i += 1;
        !remove[i - 1]
    });
}
