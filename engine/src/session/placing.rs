//! From a graph and devices to a running engine: profile (or load a cost model), place with a
//! policy, compile the plan, start the workers. Also the placement report.

use spillway_kernels::{DType, Tensor};
use spillway_placement::{Policy, Schedule, SimResult, place, simulate};

use super::builder::SessionBuilder;
use crate::device::Devices;
use crate::error::{Error, Result};
use crate::exec::{ParallelExecutor, SequentialPlan};
use crate::graph::{Graph, ValueType};
use crate::plan;
use crate::profile::{self, CostModel, ProfileOptions};
use crate::value::{Sequence, Value};

/// What runs a session's inferences.
#[derive(Debug)]
// One per session.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Engine {
    /// One CPU lane, nodes in order, on the caller's thread.
    Sequential(SequentialPlan),
    /// Several devices or lanes, on worker threads.
    Parallel {
        executor: ParallelExecutor,
        report: PlacementReport,
    },
}

/// Where each node runs and what the simulator predicts.
#[derive(Debug, Clone)]
pub struct PlacementReport {
    /// The policy that made the schedule.
    pub policy: String,
    /// Per node: (node name, op type, device, lane).
    pub nodes: Vec<(String, String, String, usize)>,
    /// Predicted makespan, µs.
    pub predicted_makespan_us: f64,
    /// Lower bound on the makespan, µs.
    pub lower_bound_us: f64,
    /// The cost model the schedule was made from.
    pub cost_model: CostModel,
    /// The schedule.
    pub schedule: Schedule,
    /// The simulation of the schedule.
    pub simulation: SimResult,
}

impl PlacementReport {
    /// The schedule drawn as a Gantt chart (SVG).
    pub fn gantt_svg(&self) -> String {
        spillway_placement::gantt::gantt_svg(
            &self.cost_model.graph,
            &self.cost_model.topology,
            &self.simulation,
        )
    }
}

impl std::fmt::Display for PlacementReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "policy {}: predicted makespan {:.1} µs (lower bound {:.1} µs)",
            self.policy, self.predicted_makespan_us, self.lower_bound_us
        )?;
        for (name, op, device, lane) in &self.nodes {
            writeln!(f, "  {name:<40} {op:<20} {device}/{lane}")?;
        }
        Ok(())
    }
}

/// Seeded inputs for profiling: declared shapes with symbolic dims from `shapes` or 1. A
/// sequence input gets one element of its declared element shape; an optional, its element.
fn profile_inputs(graph: &Graph, shapes: &[(String, Vec<usize>)]) -> Result<Vec<Value>> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    graph
        .inputs
        .iter()
        .map(|&v| {
            let info = graph.value(v);
            let given = shapes
                .iter()
                .find(|(n, _)| *n == info.name)
                .map(|(_, s)| s.as_slice());
            sample(&info.name, &info.value_type(), given, &mut state)
        })
        .collect()
}

