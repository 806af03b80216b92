//! One inference on the host CPU and a device together (SIR+ §6): the graph is fixed to the
//! session's input shapes, each node goes to the host or the device, the nodes are split into
//! [`Segment`]s of one side each, and a [`HybridPlan`] runs the device's segments beside the
//! host's. Nodes after a data-dependent shape (what follows `NonZero` or `NonMaxSuppression`
//! in a detection model) may run on the device when their shapes follow from their input
//! shapes, in segments compiled per shape ([`ShapeKeyedSegment`]); see [`FixedValues`].
//!
//! The device segments of a CUDA session are captured GPU plans (`gpu::HybridEngine`);
//! [`host_stand_in`] runs every segment on the host, which is how the splitting and the two
//! threads are tested without a GPU.

mod fixed_shapes;
mod kept;
mod plan;
mod segments;
mod shape_cache;
#[cfg(feature = "internals")]
mod stand_in;
#[cfg(test)]
mod test_graphs;

pub use fixed_shapes::{FixedValues, shapes_follow_input_shapes};
pub use kept::{KeptValue, SegmentValue, all_on_host, hosted};
pub use plan::{HostSegment, HybridPlan, SegmentWork};
pub use segments::{Side, partition, segment_graph};
pub use shape_cache::{SegmentCompiler, ShapeKeyedSegment};
#[cfg(feature = "internals")]
pub use shape_cache::ShapeStats;
#[cfg(feature = "internals")]
pub use {plan::PlannedSegment, segments::Segment, stand_in::{StandIn, host_stand_in}};

use crate::error::{Error, Result};
use crate::exec::SequentialPlan;
use crate::graph::passes::{fold_constants, remove_dead_nodes};
use crate::graph::{Dim, Graph, ValueId};
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

/// `graph` with the tensors `values` (indexed by value id) holds for `ids` as constants: what
/// a device plan compiled for those contents sees (shape arithmetic, see [`FixedValues`]).
pub fn with_constants(
    graph: &Graph,
    ids: impl IntoIterator<Item = ValueId>,
    values: &[Option<Value>],
) -> Graph {
    let mut with = graph.clone();
    for v in ids {
        if let Some(Some(Value::Tensor(t))) = values.get(v.index()) {
            with.constants.insert(v, t.clone());
        }
    }
    with
}

/// The shape of each tensor among `inputs` (`None` for other values).
pub fn input_shapes(inputs: &[Value]) -> Vec<Option<Vec<usize>>> {
    inputs
        .iter()
        .map(|v| v.as_tensor().map(|t| t.shape().to_vec()))
        .collect()
}

/// `graph` split by `sides`: host segments on the CPU kernels, device segments compiled per
/// shape ([`ShapeKeyedSegment`]) by the compilers `compiler` makes, first for the shapes of
/// `inputs` (one per graph input), whose run gave `values` (indexed by value id, as
/// [`specialize`] returns them).
pub fn compile_split(
    graph: &Graph,
    sides: &[Side],
    inputs: &[Value],
    values: &[Option<Value>],
    compiler: &dyn Fn() -> Box<dyn SegmentCompiler>,
) -> Result<HybridPlan> {
    let fixed = FixedValues::of(graph);
    let segments = partition(graph, sides)
        .into_iter()
        .map(|s| {
            let segment = segment_graph(graph, &s);
            let work: Box<dyn SegmentWork> = match s.side {
                Side::Host => Box::new(HostSegment::compile(&segment)?),
                Side::Device => {
                    let first = s
                        .inputs
                        .iter()
                        .map(|v| {
                            values.get(v.index()).cloned().flatten().ok_or_else(|| {
                                Error::Internal(format!(
                                    "device segment input '{}' has no value",
                                    graph.name(*v)
                                ))
                            })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    let by_content = s
                        .inputs
                        .iter()
                        .map(|v| fixed.shape_arithmetic[v.index()])
                        .collect();
                    Box::new(ShapeKeyedSegment::new(
                        segment,
                        by_content,
                        compiler(),
                        &first,
                        values,
                    )?)
                }
            };
            Ok((s, work))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(HybridPlan::new(graph, segments, input_shapes(inputs)))
}
