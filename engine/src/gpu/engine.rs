//! [`GpuEngine`]: what a session with a GPU runs — the graph compiled for one GPU, its streams
//! chosen by a placement policy from the nodes' measured GPU times, captured as a CUDA Graph.

use std::sync::Arc;

use spillway_kernels::Tensor;
use spillway_kernels::cuda::ops::TensorDesc;
use spillway_kernels::cuda::{Gpu, GpuOptions};
use spillway_placement::{Options, Policy, Schedule, Topology, place, simulate};

use super::assignment::StreamAssignment;
use super::capture::CapturedPlan;
use super::costs::cost_graph;
use super::plan::GpuPlan;
use super::timing::median_ms;
use super::transfer::{PlanInput, all_downloaded, host_inputs};
use crate::error::{Error, Result};
use crate::graph::Graph;

/// Launches timed per candidate when `Auto` measures the stream policies.
const AUTO_RUNS: usize = 20;

/// How a [`GpuEngine`] was chosen.
#[derive(Debug, Clone)]
pub struct GpuChoice {
    /// The policy whose streams it runs (`Sequential` for one stream).
    pub policy: Policy,
    /// Compute streams it launches on.
    pub streams_used: usize,
    /// Per node, indexed like the graph's nodes: its stream.
    pub streams: Vec<usize>,
    /// Each node's GPU time measured alone, µs (empty for one stream).
    pub node_us: Vec<f64>,
    /// The simulator's makespan for the chosen schedule, µs (one stream: the sum of
    /// `node_us`; 0 when nothing was measured).
    pub predicted_us: f64,
    /// Per candidate measured by `Auto`: (policy, median ms of a captured replay).
    pub measured_ms: Vec<(Policy, f64)>,
    /// Whether runs replay a CUDA Graph (false when capture failed: runs launch eagerly).
    pub captured: bool,
    /// Device memory of the plan, bytes.
    pub arena_bytes: usize,
}

/// Opens GPU `ordinal` with `streams` compute streams; a missing GPU or library is a
/// [`Error::DeviceUnavailable`].
pub fn open_gpu(ordinal: u32, streams: usize, options: GpuOptions) -> Result<Gpu> {
    Gpu::open(ordinal, streams, options).map_err(|e| Error::DeviceUnavailable {
        device: format!("cuda{ordinal}"),
        reason: e.to_string(),
    })
}

/// The graph on one GPU, ready to run.
#[derive(Debug)]
pub struct GpuEngine {
    plan: Arc<GpuPlan>,
    captured: Option<CapturedPlan>,
    choice: GpuChoice,
}

impl GpuEngine {
    /// Compiles `graph` for GPU `ordinal` with `streams` compute streams, for the shapes of
    /// `inputs` (also used to measure), with `descs` each value's type and shape (from
    /// [`super::specialize`], to which `graph` should be specialized). `Sequential` (or one
    /// stream) runs every node on one stream; `Lios`, `Opara`, `Greedy`, `Heft` place the
    /// nodes on the streams from their measured GPU times; `Auto` measures one stream and each
    /// of those and keeps the fastest. Fails naming the node when one has no GPU kernel.
    #[cfg(feature = "internals")]
    pub fn build(
        graph: &Graph,
        inputs: &[Tensor],
        descs: &[Option<TensorDesc>],
        ordinal: u32,
        streams: usize,
        policy: Policy,
        options: GpuOptions,
    ) -> Result<GpuEngine> {
        let gpu = Arc::new(open_gpu(ordinal, streams, options)?);
        GpuEngine::build_on(gpu, graph, inputs, descs, streams, policy)
    }

