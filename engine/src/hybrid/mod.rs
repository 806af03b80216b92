//! One inference on the host CPU and a device together (SIR+ §6): the graph is fixed to the
//! session's input shapes, each node goes to the host or the device, the nodes are split into
//! [`Segment`]s of one side each, and a [`HybridPlan`] runs the device's segments beside the
//! host's. Nodes whose shapes depend on data (what follows `NonZero` or `NonMaxSuppression` in
//! a detection model) always stay on the host; see [`FixedValues`].
//!
//! The device segments of a CUDA session are captured GPU plans (`gpu::HybridEngine`);
//! [`host_stand_in`] runs every segment on the host, which is how the splitting and the two
//! threads are tested without a GPU.

mod fixed_shapes;
mod plan;
mod segments;
#[cfg(test)]
mod test_graphs;

pub use fixed_shapes::FixedValues;
pub use plan::{HostSegment, HybridPlan, PlannedSegment, SegmentWork};
pub use segments::{Segment, Side, partition, segment_graph};

use crate::error::Result;
use crate::exec::SequentialPlan;
use crate::graph::passes::{fold_constants, remove_dead_nodes};
use crate::graph::{Dim, Graph};
use crate::value::Value;

/// Fixes `graph` to the shapes of `inputs` (one per graph input): runs it once on the CPU,
/// gives every value whose shape the input shapes fix that shape, folds what that makes
/// constant (`Shape` of a fixed shape and the arithmetic on it) and drops the nodes left
/// unused. Returns every value of the run, constants included (indexed by value id; folding
/// keeps the ids and the values), and the analysis of the specialized graph.
pub fn specialize(
    graph: &mut Graph,
    inputs: &[Value],
) -> Result<(Vec<Option<Value>>, FixedValues)> {
    let bound = graph
        .inputs
        .iter()
        .copied()
        .zip(inputs.iter().cloned())
        .collect();
    let mut values = SequentialPlan::compile(graph)?.run_keeping_values(bound)?;
    for (v, t) in &graph.constants {
        values[v.index()] = Some(Value::Tensor(t.clone()));
    }
    let fixed = FixedValues::of(graph);
    for ((info, value), &shape_fixed) in graph.values.iter_mut().zip(&values).zip(&fixed.shape) {
        if let (true, Some(Value::Tensor(t))) = (shape_fixed, value) {
            info.dtype = Some(t.dtype());
            info.shape = Some(t.shape().iter().map(|&d| Dim::Fixed(d)).collect());
        }
    }
    fold_constants(graph)?;
    remove_dead_nodes(graph);
    let fixed = FixedValues::of(graph);
    Ok((values, fixed))
}

/// The shape of each tensor among `inputs` (`None` for other values).
pub fn input_shapes(inputs: &[Value]) -> Vec<Option<Vec<usize>>> {
    inputs
        .iter()
        .map(|v| v.as_tensor().map(|t| t.shape().to_vec()))
        .collect()
}

/// A test instrument: `graph` split by `sides` with every segment, device ones included, run
/// on the host. Checks the splitting and the two threads against a plain run.
pub fn host_stand_in(
    graph: &Graph,
    sides: &[Side],
    input_shapes: Vec<Option<Vec<usize>>>,
) -> Result<HybridPlan> {
    let segments = partition(graph, sides)
        .into_iter()
        .map(|s| {
            let work: Box<dyn SegmentWork> =
                Box::new(HostSegment::compile(&segment_graph(graph, &s))?);
            Ok((s, work))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(HybridPlan::new(graph, segments, input_shapes))
}
