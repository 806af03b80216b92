//! Every value of one CPU run: the shapes a GPU plan is compiled for, and the reference its
//! outputs are checked against.

use spillway_kernels::Tensor;
use spillway_kernels::cuda::ops::TensorDesc;

use crate::error::Result;
use crate::graph::Graph;
use crate::value::Value;

/// Runs `graph` on `inputs` (one per graph input) with the CPU kernels, node by node, and
/// returns every value, indexed by value id (`None` for values no node writes).
#[cfg(feature = "internals")]
pub fn cpu_values(graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
    use crate::error::Error;
    use crate::exec::build_kernel;
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

/// Fixes `graph` to the shapes of `inputs` (see [`crate::hybrid::specialize`]: every shape that
/// follows from the inputs' is fixed, the shape arithmetic on them folded, the nodes left unused
/// dropped) and returns every tensor of that CPU run, indexed by value id. A GPU plan is
/// compiled for fixed shapes, and the folded nodes have no GPU kernel.
pub fn specialize(graph: &mut Graph, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
    let inputs: Vec<Value> = inputs.iter().cloned().map(Value::Tensor).collect();
    let (values, _) = crate::hybrid::specialize(graph, &inputs)?;
    Ok(values
        .into_iter()
        .map(|v| match v {
            Some(Value::Tensor(t)) => Some(t),
            _ => None,
        })
        .collect())
}
