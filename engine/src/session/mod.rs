//! The public entry point: [`Session`], its builder and its reports.

mod builder;
mod placing;

use std::collections::HashMap;

use spillway_kernels::Tensor;

pub use builder::{OptimizationLevel, SessionBuilder};
use placing::Engine;
pub use placing::PlacementReport;

use crate::device::Devices;
use crate::error::{Error, Result};
use crate::exec::{RunOptions, RunStats, TraceEvent};
use crate::graph::{Dim, Graph, ValueId, ValueInfo, shape_inference, shape_to_string};
use crate::io::SessionOutputs;
use crate::memory::{self, MemoryPlan};

/// A loaded model, ready to run. `run` takes `&self` and may be called from many threads
/// at once: the plan is immutable and every run has its own state.
#[derive(Debug)]
pub struct Session {
    graph: Graph,
    engine: Engine,
    input_index: HashMap<String, usize>,
    devices: Devices,
}

/// What a run reports besides its outputs.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// Memory figures (sequential engine).
    pub stats: RunStats,
    /// What ran where and when, when asked for.
    pub trace: Option<Vec<TraceEvent>>,
}
impl Session {
    /// A builder with default settings.
    pub fn builder() -> SessionBuilder {
        SessionBuilder::default()
    }

    /// The inputs the model expects, in order.
    pub fn inputs(&self) -> Vec<&ValueInfo> {
        self.graph
            .inputs
            .iter()
            .map(|v| self.graph.value(*v))
            .collect()
    }

    /// The outputs the model returns, in order.
    pub fn outputs(&self) -> Vec<&ValueInfo> {
        self.graph
            .outputs
            .iter()
            .map(|v| self.graph.value(*v))
            .collect()
    }

    /// The static memory plan of the intermediates for the given input shapes (symbolic
    /// dimensions bound from them): offsets, planned peak, and the values whose size is only
    /// known while running.
    pub fn memory_plan(&self, input_shapes: &[(&str, &[usize])]) -> Result<MemoryPlan> {
        let mut graph = self.graph.clone();
        for (name, shape) in input_shapes {
            let &i = self
                .input_index
                .get(*name)
                .ok_or_else(|| Error::UnknownInput {
                    name: name.to_string(),
                    expected: self
                        .inputs()
                        .iter()
                        .map(|v| v.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            let id = graph.inputs[i];
            graph.values[id.index()].shape = Some(shape.iter().map(|&d| Dim::Fixed(d)).collect());
        }
        shape_inference::infer(&mut graph);
        let plan = memory::plan(&graph);
        debug_assert_eq!(memory::verify(&graph, &plan), Ok(()));
        Ok(plan)
    }

    /// The optimized graph that runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Runs the model. Inputs are `(name, tensor)` pairs; every declared input must be given once.
    pub fn run<S: AsRef<str>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Result<SessionOutputs> {
        self.run_with_options(inputs, &RunOptions::default())
            .map(|(out, _)| out)
    }

    /// Runs with per-run options (tracing, the fault-injection testing hook).
    pub fn run_with_options<S: AsRef<str>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
        options: &RunOptions,
    ) -> Result<(SessionOutputs, RunReport)> {
        let _span = tracing::debug_span!("run").entered();
        let bound = self.bind_inputs(inputs)?;
        let names = self
            .graph
            .outputs
            .iter()
            .map(|v| self.graph.name(*v).to_string())
            .collect();
        match &self.engine {
            Engine::Sequential(plan) => {
                let (tensors, stats) = plan.run(bound)?;
                Ok((
                    SessionOutputs::new(names, tensors),
                    RunReport { stats, trace: None },
                ))
            }
            Engine::Parallel { executor, .. } => {
                let inputs = bound.into_iter().map(|(_, t)| t).collect();
                let (tensors, trace) = executor.run(inputs, options.clone())?;
                Ok((
                    SessionOutputs::new(names, tensors),
                    RunReport {
                        stats: RunStats::default(),
                        trace,
                    },
                ))
            }
        }
    }

    /// Where each node runs and the predicted makespan; `None` for a one-lane CPU session.
    pub fn placement_report(&self) -> Option<&PlacementReport> {
        match &self.engine {
            Engine::Parallel { report, .. } => Some(report),
            Engine::Sequential(_) => None,
        }
    }

    /// The compiled multi-device plan, when the session has one.
    pub fn execution_plan(&self) -> Option<&crate::plan::ExecutionPlan> {
        match &self.engine {
            Engine::Parallel { executor, .. } => Some(executor.plan()),
            Engine::Sequential(_) => None,
        }
    }

    /// The devices the session runs on.
    pub fn devices(&self) -> &Devices {
        &self.devices
    }

    /// The index of the node called `name` (for the fault-injection hook).
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.graph.nodes.iter().position(|n| n.name == name)
    }

    /// Like [`Session::run`], also returning the run's memory figures.
    pub fn run_with_stats<S: AsRef<str>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Result<(SessionOutputs, RunStats)> {
        self.run_with_options(inputs, &RunOptions::default())
            .map(|(out, report)| (out, report.stats))
    }

    /// Checks names, element types and shapes (symbolic dims must agree across inputs).
    fn bind_inputs<S: AsRef<str>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Result<Vec<(ValueId, Tensor)>> {
        let mut given: Vec<Option<Tensor>> = vec![None; self.graph.inputs.len()];
        for (name, tensor) in inputs {
            let name = name.as_ref();
            let &i = self
                .input_index
                .get(name)
                .ok_or_else(|| Error::UnknownInput {
                    name: name.to_string(),
                    expected: self
                        .inputs()
                        .iter()
                        .map(|v| v.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            given[i] = Some(tensor);
        }
        let mut symbols: HashMap<&str, usize> = HashMap::new();
        let mut bound = Vec::with_capacity(given.len());
        for (&id, tensor) in self.graph.inputs.iter().zip(given) {
            let info = self.graph.value(id);
            let tensor = tensor.ok_or_else(|| Error::MissingInput(info.name.clone()))?;
            if let Some(expected) = info.dtype
                && tensor.dtype() != expected
            {
                return Err(Error::InputDType {
                    name: info.name.clone(),
                    expected,
                    got: tensor.dtype(),
                });
            }
            if let Some(shape) = &info.shape {
                let mismatch = || Error::InputShape {
                    name: info.name.clone(),
                    expected: shape_to_string(shape),
                    got: tensor.shape().to_vec(),
                };
                if shape.len() != tensor.rank() {
                    return Err(mismatch());
                }
                for (dim, &n) in shape.iter().zip(tensor.shape()) {
                    match dim {
                        Dim::Fixed(d) if *d != n => return Err(mismatch()),
                        Dim::Symbol(s) if *symbols.entry(s.as_str()).or_insert(n) != n => {
                            return Err(mismatch());
                        }
                        _ => {}
                    }
                }
            }
            bound.push((id, tensor));
        }
        Ok(bound)
    }
}
