//! From a graph and devices to a running engine: profile (or load a cost model), place with a
//! policy, compile the plan, start the workers; the report of the placement (`report.rs`).

use spillway_kernels::{DType, Tensor};
use spillway_placement::{Policy, place, simulate};

use super::builder::SessionBuilder;
use super::lane_choice::{OneLane, Race};
use super::report::PlacementReport;
use crate::device::Devices;
use crate::error::{Error, Result};
use crate::exec::run_site::RunSite;
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
    /// One CPU lane, nodes in order, on the kernel pool or the calling thread, whichever its
    /// runs showed faster (`site`); with a report when `Auto` chose it over several CPU lanes.
    Sequential {
        plan: SequentialPlan,
        report: Option<PlacementReport>,
        site: RunSite,
    },
    /// Several devices or lanes, on worker threads.
    Parallel {
        executor: ParallelExecutor,
        report: PlacementReport,
    },
    /// Every node on one GPU, on the streams its policy chose.
    #[cfg(feature = "cuda")]
    Gpu {
        engine: crate::gpu::GpuEngine,
        report: PlacementReport,
    },
    /// The nodes split between the CPU and one GPU.
    #[cfg(feature = "cuda")]
    Hybrid {
        engine: crate::gpu::HybridEngine,
        report: PlacementReport,
    },
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
                // Unknown rank: one element; nodes that refuse it are priced by estimate.
                (None, None) => {
                    tracing::warn!(
                        input = name,
                        "the input has no declared shape: profiled as one element (give a profile shape for a better placement)"
                    );
                    vec![1]
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
        // A sequence of unknown element shape: empty.
        ValueType::Sequence(elem) if given.is_none() && !has_shape(elem) => {
            let dtype = match elem.as_ref() {
                ValueType::Tensor { dtype, .. } => dtype.unwrap_or(DType::F32),
                _ => DType::F32,
            };
            let seq =
                Sequence::new(dtype, Vec::new()).map_err(|e| Error::Internal(e.to_string()))?;
            Ok(Value::Sequence(seq))
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

/// Whether a tensor type declares its shape.
fn has_shape(ty: &ValueType) -> bool {
    matches!(ty, ValueType::Tensor { shape: Some(_), .. })
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
        None => measure(builder, graph, devices, &inputs, intra, model_hash)?,
    };
    check_cost_model(&cost_model, graph, devices)?;
    let policy = builder.placement.unwrap_or(Policy::Auto);
    let options = builder.placement_options.clone().unwrap_or_default();
    let _span = tracing::info_span!("place", ?policy).entered();
    let schedule = place(policy, &cost_model.graph, &cost_model.topology, &options)
        .map_err(|e| Error::Placement(format!("{policy:?}: {e}")))?;
    let simulation = simulate(&cost_model.graph, &cost_model.topology, &schedule)
        .map_err(|e| Error::Placement(e.to_string()))?;
    drop(_span);
    // `Auto` on CPU lanes alone also weighs one lane with every core (`lane_choice.rs`).
    let one_lane = match policy {
        Policy::Auto => OneLane::candidate(builder, graph, devices, &inputs, model_hash)?,
        _ => None,
    };
    let lanes_makespan = simulation.makespan;
    let one_lane = match one_lane {
        Some(one) if !one.lanes_predicted_faster(lanes_makespan) => {
            let label = one.label(devices, lanes_makespan, None);
            return Ok(one.into_engine(graph, label));
        }
        lanes_worth_timing => lanes_worth_timing,
    };
    let plan = {
        let _span = tracing::info_span!("compile").entered();
        plan::compile(graph, &schedule, devices)?
    };
    let executor = ParallelExecutor::start(
        plan,
        devices.specs().len(),
        intra,
        builder.queue,
        builder.threads.pin,
    )?;
    let mut label = if schedule.policy.is_empty() {
        format!("{policy:?}")
    } else {
        schedule.policy.clone()
    };
    if let Some(one) = one_lane {
        match Race::run(&one.plan, &executor, graph, &inputs, builder.threads) {
            Ok(race) if !race.lanes_faster() => {
                let label = one.label(devices, lanes_makespan, Some(&race));
                return Ok(one.into_engine(graph, label));
            }
            Ok(race) => {
                label = format!(
                    "{label} ({}; one lane with every core {})",
                    race.describe(devices),
                    one.predicted(devices, lanes_makespan)
                );
            }
            // The seeded inputs do not suit the model: the prediction decides.
            Err(e) => {
                label = format!(
                    "{label} (not raced: the profile inputs fail: {e}; one lane with every core {})",
                    one.predicted(devices, lanes_makespan)
                );
            }
        }
    }
    let report = PlacementReport::new(label, graph, devices, cost_model, schedule, simulation);
    Ok(Engine::Parallel { executor, report })
}

/// Profiles `graph` on `devices` with `intra` threads per lane, through the profile cache.
pub(super) fn measure(
    builder: &SessionBuilder,
    graph: &Graph,
    devices: &Devices,
    inputs: &[Value],
    intra: usize,
    model_hash: u64,
) -> Result<CostModel> {
    // The cache key: tensor shapes (the kinds of a model's inputs are fixed).
    let shapes: Vec<Vec<usize>> = inputs
        .iter()
        .map(|v| v.as_tensor().map_or_else(Vec::new, |t| t.shape().to_vec()))
        .collect();
    let options = ProfileOptions {
        intra_op_threads: Some(intra),
        thread_options: builder.threads,
        ..builder.profile_options
    };
    let cache = (builder.use_profile_cache && model_hash != 0)
        .then(|| profile::cache_path(model_hash, graph, devices, &shapes, intra));
    if let Some(m) = cache.as_ref().and_then(|path| CostModel::load(path).ok()) {
        return Ok(m);
    }
    let m = profile::profile_graph(graph, devices, inputs, options, &mut |_, _| {})?;
    if let Some(path) = &cache {
        m.save(path)?;
    }
    Ok(m)
}

/// Fails unless `cost_model` describes this graph on these devices.
fn check_cost_model(cost_model: &CostModel, graph: &Graph, devices: &Devices) -> Result<()> {
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
    Ok(())
}

/// A session with a GPU, for the input shapes of the profile inputs (declared shapes,
/// symbolic dims from the builder's profile shapes or 1), to which `graph` is specialized
/// (shapes fixed, shape arithmetic folded). When every node can run on the GPU and the policy
/// does not ask for overflow, every node runs there on the streams the policy chose;
/// otherwise the nodes are split between the CPU and the GPU (SIR+): see `gpu::HybridEngine`.
#[cfg(feature = "cuda")]
pub(crate) fn build_gpu(
    builder: &SessionBuilder,
    graph: &mut Graph,
    devices: &Devices,
) -> Result<Engine> {
    use crate::device::Device;
    use crate::gpu::{GpuEngine, HybridEngine, HybridParts, open_gpu};
    use spillway_kernels::cuda::GpuOptions;
    let gpus: Vec<(u32, usize)> = devices
        .specs()
        .iter()
        .filter_map(|s| match s.device {
            Device::Cuda { ordinal } => Some((ordinal, s.lanes)),
            _ => None,
        })
        .collect();
    let &[(ordinal, streams)] = gpus.as_slice() else {
        return Err(Error::Config(format!(
            "{} GPUs: a session runs on one GPU in this version",
            gpus.len()
        )));
    };
    let inputs = profile_inputs(graph, &builder.profile_shapes)?;
    let (values, fixed) = crate::hybrid::specialize(graph, &inputs)?;
    let policy = builder.placement.unwrap_or(Policy::Auto);
    let (split, stream_policy) = match policy {
        Policy::Qd | Policy::Sd | Policy::CommSd | Policy::Milp => (policy, Policy::Auto),
        Policy::Auto => (Policy::Auto, Policy::Auto),
        other => (Policy::Sequential, other),
    };
    let gpu = std::sync::Arc::new(open_gpu(
        ordinal,
        streams,
        GpuOptions { tf32: builder.tf32 },
    )?);
    let graph: &Graph = graph;
    let parts = HybridParts::new(graph, &inputs, &values, gpu, streams, stream_policy);
    let eligible = parts.eligible(&fixed);
    if eligible.iter().all(|&e| e) && matches!(split, Policy::Sequential | Policy::Auto) {
        let engine = GpuEngine::build_on(
            parts.gpu().clone(),
            graph,
            &parts.input_tensors()?,
            parts.descs(),
            streams,
            stream_policy,
        )?;
        let report = gpu_report(graph, devices, &engine, ordinal, streams)?;
        return Ok(Engine::Gpu { engine, report });
    }
    let engine = HybridEngine::build(&parts, &eligible, &fixed, split)?;
    let choice = engine.choice();
    tracing::info!(
        gpu_nodes = choice.sides.iter().filter(|s| **s == crate::hybrid::Side::Device).count(),
        eligible = choice.eligible,
        nodes = graph.nodes.len(),
        policy = ?choice.policy,
        "the session splits its nodes between the CPU and the GPU"
    );
    let report = hybrid_report(graph, devices, &engine, ordinal)?;
    Ok(Engine::Hybrid { engine, report })
}

/// The tensors of `values`: a GPU session takes tensor inputs only.
#[cfg(feature = "cuda")]
pub(crate) fn gpu_inputs(values: impl IntoIterator<Item = Value>) -> Result<Vec<Tensor>> {
    crate::value::all_tensors(values).map_err(|other| {
        Error::Config(format!(
            "a GPU session takes tensor inputs only, not {}",
            other.type_string()
        ))
    })
}

/// The placement report of a GPU engine: its streams, and the simulation of them from the
/// nodes' measured GPU times.
#[cfg(feature = "cuda")]
fn gpu_report(
    graph: &Graph,
    devices: &Devices,
    engine: &crate::gpu::GpuEngine,
    ordinal: u32,
    streams: usize,
) -> Result<PlacementReport> {
    use spillway_placement::Topology;
    let choice = engine.choice();
    let n = graph.nodes.len();
    let node_us = if choice.node_us.len() == n {
        choice.node_us.clone()
    } else {
        vec![0.0; n]
    };
    let cost_graph = crate::gpu::cost_graph(graph, &node_us, &[]);
    let cuda = crate::device::Device::Cuda { ordinal }.to_string();
    let mut topology = Topology::gpus(1, streams);
    // The Gantt chart names the device as every other output does.
    topology.devices[0].name = cuda.clone();
    let schedule = spillway_placement::Schedule::from_sequence(
        &format!("{:?}", choice.policy),
        &vec![0; n],
        &choice.streams,
        &(0..n).collect::<Vec<_>>(),
    );
    let simulation =
        simulate(&cost_graph, &topology, &schedule).map_err(|e| Error::Placement(e.to_string()))?;
    let label = format!(
        "{:?} on {cuda}: {} of {streams} streams, {}",
        choice.policy,
        choice.streams_used,
        if choice.captured {
            "replayed as a CUDA Graph"
        } else {
            "launched eagerly"
        }
    );
    let mut report = PlacementReport::new(
        label,
        graph,
        devices,
        CostModel {
            graph: cost_graph,
            topology,
        },
        schedule,
        simulation,
    );
    report.gpu_bytes = Some(choice.arena_bytes);
    for (node, &stream) in report.nodes.iter_mut().zip(&choice.streams) {
        node.2 = cuda.clone();
        node.3 = stream;
    }
    Ok(report)
}

/// The placement report of a hybrid engine: each node on `cpu` or `cuda{ordinal}` (lane: its
/// segment), simulated from the measured times when a split policy measured them.
#[cfg(feature = "cuda")]
fn hybrid_report(
    graph: &Graph,
    devices: &Devices,
    engine: &crate::gpu::HybridEngine,
    ordinal: u32,
) -> Result<PlacementReport> {
    use crate::hybrid::{Side, partition};
    use spillway_placement::{CostGraph, Device as PlacementDevice, DeviceKind, Op, Topology};
    let choice = engine.choice();
    let n = graph.nodes.len();
    let ops = (0..n)
        .map(|i| {
            let (cpu, gpu) = choice.node_us.get(i).copied().unwrap_or((0.0, Some(0.0)));
            let mut costs = vec![(DeviceKind::Cpu, cpu)];
            costs.extend(gpu.map(|g| (DeviceKind::Gpu, g)));
            let mut op = Op::new(graph.nodes[i].name.clone(), &costs);
            op.kind = graph.nodes[i].op_type.clone();
            op
        })
        .collect();
    let cost_graph = CostGraph {
        ops,
        edges: Vec::new(),
        concurrency: Default::default(),
    };
    let topology = Topology::full_mesh(
        vec![
            PlacementDevice::cpu("cpu", 1),
            PlacementDevice::gpu(crate::device::Device::Cuda { ordinal }.to_string(), 1),
        ],
        1.0,
        0.0,
    );
    let segments = partition(graph, &choice.sides);
    let mut segment_of = vec![0; n];
    for (s, segment) in segments.iter().enumerate() {
        for &i in &segment.nodes {
            segment_of[i] = s;
        }
    }
    let device: Vec<usize> = choice
        .sides
        .iter()
        .map(|s| usize::from(*s == Side::Device))
        .collect();
    let schedule = spillway_placement::Schedule::from_sequence(
        &format!("{:?}", choice.policy),
        &device,
        &vec![0; n],
        &(0..n).collect::<Vec<_>>(),
    );
    let simulation =
        simulate(&cost_graph, &topology, &schedule).map_err(|e| Error::Placement(e.to_string()))?;
    let label = format!(
        "{} on cpu + cuda{ordinal}: {} of {} nodes on the GPU ({} could run there), {} GPU and {} CPU segments",
        match choice.policy {
            Policy::Sequential => "GPU first".to_string(),
            Policy::Auto if choice.fixed_only => "Auto (GPU first, fixed shapes only)".to_string(),
            Policy::Auto => format!(
                "Auto (GPU first, {} GPU segments the CPU ran faster moved to it)",
                choice.demoted
            ),
            other => format!("{other:?}"),
        },
        device.iter().sum::<usize>(),
        n,
        choice.eligible,
        choice.segments.1,
        choice.segments.0,
    );
    let mut report = PlacementReport::new(
        label,
        graph,
        devices,
        CostModel {
            graph: cost_graph,
            topology,
        },
        schedule,
        simulation,
    );
    report.gpu_bytes = Some(choice.device_bytes);
    report.kept_on_gpu = Some(choice.kept_on_gpu);
    for ((node, side), s) in report.nodes.iter_mut().zip(&choice.sides).zip(&segment_of) {
        node.2 = match side {
            Side::Host => crate::device::Device::Cpu.to_string(),
            Side::Device => crate::device::Device::Cuda { ordinal }.to_string(),
        };
        node.3 = *s;
    }
    Ok(report)
}
