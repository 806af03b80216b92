//! [`HybridEngine`]: one inference on the CPU and one GPU. Every node with a GPU kernel whose
//! shapes are fixed, or follow from its input shapes (after a data-dependent op: compiled per
//! shape, see [`crate::hybrid::ShapeKeyedSegment`]), may run on the GPU; a split policy decides
//! which do:
//! - `Sequential`, GPU first: every such node on the GPU, as ONNX Runtime's CUDA provider
//!   places them;
//! - `Qd`, `Sd`, `CommSd`, `Milp`: SIR+'s overflow, from each node's measured CPU and GPU
//!   times and a modelled host link;
//! - `Auto`: times whole runs of GPU first, of GPU first with each GPU segment that the CPU
//!   runs faster (its copies to and from the GPU included, timed alone on the specializing
//!   run's values; not those that read or write values kept on the GPU) moved to the CPU, and of GPU first on the nodes of fixed shapes only, and
//!   keeps the fastest (another split only when it beats GPU first by 3 %).
//!
//! Each GPU segment is a [`GpuEngine`] (its streams chosen by its own policy, replayed as a
//! CUDA Graph; see `segment.rs`). A value that only GPU segments read stays in the arena of
//! the segment that wrote it, and each reader copies it into its own arena on the GPU (see
//! [`crate::hybrid::KeptValue`]).

use std::sync::Arc;
use std::time::Instant;

use spillway_kernels::Tensor;
use spillway_kernels::cuda::Gpu;
use spillway_kernels::cuda::ops::TensorDesc;
use spillway_placement::{CostGraph, Device, DeviceKind, Options, Policy, Topology, place};

use super::plan::build_kernel;
use super::segment::{GpuCompiler, desc, tensors};
use crate::device::Devices;
use crate::error::{Error, Result};
use crate::graph::{Graph, ValueId};
use crate::hybrid::{
    FixedValues, HostSegment, HybridPlan, SegmentCompiler, SegmentWork, Side, compile_split,
    partition, segment_graph, shapes_follow_input_shapes, with_constants,
};
use crate::profile::{self, ProfileOptions};
use crate::value::Value;

/// Whole runs timed per candidate when `Auto` weighs the splits.
const AUTO_RUNS: usize = 7;

/// How much faster than GPU first another split must measure for `Auto` to keep it: its
/// timing runs on the profile input alone, and a smaller gain is within the spread of runs.
const AUTO_MARGIN: f64 = 0.03;

/// Runs timed per side when `Auto` weighs a GPU segment against the CPU.
const SEGMENT_RUNS: usize = 3;

/// Host-device copies as the split policies see them: bandwidth (bytes/µs) and latency (µs,
/// which also covers a segment's launch and synchronization).
const LINK_BYTES_PER_US: f64 = 10_000.0;
const LINK_LATENCY_US: f64 = 30.0;

/// How a [`HybridEngine`] was chosen.
#[derive(Debug, Clone)]
pub struct HybridChoice {
    /// The split policy whose placement runs.
    pub policy: Policy,
    /// Per node: where it runs.
    pub sides: Vec<Side>,
    /// Nodes that could run on the GPU (a GPU kernel, shapes fixed or following from the
    /// input shapes).
    pub eligible: usize,
    /// Segments: (on the host, on the GPU).
    pub segments: (usize, usize),
    /// Per node: measured CPU and GPU µs (empty unless a split policy measured them; a node
    /// with no GPU kernel has no GPU time).
    pub node_us: Vec<NodeTimes>,
    /// Per candidate `Auto` measured: (what it is, median ms of a whole run).
    pub measured_ms: Vec<(String, f64)>,
    /// Device memory of the GPU segments, bytes.
    pub device_bytes: usize,
    /// Values that pass from GPU segment to GPU segment on the GPU (only GPU segments read
    /// them).
    pub kept_on_gpu: usize,
    /// GPU-first segments `Auto` moved to the CPU, which ran them faster.
    pub demoted: usize,
    /// Whether `Auto` kept only the nodes of fixed shapes on the GPU.
    pub fixed_only: bool,
}

/// A node's measured CPU µs and GPU µs (`None`: no GPU kernel).
pub type NodeTimes = (f64, Option<f64>);

/// What `Auto` calls the GPU-first split.
const GPU_FIRST: &str = "GPU first";

/// A split `Auto` times.
struct AutoCandidate {
    label: String,
    sides: Vec<Side>,
    plan: HybridPlan,
    demoted: usize,
    fixed_only: bool,
}

/// A graph on the CPU and one GPU, ready to run.
#[derive(Debug)]
pub struct HybridEngine {
    plan: HybridPlan,
    choice: HybridChoice,
}

