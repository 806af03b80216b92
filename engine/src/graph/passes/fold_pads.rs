//! Folds a `Pad` of zeros on the spatial axes into the `Conv` or `AveragePool` that reads it:
//! the reader's own `pads` grow by the `Pad`'s and it reads the unpadded image, so the padded
//! copy is never made. timm's NASNet pads this way before each of its stride-2 separable
//! convolutions and pools ("same" padding computed at run time, constant once folded): 28
//! copies a run, of up to 4.6 MB each.
//!
//! - `Conv` (`auto_pad` `NOTSET`): the zeros of the `Pad` and those of the convolution's own
//!   padding contribute nothing either way.
//! - `AveragePool` (`auto_pad` `NOTSET`, `ceil_mode` 0): the `Pad`'s zeros are cells of the
//!   windows it averages and count in the divisor, so the pool must count its padding
//!   (`count_include_pad` 1). That is exact when it counted it already, or when it had no
//!   padding of its own.
//!
//! `MaxPool` is left alone: its padding is −∞, not zero. A `Pad` keeps the readers it cannot
//! fold into; once it has none it is removed as dead.

use std::collections::HashMap;

use spillway_kernels::AttrValue;

use crate::graph::{Graph, Node, ValueId};

/// Folds every eligible `Pad → Conv | AveragePool`; returns how many readers it rewrote.
pub fn fold_pads(graph: &mut Graph) -> usize {
    // Each foldable Pad's output → its unpadded input and its spatial padding.
    let pads: HashMap<ValueId, (ValueId, Vec<i64>)> = graph
        .nodes
        .iter()
        .filter_map(|pad| {
            let spatial = spatial_zero_pads(graph, pad)?;
            let (Some(Some(data)), Some(Some(padded))) = (pad.inputs.first(), pad.outputs.first())
            else {
                return None;
            };
            Some((*padded, (*data, spatial)))
        })
        .collect();
    let mut folded = 0;
    for reader in &mut graph.nodes {
        let Some(Some(padded)) = reader.inputs.first().copied() else {
            continue;
        };
        let Some((data, spatial)) = pads.get(&padded) else {
            continue;
        };
        let Some(sum) = folded_pads(reader, padded, spatial) else {
            continue;
        };
        reader.inputs[0] = Some(*data);
        reader.attrs.insert("pads", AttrValue::Ints(sum));
        if reader.op_type == "AveragePool" {
            reader.attrs.insert("count_include_pad", AttrValue::Int(1));
        }
        folded += 1;
    }
    folded
}

/// The padding of a `Pad` node that adds zeros on the spatial axes only (axes 2 and up of an
/// image of rank 3 or more), as ONNX's `pads` of those axes: begins, then ends. `None` for any
/// other `Pad` (another mode or value, axes given, padding not known at load, negative, or
/// on the batch or channel axis) and any other node.
fn spatial_zero_pads(graph: &Graph, pad: &Node) -> Option<Vec<i64>> {
    if pad.op_type != "Pad" || !pad.domain.is_empty() || pad.outputs.len() != 1 {
        return None;
    }
    if pad.attrs.string("mode", "constant").ok()? != "constant" {
        return None;
    }
    let constant = |i: usize| {
        let v = pad.inputs.get(i).copied().flatten()?;
        graph.constants.get(&v)
    };
    let pads = match pad.opset < 11 {
        true => {
            let value = pad.attrs.float("value", 0.0).ok()?;
            if value != 0.0 || pad.inputs.len() != 1 {
                return None;
            }
            pad.attrs.ints("pads").ok()?
        }
        false => {
            let value_is_zero = match pad.inputs.get(2).copied().flatten() {
                None => true,
                Some(_) => constant(2)?.to_f64_vec().ok()?.iter().all(|&v| v == 0.0),
            };
            let no_axes = pad.inputs.get(3).copied().flatten().is_none();
            if !value_is_zero || !no_axes || pad.inputs.len() > 4 {
                return None;
            }
            constant(1)?.to_i64_vec().ok()?
        }
    };
    let rank = pads.len() / 2;
    // The pads come from the model: a list of odd length or of a rank under 3 is no image's.
    if rank < 3 || pads.len() != 2 * rank {
        return None;
    }
    let keeps = |axis: usize| pads[axis] == 0 && pads[rank + axis] == 0;
    let spatial = [&pads[2..rank], &pads[rank + 2..]].concat();
    (keeps(0) && keeps(1) && spatial.iter().all(|&p| p >= 0)).then_some(spatial)
}

/// The `pads` `reader` takes instead of reading `padded`, a `Pad` of `spatial` zeros (begins,
/// then ends), when it reads it as its image and can take them; `None` otherwise.
fn folded_pads(reader: &Node, padded: ValueId, spatial: &[i64]) -> Option<Vec<i64>> {
    if !reader.domain.is_empty() || reader.inputs.first() != Some(&Some(padded)) {
        return None;
    }
    if reader.inputs[1..].contains(&Some(padded)) || reader.outputs.len() != 1 {
        return None;
    }
    let own = reader
        .attrs
        .opt_ints("pads")
        .ok()?
        .unwrap_or_else(|| vec![0; spatial.len()]);
    let explicit = reader.attrs.string("auto_pad", "NOTSET").ok()? == "NOTSET";
    let fits = match reader.op_type.as_str() {
        "Conv" => true,
        "AveragePool" => {
            reader.attrs.int("ceil_mode", 0).ok()? == 0
                && (reader.attrs.int("count_include_pad", 0).ok()? == 1
                    || own.iter().all(|&p| p == 0))
        }
        _ => false,
    };
    (fits && explicit && own.len() == spatial.len())
        .then(|| own.iter().zip(spatial).map(|(a, b)| a + b).collect())
}