    /// [`GpuEngine::build`] on a GPU already open (with at least `streams` streams).
    pub fn build_on(
        gpu: Arc<Gpu>,
        graph: &Graph,
        inputs: &[Tensor],
        descs: &[Option<TensorDesc>],
        streams: usize,
        policy: Policy,
    ) -> Result<GpuEngine> {
        let single = StreamAssignment::single_stream(graph.nodes.len());
        let one = Arc::new(GpuPlan::compile(graph, descs, gpu.clone(), &single)?);
        one.run(inputs)?;
        let candidates: Vec<Policy> = match policy {
            _ if streams <= 1 => Vec::new(),
            Policy::Sequential => Vec::new(),
            Policy::Auto => vec![Policy::Lios, Policy::Opara, Policy::Greedy],
            Policy::Lios | Policy::Opara | Policy::Greedy | Policy::Heft => vec![policy],
            other => {
                return Err(Error::Config(format!(
                    "placement {other:?} does not apply to a single GPU's streams \
                     (use Sequential, Lios, Opara, Greedy, Heft or Auto)"
                )));
            }
        };
        let mut choice = GpuChoice {
            policy: Policy::Sequential,
            streams_used: 1,
            streams: single.stream.clone(),
            node_us: Vec::new(),
            predicted_us: 0.0,
            measured_ms: Vec::new(),
            captured: false,
            arena_bytes: one.arena_bytes(),
        };
        let mut best = (one, None::<CapturedPlan>, f64::INFINITY);
        if !candidates.is_empty() {
            let node_us = best.0.profile_nodes(5)?;
            let costs = cost_graph(graph, &node_us, descs);
            let topology = Topology::gpus(1, streams);
            choice.predicted_us = node_us.iter().sum();
            choice.node_us = node_us;
            let placed = |p: Policy| -> Result<(Schedule, f64)> {
                let schedule = place(p, &costs, &topology, &Options::default())
                    .map_err(|e| Error::Placement(format!("{p:?}: {e}")))?;
                let sim = simulate(&costs, &topology, &schedule)
                    .map_err(|e| Error::Placement(e.to_string()))?;
                Ok((schedule, sim.makespan))
            };
            if policy == Policy::Auto {
                let captured = CapturedPlan::capture(best.0.clone())?;
                best.2 = median_ms(&gpu, AUTO_RUNS, &|| captured.replay())?;
                choice.measured_ms.push((Policy::Sequential, best.2));
                best.1 = Some(captured);
            }
            for p in candidates {
                let (schedule, predicted) = placed(p)?;
                let assignment = StreamAssignment::from_schedule(&schedule);
                let plan = Arc::new(GpuPlan::compile(graph, descs, gpu.clone(), &assignment)?);
                plan.run(inputs)?;
                let (captured, ms) = if policy == Policy::Auto {
                    let captured = CapturedPlan::capture(plan.clone())?;
                    let ms = median_ms(&gpu, AUTO_RUNS, &|| captured.replay())?;
                    choice.measured_ms.push((p, ms));
                    (Some(captured), ms)
                } else {
                    (None, 0.0)
                };
                if ms < best.2 {
                    choice.policy = p;
                    choice.streams_used = plan.streams_used();
                    choice.streams = assignment.stream;
                    choice.predicted_us = predicted;
                    choice.arena_bytes = plan.arena_bytes();
                    best = (plan, captured, ms);
                }
            }
        }
        let (plan, captured, _) = best;
        let captured = match captured {
            Some(c) => Some(c),
            None => match CapturedPlan::capture(plan.clone()) {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!(error = %e, "CUDA Graph capture failed: runs launch eagerly");
                    None
                }
            },
        };
        choice.captured = captured.is_some();
        Ok(GpuEngine {
            plan,
            captured,
            choice,
        })
    }

    /// Runs on `inputs` (one per graph input, in order, in the shapes it was built for).
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        all_downloaded(self.run_with(&host_inputs(inputs), &[])?)
    }

    /// [`GpuEngine::run`] with inputs that may be on the device, keeping the outputs whose
    /// flag in `keep` is set in the plan's memory (`None`), until the next run.
    pub fn run_with(&self, inputs: &[PlanInput], keep: &[bool]) -> Result<Vec<Option<Tensor>>> {
        match &self.captured {
            Some(c) => c.run_with(inputs, keep),
            None => self.plan.run_with(inputs, keep),
        }
    }

    /// How it was chosen.
    pub fn choice(&self) -> &GpuChoice {
        &self.choice
    }

    /// The compiled plan.
    pub fn plan(&self) -> &Arc<GpuPlan> {
        &self.plan
    }
}