/// What a [`HybridEngine`] is built from: a graph specialized by
/// [`crate::hybrid::specialize`], the inputs it was specialized to and the values of that run,
/// and the GPU with its streams per segment and their policy.
#[derive(Debug)]
pub struct HybridParts<'a> {
    graph: &'a Graph,
    inputs: &'a [Value],
    values: &'a [Option<Value>],
    descs: Vec<Option<TensorDesc>>,
    gpu: Arc<Gpu>,
    streams: usize,
    stream_policy: Policy,
}

impl<'a> HybridParts<'a> {
    /// The parts (see the type's docs).
    pub fn new(
        graph: &'a Graph,
        inputs: &'a [Value],
        values: &'a [Option<Value>],
        gpu: Arc<Gpu>,
        streams: usize,
        stream_policy: Policy,
    ) -> Self {
        let descs = values.iter().map(desc).collect();
        HybridParts {
            graph,
            inputs,
            values,
            descs,
            gpu,
            streams,
            stream_policy,
        }
    }

    /// Each value's type and shape in the specializing run (`None`: not a tensor).
    pub fn descs(&self) -> &[Option<TensorDesc>] {
        &self.descs
    }

    /// The inputs' tensors.
    pub fn input_tensors(&self) -> Result<Vec<Tensor>> {
        tensors(self.inputs.to_vec())
    }

    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
}

impl HybridEngine {
    /// Builds the graph of `parts` split between the CPU and the GPU by `split` (see the
    /// module docs); `eligible` is [`HybridParts::eligible`] of `fixed`.
    pub fn build(
        parts: &HybridParts,
        eligible: &[bool],
        fixed: &FixedValues,
        split: Policy,
    ) -> Result<HybridEngine> {
        let gpu_first: Vec<Side> = eligible
            .iter()
            .map(|&e| if e { Side::Device } else { Side::Host })
            .collect();
        let mut choice = HybridChoice {
            policy: Policy::Sequential,
            sides: gpu_first.clone(),
            eligible: eligible.iter().filter(|&&e| e).count(),
            segments: (0, 0),
            node_us: Vec::new(),
            measured_ms: Vec::new(),
            device_bytes: 0,
            kept_on_gpu: 0,
            demoted: 0,
            fixed_only: false,
        };
        let first = parts.plan(&gpu_first)?;
        let all_on_gpu = first.segments().iter().all(|s| s.side == Side::Device);
        let mut best = first;
        match split {
            Policy::Sequential => {}
            // A graph that runs whole on the GPU is left there.
            Policy::Auto if all_on_gpu => {}
            Policy::Auto => best = parts.auto(best, &gpu_first, fixed, &mut choice)?,
            Policy::Qd | Policy::Sd | Policy::CommSd | Policy::Milp => {
                let (sides, node_us) = parts.overflow(&best, eligible, split)?;
                best = parts.plan(&sides)?;
                choice.policy = split;
                choice.sides = sides;
                choice.node_us = node_us;
            }
            other => {
                return Err(Error::Config(format!(
                    "placement {other:?} does not split a graph between the CPU and a GPU \
                     (use Sequential for GPU first, Qd, Sd, CommSd, Milp or Auto)"
                )));
            }
        }
        let on = |side: Side| best.segments().iter().filter(|s| s.side == side).count();
        choice.segments = (on(Side::Host), on(Side::Device));
        choice.device_bytes = best.device_bytes();
        choice.kept_on_gpu = best.kept_values();
        Ok(HybridEngine { plan: best, choice })
    }

    /// Runs on `inputs` (one per graph input, in order, in the shapes it was built for).
    pub fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
        self.plan.run(inputs)
    }

    /// How it was chosen.
    pub fn choice(&self) -> &HybridChoice {
        &self.choice
    }

    /// The plan.
    #[cfg(feature = "internals")]
    pub fn plan(&self) -> &HybridPlan {
        &self.plan
    }
}

