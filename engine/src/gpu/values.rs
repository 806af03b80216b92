//! Every value of one CPU run: the shapes a GPU plan is compiled for, and the reference its
//! outputs are checked against.

use spillway_kernels::Tensor;
use spillway_kernels::cuda::ops::TensorDesc;

use crate::error::{Error, Result};
use crate::exec::build_kernel;
use crate::graph::passes::{fold_constants, remove_dead_nodes};
use crate::graph::{Dim, Graph};

/// Runs `graph` on `inputs` (one per graph input) with the CPU kernels, node by node, and
/// returns every value, indexed by value id (`None` for values no node writes).
pub fn cpu_values(graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
    let mut values: Vec<Option<Tensor>> = vec![None; graph.values.len()];
    for (v, t) in &graph.constants {
        values[v.index()] = Some(t.clone());
    }
    for (v, t) in graph.inputs.iter().zip(inputs) {
        values[v.index()] = Some(t.clone());
    }
    for node in &graph.nodes {
        let kernel = build_kernel(node)?;
        let ins: Vec<Option<&Tensor>> = node.inputs[..node.declared_inputs]
            .iter()
            .map(|v| v.and_then(|v| values[v.index()].as_ref()))
            .collect();
        let outs = kernel.run(&ins).map_err(|cause| Error::Kernel {
            node: node.name.clone(),
            op_type: node.op_type.clone(),
            cause,
        })?;
        for (v, t) in node.outputs.iter().zip(outs) {
            if let Some(v) = v {
                values[v.index()] = Some(t);
            }
        }
    }
    Ok(values)
}

/// The type and shape of each value in `values`.
pub fn descs(values: &[Option<Tensor>]) -> Vec<Option<TensorDesc>> {
    values
        .iter()
        .map(|t| t.as_ref().map(|t| TensorDesc::new(t.dtype(), t.shape())))
        .collect()
}

/// Fixes every value's type and shape to those of one CPU run on `inputs`, then folds what
/// that makes constant (`Shape` of a fixed shape and the arithmetic on it, which exporters
/// emit for padding and reshapes) and drops the nodes left unused. A GPU plan is compiled for
/// fixed shapes, and such nodes have no GPU kernel. Returns every value of the run, which is
/// also a run of the specialized graph (folding keeps the value ids and computes the same
/// values; the dropped nodes' outputs are simply no longer read).
pub fn specialize(graph: &mut Graph, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
    let values = cpu_values(graph, inputs)?;
    for (info, t) in graph.values.iter_mut().zip(&values) {
        if let Some(t) = t {
            info.dtype = Some(t.dtype());
            info.shape = Some(t.shape().iter().map(|&d| Dim::Fixed(d)).collect());
        }
    }
    fold_constants(graph)?;
    remove_dead_nodes(graph);
    Ok(values)
}