fn sample(name: &str, ty: &ValueType, given: Option<&[usize]>, state: &mut u64) -> Result<Value> {
    match ty {
        ValueType::Tensor { dtype, shape } => {
            let shape: Vec<usize> = match (given, shape) {
                (Some(s), _) => s.to_vec(),
                (None, Some(s)) => s.iter().map(|d| d.fixed().unwrap_or(1)).collect(),
                (None, None) => {
                    return Err(Error::InvalidModel(format!(
                        "input '{name}' has no declared shape: give a profile shape"
                    )));
                }
            };
            let n: usize = shape.iter().product();
            let dtype = dtype.unwrap_or(DType::F32);
            let t = if dtype == DType::F32 {
                let data = (0..n)
                    .map(|_| {
                        *state ^= *state << 13;
                        *state ^= *state >> 7;
                        *state ^= *state << 17;
                        ((*state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
                    })
                    .collect();
                Tensor::from_shape_vec(&shape, data).map_err(|e| Error::Internal(e.to_string()))?
            } else {
                Tensor::zeros(dtype, &shape)
            };
            Ok(Value::Tensor(t))
        }
        ValueType::Sequence(elem) => {
            let Value::Tensor(t) = sample(name, elem, given, state)? else {
                return Err(Error::InvalidModel(format!(
                    "input '{name}': only sequences of tensors are supported"
                )));
            };
            let seq =
                Sequence::new(t.dtype(), vec![t]).map_err(|e| Error::Internal(e.to_string()))?;
            Ok(Value::Sequence(seq))
        }
        ValueType::Optional(elem) => Ok(Value::some(sample(name, elem, given, state)?)),
    }
}

/// Checks lanes × intra-op threads against the cores; returns the intra-op threads per lane.
fn thread_budget(builder: &SessionBuilder, devices: &Devices) -> Result<usize> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let lanes = devices.total_lanes();
    let intra = builder
        .intra_op_threads
        .unwrap_or_else(|| devices.threads_per_lane());
    if lanes * intra > cores
        && !builder.allow_oversubscription
        && builder.intra_op_threads.is_some()
    {
        return Err(Error::Config(format!(
            "{lanes} lanes × {intra} intra-op threads exceed the {cores} cores; lower them or allow oversubscription"
        )));
    }
    if lanes > cores && !builder.allow_oversubscription {
        tracing::warn!(
            lanes,
            cores,
            "more worker lanes than cores: lanes will share cores (each with one intra-op thread)"
        );
    }
    Ok(intra)
}

/// Profiles (or loads the cost model), places, compiles and starts the workers.
pub(crate) fn build(
    builder: &SessionBuilder,
    graph: &Graph,
    devices: &Devices,
    model_hash: u64,
) -> Result<Engine> {
    let intra = thread_budget(builder, devices)?;
    let inputs = profile_inputs(graph, &builder.profile_shapes)?;
    let cost_model = match &builder.cost_model {
        Some(path) => CostModel::load(path)?,
        None => {
            // The cache key: tensor shapes (the kinds of a model's inputs are fixed).
            let shapes: Vec<Vec<usize>> = inputs
                .iter()
                .map(|v| v.as_tensor().map_or_else(Vec::new, |t| t.shape().to_vec()))
                .collect();
            let options = ProfileOptions {
                intra_op_threads: Some(intra),
                ..builder.profile_options
            };
            let cache = profile::cache_path(model_hash, graph, devices, &shapes, intra);
            match CostModel::load(&cache)
                .ok()
                .filter(|_| builder.use_profile_cache && model_hash != 0)
            {
                Some(m) => m,
                None => {
                    let m =
                        profile::profile_values(graph, devices, &inputs, options, &mut |_, _| {})?;
                    if builder.use_profile_cache && model_hash != 0 {
                        m.save(&cache)?;
                    }
                    m
                }
            }
        }
    };
    if cost_model.graph.ops.len() != graph.nodes.len()
        || cost_model.topology.devices.len() != devices.specs().len()
    {
        return Err(Error::Config(format!(
            "the cost model describes {} operators on {} devices; this session has {} nodes on {} devices",
            cost_model.graph.ops.len(),
            cost_model.topology.devices.len(),
            graph.nodes.len(),
            devices.specs().len()
        )));
    }
    let policy = builder.placement.unwrap_or(Policy::Auto);
    let options = builder.placement_options.clone().unwrap_or_default();
    let _span = tracing::info_span!("place", ?policy).entered();
    let schedule = place(policy, &cost_model.graph, &cost_model.topology, &options)
        .map_err(|e| Error::Placement(format!("{policy:?}: {e}")))?;
    let simulation = simulate(&cost_model.graph, &cost_model.topology, &schedule)
        .map_err(|e| Error::Placement(e.to_string()))?;
    drop(_span);
    let plan = {
        let _span = tracing::info_span!("compile").entered();
        plan::compile(graph, &schedule, devices)?
    };
    let names: Vec<String> = devices
        .specs()
        .iter()
        .map(|s| s.device.to_string())
        .collect();
    let report = PlacementReport {
        policy: if schedule.policy.is_empty() {
            format!("{policy:?}")
        } else {
            schedule.policy.clone()
        },
        nodes: graph
            .nodes
            .iter()
            .zip(&schedule.ops)
            .map(|(n, p)| {
                (
                    n.name.clone(),
                    n.op_type.clone(),
                    names[p.device].clone(),
                    p.stream,
                )
            })
            .collect(),
        predicted_makespan_us: simulation.makespan,
        lower_bound_us: simulation.lower_bound,
        cost_model,
        schedule,
        simulation,
    };
    let executor = ParallelExecutor::start(plan, devices.specs().len(), intra, builder.queue)?;
    Ok(Engine::Parallel { executor, report })
}