impl HybridParts<'_> {
    /// Per node: whether it may run on the GPU: its shapes are fixed or follow from its input
    /// shapes, it is not shape arithmetic (which the host computes), it reads and writes
    /// tensors only, and it has a GPU kernel for the shapes and shape arithmetic of the
    /// specializing run.
    pub fn eligible(&self, fixed: &FixedValues) -> Vec<bool> {
        let arithmetic = (0..self.graph.values.len())
            .filter(|&i| fixed.shape_arithmetic[i])
            .map(ValueId::new);
        let keyed = with_constants(self.graph, arithmetic, self.values);
        let desc_of = |v: ValueId| -> Result<&TensorDesc> {
            self.descs[v.index()].as_ref().ok_or_else(|| {
                Error::InvalidModel(format!("value '{}' is not a tensor", self.graph.name(v)))
            })
        };
        self.graph
            .nodes
            .iter()
            .map(|node| {
                (fixed.node_has_fixed_shapes(node)
                    || shapes_follow_input_shapes(self.graph, fixed, node))
                    && !fixed.computes_shape_arithmetic(node)
                    && node
                        .present_inputs()
                        .chain(node.present_outputs())
                        .all(|v| self.descs[v.index()].is_some())
                    && build_kernel(&self.gpu, &keyed, node, &desc_of).is_ok()
            })
            .collect()
    }

    /// The plan of the graph split by `sides`.
    fn plan(&self, sides: &[Side]) -> Result<HybridPlan> {
        let compiler = || -> Box<dyn SegmentCompiler> {
            Box::new(GpuCompiler {
                gpu: self.gpu.clone(),
                streams: self.streams,
                stream_policy: self.stream_policy,
            })
        };
        compile_split(self.graph, sides, self.inputs, self.values, &compiler)
    }

    /// `Auto`'s split (see the module docs), from the GPU-first split `gpu_first` and its plan
    /// `first`; records what it timed and kept in `choice`.
    fn auto(
        &self,
        first: HybridPlan,
        gpu_first: &[Side],
        fixed: &FixedValues,
        choice: &mut HybridChoice,
    ) -> Result<HybridPlan> {
        let (demoted_sides, demoted) = self.demote_slower_segments(&first, gpu_first)?;
        let fixed_only: Vec<Side> = gpu_first
            .iter()
            .zip(&self.graph.nodes)
            .map(|(&side, node)| {
                if side == Side::Device && fixed.node_has_fixed_shapes(node) {
                    Side::Device
                } else {
                    Side::Host
                }
            })
            .collect();
        let mut candidates = vec![AutoCandidate {
            label: GPU_FIRST.into(),
            sides: gpu_first.to_vec(),
            plan: first,
            demoted: 0,
            fixed_only: false,
        }];
        if demoted > 0 {
            candidates.push(AutoCandidate {
                label: format!("{GPU_FIRST}, {demoted} segments the CPU runs faster moved to it"),
                plan: self.plan(&demoted_sides)?,
                sides: demoted_sides,
                demoted,
                fixed_only: false,
            });
        }
        if fixed_only != gpu_first {
            candidates.push(AutoCandidate {
                label: format!("{GPU_FIRST}, fixed shapes only"),
                plan: self.plan(&fixed_only)?,
                sides: fixed_only,
                demoted: 0,
                fixed_only: true,
            });
        }
        let mut fastest = (0, f64::INFINITY);
        for (i, c) in candidates.iter().enumerate() {
            let ms = median_run_ms(&c.plan, self.inputs)?;
            tracing::info!(candidate = %c.label, ms, "Auto timed a CPU + GPU split");
            choice.measured_ms.push((c.label.clone(), ms));
            // GPU first (the first candidate) counts its time less the margin.
            let weighed = if i == 0 { ms * (1.0 - AUTO_MARGIN) } else { ms };
            if weighed < fastest.1 {
                fastest = (i, weighed);
            }
        }
        let fastest = fastest.0;
        let kept = candidates.swap_remove(fastest);
        if fastest > 0 {
            choice.policy = Policy::Auto;
        }
        choice.sides = kept.sides;
        choice.demoted = kept.demoted;
        choice.fixed_only = kept.fixed_only;
        Ok(kept.plan)
    }

    /// `sides` (GPU first) with every GPU segment of `plan` (its plan) that the CPU runs faster
    /// moved to the CPU, and how many were. Each segment is timed on the specializing run's
    /// values, on the GPU with its copies to and from the host, and on the CPU.
    fn demote_slower_segments(
        &self,
        plan: &HybridPlan,
        sides: &[Side],
    ) -> Result<(Vec<Side>, usize)> {
        let mut demoted_sides = sides.to_vec();
        let mut demoted = 0;
        for (segment, planned) in partition(self.graph, sides).iter().zip(plan.segments()) {
            // Timed alone it uploads and downloads what the plan keeps on the GPU, and on the
            // CPU it would send those values through the host: the two timings do not weigh
            // it, so it stays.
            if segment.side != Side::Device || planned.touches_kept() {
                continue;
            }
            let inputs = segment
                .inputs
                .iter()
                .map(|v| {
                    self.values[v.index()].clone().ok_or_else(|| {
                        Error::Internal(format!(
                            "segment input '{}' has no value",
                            self.graph.name(*v)
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            // Its outputs go back to the plan's pool, as in a whole run.
            let device_ms = median_ms_of(SEGMENT_RUNS, &|| {
                planned
                    .run(inputs.clone())
                    .map(|outputs| planned.recycle(outputs))
            })?;
            let host = HostSegment::compile(&segment_graph(self.graph, segment))?;
            let once = || -> Result<f64> {
                let start = Instant::now();
                host.run(inputs.clone())?;
                Ok(start.elapsed().as_secs_f64() * 1e3)
            };
            // The first host run (fresh memory) decides alone when it is far slower.
            let first_ms = once()?;
            if first_ms > 4.0 * device_ms {
                tracing::info!(
                    nodes = segment.nodes.len(),
                    first = %self.graph.nodes[segment.nodes[0]].name,
                    device_ms,
                    host_ms = first_ms,
                    "Auto timed a GPU segment against the CPU (one CPU run)"
                );
                continue;
            }
            let host_ms = median_ms_of(SEGMENT_RUNS, &|| host.run(inputs.clone()).map(drop))?;
            tracing::info!(
                nodes = segment.nodes.len(),
                first = %self.graph.nodes[segment.nodes[0]].name,
                input_bytes = bytes(&inputs),
                device_ms,
                host_ms,
                "Auto timed a GPU segment against the CPU"
            );
            if host_ms < device_ms {
                for &n in &segment.nodes {
                    demoted_sides[n] = Side::Host;
                }
                demoted += 1;
            }
        }
        Ok((demoted_sides, demoted))
    }

    /// The sides SIR+'s overflow `policy` gives, placing from each node's measured CPU and
    /// GPU times (see [`HybridParts::costs`]), and those times per node.
    fn overflow(
        &self,
        first: &HybridPlan,
        eligible: &[bool],
        policy: Policy,
    ) -> Result<(Vec<Side>, Vec<NodeTimes>)> {
        let costs = self.costs(first, eligible)?;
        let node_us = costs
            .ops
            .iter()
            .map(|op| {
                (
                    op.cost_us.get(&DeviceKind::Cpu).copied().unwrap_or(0.0),
                    op.cost_us.get(&DeviceKind::Gpu).copied(),
                )
            })
            .collect();
        let topology = Topology::full_mesh(
            vec![Device::cpu("cpu", 1), Device::gpu("cuda", 1)],
            LINK_BYTES_PER_US,
            LINK_LATENCY_US,
        );
        let schedule = place(policy, &costs, &topology, &Options::default())
            .map_err(|e| Error::Placement(format!("{policy:?}: {e}")))?;
        let sides = schedule
            .ops
            .iter()
            .zip(eligible)
            .map(|(op, &e)| {
                if e && op.device == 1 {
                    Side::Device
                } else {
                    Side::Host
                }
            })
            .collect();
        Ok((sides, node_us))
    }

    /// The cost graph the split policies place from: every node timed on the CPU (all cores),
    /// the GPU-eligible ones timed on the GPU inside the GPU-first plan's segments.
    fn costs(&self, first: &HybridPlan, eligible: &[bool]) -> Result<CostGraph> {
        let cpu = Devices::cpu();
        let model = profile::profile_graph(
            self.graph,
            &cpu,
            self.inputs,
            ProfileOptions::default(),
            &mut |_, _| {},
        )?;
        let mut costs = model.graph;
        let sides: Vec<Side> = eligible
            .iter()
            .map(|&e| if e { Side::Device } else { Side::Host })
            .collect();
        let segments = partition(self.graph, &sides);
        for (segment, planned) in segments.iter().zip(first.segments()) {
            if let Some(us) = planned.device_node_us()? {
                for (&node, us) in segment.nodes.iter().zip(us) {
                    costs.ops[node]
                        .cost_us
                        .insert(DeviceKind::Gpu, us.max(0.01));
                }
            }
        }
        Ok(costs)
    }
}

/// Bytes of the tensors among `values`.
fn bytes(values: &[Value]) -> usize {
    values
        .iter()
        .filter_map(Value::as_tensor)
        .map(|t| t.len() * t.dtype().size_of())
        .sum()
}

/// The median wall time of a whole run of `plan` on `inputs`, ms (after one untimed run).
fn median_run_ms(plan: &HybridPlan, inputs: &[Value]) -> Result<f64> {
    median_ms_of(AUTO_RUNS, &|| plan.run(inputs.to_vec()).map(drop))
}

/// The median wall time of `runs` calls of `run`, ms (after one untimed call).
fn median_ms_of(runs: usize, run: &dyn Fn() -> Result<()>) -> Result<f64> {
    run()?;
    let mut ms = (0..runs)
        .map(|_| {
            let start = Instant::now();
            run()?;
            Ok(start.elapsed().as_secs_f64() * 1e3)
        })
        .collect::<Result<Vec<f64>>>()?;
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}
