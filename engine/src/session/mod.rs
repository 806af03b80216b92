//! The public entry point: [`Session`], its builder and its reports.

mod builder;
mod lane_choice;
mod placing;
mod report;

use std::collections::HashMap;

use spillway_kernels::{DType, Tensor};

pub use builder::{ActivationLayout, OptimizationLevel, SessionBuilder};
use placing::Engine;
pub use report::PlacementReport;

use crate::device::Devices;
use crate::error::{Error, Result};
use crate::exec::kernel_pool::ThreadOptions;
use crate::exec::run_site::Site;
use crate::exec::{RunOptions, RunStats, TraceEvent};
use crate::graph::{Dim, Graph, ValueId, ValueInfo, ValueType, shape_to_string};
use crate::io::SessionOutputs;
use crate::value::Value;
#[cfg(feature = "internals")]
use crate::{
    graph::shape_inference,
    memory::{self, MemoryPlan},
};

/// A loaded model, ready to run. `run` takes `&self` and may be called from many threads
/// at once: the plan is immutable and every run has its own state.
#[derive(Debug)]
pub struct Session {
    pub(crate) graph: Graph,
    engine: Engine,
    input_index: HashMap<String, usize>,
    devices: Devices,
    limits: crate::exec::RunLimits,
    threads: ThreadOptions,
}

/// What a run reports besides its outputs.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RunReport {
    /// Memory figures (sequential engine).
    pub stats: RunStats,
    /// What ran where and when, when asked for.
    pub trace: Option<Vec<TraceEvent>>,
}
impl Session {
    fn new(
        graph: Graph,
        engine: Engine,
        devices: Devices,
        limits: crate::exec::RunLimits,
        threads: ThreadOptions,
    ) -> Session {
        let input_index = graph
            .inputs
            .iter()
            .enumerate()
            .map(|(i, v)| (graph.name(*v).to_string(), i))
            .collect();
        Session {
            engine,
            input_index,
            graph,
            devices,
            limits,
            threads,
        }
    }

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
    ///
    /// Internal: the engine's own view, outside the API's stability promise.
    #[cfg(feature = "internals")]
    #[doc(hidden)]
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
            if !graph.values[id.index()].kind.is_tensor() {
                continue; // a sequence or optional: no tensor shape to bind
            }
            graph.values[id.index()].shape = Some(shape.iter().map(|&d| Dim::Fixed(d)).collect());
        }
        shape_inference::infer(&mut graph);
        let plan = memory::plan(&graph);
        debug_assert_eq!(memory::verify(&graph, &plan), Ok(()));
        Ok(plan)
    }

    /// What the model says about itself: producer, version, doc strings, custom metadata.
    pub fn metadata(&self) -> &crate::ModelMetadata {
        &self.graph.metadata
    }

    /// The optimized graph that runs.
    ///
    /// Internal: the engine's own view, outside the API's stability promise.
    #[cfg(any(test, feature = "internals"))]
    #[doc(hidden)]
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Runs the model. Inputs are `(name, tensor)` pairs; every declared input must be given once.
    /// A model with sequence or optional inputs runs through [`Session::run_values`].
    pub fn run<S: AsRef<str>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Result<SessionOutputs> {
        self.run_with_options(inputs, &RunOptions::default())
            .map(|(out, _)| out)
    }

    /// Runs the model on inputs of any kind: `(name, value)` pairs, where a value is a tensor,
    /// a sequence or an optional. Each must be of the kind the model declares for it
    /// ([`Error::InputKind`] otherwise), with the declared element types and shapes.
    pub fn run_values<S: AsRef<str>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Value)>,
    ) -> Result<SessionOutputs> {
        self.run_values_with_options(inputs, &RunOptions::default())
            .map(|(out, _)| out)
    }

    /// Runs with per-run options (tracing, the fault-injection testing hook).
    pub fn run_with_options<S: AsRef<str>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
        options: &RunOptions,
    ) -> Result<(SessionOutputs, RunReport)> {
        self.run_values_with_options(
            inputs.into_iter().map(|(n, t)| (n, Value::Tensor(t))),
            options,
        )
    }

    /// [`Session::run_values`] with per-run options.
    pub fn run_values_with_options<S: AsRef<str>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Value)>,
        options: &RunOptions,
    ) -> Result<(SessionOutputs, RunReport)> {
        let _span = tracing::debug_span!("run").entered();
        let bound = self.bind_inputs(inputs)?;
        let limits = Some(self.limits.start());
        let names = self
            .graph
            .outputs
            .iter()
            .map(|v| self.graph.name(*v).to_string())
            .collect();
        match &self.engine {
            Engine::Sequential { plan, site, .. } => {
                // The whole run goes to one worker of the kernel pool (the caller waits), so
                // each kernel's parallel loops start inside the pool instead of handing work
                // over from this thread and sleeping until it is done, once per node; or, when
                // its runs showed that faster (small models), stays on this thread.
                let (run, ran_on) = site.run(self.threads, || {
                    crate::exec::limits::scoped(limits, || plan.run_with_options(bound, options))
                });
                let mut run = run?;
                run.stats.on_calling_thread = ran_on == Site::Caller;
                Ok((
                    SessionOutputs::new(names, run.outputs),
                    RunReport {
                        stats: run.stats,
                        trace: run.trace,
                    },
                ))
            }
            #[cfg(feature = "cuda")]
            Engine::Gpu { engine, .. } => {
                let inputs = placing::gpu_inputs(bound.into_iter().map(|(_, v)| v))?;
                let values = crate::exec::limits::scoped(limits, || engine.run(&inputs))?
                    .into_iter()
                    .map(Value::Tensor)
                    .collect();
                Ok((SessionOutputs::new(names, values), RunReport::default()))
            }
            #[cfg(feature = "cuda")]
            Engine::Hybrid { engine, .. } => {
                let bound = bound.into_iter().map(|(_, v)| v).collect();
                let values = crate::exec::limits::scoped(limits, || engine.run(bound))?;
                Ok((SessionOutputs::new(names, values), RunReport::default()))
            }
            Engine::Parallel { executor, .. } => {
                let inputs = bound.into_iter().map(|(_, v)| v).collect();
                let (values, trace) =
                    crate::exec::limits::scoped(limits, || executor.run(inputs, options.clone()))?;
                Ok((
                    SessionOutputs::new(names, values),
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
            Engine::Sequential { report, .. } => report.as_ref(),
            #[cfg(feature = "cuda")]
            Engine::Gpu { report, .. } | Engine::Hybrid { report, .. } => Some(report),
        }
    }

    /// How the device segments of a session split between the CPU and a GPU have run so far:
    /// runs on a plan compiled for their shapes, runs on the CPU (shapes met for the first
    /// time or refused by the GPU), plans compiled during runs (see
    /// [`crate::hybrid::ShapeKeyedSegment`]). `None` for other sessions.
    ///
    /// Internal: the engine's own view, outside the API's stability promise.
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn shape_stats(&self) -> Option<crate::hybrid::ShapeStats> {
        match &self.engine {
            #[cfg(feature = "cuda")]
            Engine::Hybrid { engine, .. } => Some(engine.plan().shape_stats()),
            _ => None,
        }
    }

    /// The compiled multi-device plan, when the session has one.
    ///
    /// Internal: the engine's own view, outside the API's stability promise.
    #[cfg(any(test, feature = "internals"))]
    #[doc(hidden)]
    pub fn execution_plan(&self) -> Option<&crate::plan::ExecutionPlan> {
        match &self.engine {
            Engine::Parallel { executor, .. } => Some(executor.plan()),
            Engine::Sequential { .. } => None,
            #[cfg(feature = "cuda")]
            Engine::Gpu { .. } | Engine::Hybrid { .. } => None,
        }
    }

    /// The devices the session runs on.
    pub fn devices(&self) -> &Devices {
        &self.devices
    }

    /// How the session's kernel threads behave (spinning, pinning), as its builder set them.
    pub fn thread_options(&self) -> ThreadOptions {
        self.threads
    }

    /// The kernel-algorithm choices the session's CPU kernels were built with.
    pub fn kernel_options(&self) -> spillway_kernels::KernelOptions {
        self.graph.kernel_options
    }

    /// `(node name, choice)` for each CPU kernel that has chosen among its algorithms on the
    /// runs so far: `winograd-avx512`, `packed-avx2`, `generic`, ...
    /// ([`spillway_kernels::Kernel::choice`]). Empty for sessions on a GPU.
    pub fn kernel_choices(&self) -> Vec<(String, String)> {
        match &self.engine {
            Engine::Sequential { plan, .. } => plan.kernel_choices(),
            Engine::Parallel { executor, .. } => executor.plan().kernel_choices(),
            #[cfg(feature = "cuda")]
            Engine::Gpu { .. } | Engine::Hybrid { .. } => Vec::new(),
        }
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

    /// Checks names, kinds, element types and shapes (symbolic dims must agree across inputs).
    fn bind_inputs<S: AsRef<str>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Value)>,
    ) -> Result<Vec<(ValueId, Value)>> {
        let mut given: Vec<Option<Value>> = vec![None; self.graph.inputs.len()];
        for (name, value) in inputs {
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
            given[i] = Some(value);
        }
        let mut symbols: HashMap<String, usize> = HashMap::new();
        let mut bound = Vec::with_capacity(given.len());
        for (&id, value) in self.graph.inputs.iter().zip(given) {
            let info = self.graph.value(id);
            let value = value.ok_or_else(|| Error::MissingInput(info.name.clone()))?;
            check_value(&info.name, &info.value_type(), &value, &mut symbols, true)?;
            bound.push((id, value));
        }
        Ok(bound)
    }
}

/// Checks `value` against the declared type `ty`. Symbolic dims bind across the top-level
/// tensor inputs (`bind_symbols`); inside sequences each element may differ.
fn check_value(
    name: &str,
    ty: &ValueType,
    value: &Value,
    symbols: &mut HashMap<String, usize>,
    bind_symbols: bool,
) -> Result<()> {
    let kind_error = || Error::InputKind {
        name: name.to_string(),
        expected: ty.to_string(),
        got: value.type_string(),
    };
    match (ty, value) {
        (ValueType::Tensor { dtype, shape }, Value::Tensor(t)) => {
            check_tensor(name, *dtype, shape.as_deref(), t, symbols, bind_symbols)
        }
        (ValueType::Sequence(elem), Value::Sequence(seq)) => {
            let ValueType::Tensor { dtype, shape } = elem.as_ref() else {
                return Err(kind_error());
            };
            if let Some(expected) = *dtype
                && seq.dtype() != expected
            {
                return Err(Error::InputDType {
                    name: name.to_string(),
                    expected,
                    got: seq.dtype(),
                });
            }
            for t in seq.tensors() {
                check_tensor(name, *dtype, shape.as_deref(), t, symbols, false)?;
            }
            Ok(())
        }
        (ValueType::Optional(_), Value::Optional(None)) => Ok(()),
        (ValueType::Optional(elem), Value::Optional(Some(inner))) => {
            check_value(name, elem, inner, symbols, bind_symbols)
        }
        _ => Err(kind_error()),
    }
}

fn check_tensor(
    name: &str,
    dtype: Option<DType>,
    shape: Option<&[Dim]>,
    tensor: &Tensor,
    symbols: &mut HashMap<String, usize>,
    bind_symbols: bool,
) -> Result<()> {
    if let Some(expected) = dtype
        && tensor.dtype() != expected
    {
        return Err(Error::InputDType {
            name: name.to_string(),
            expected,
            got: tensor.dtype(),
        });
    }
    if let Some(shape) = shape {
        let mismatch = || Error::InputShape {
            name: name.to_string(),
            expected: shape_to_string(shape),
            got: tensor.shape().to_vec(),
        };
        if shape.len() != tensor.rank() {
            return Err(mismatch());
        }
        for (dim, &n) in shape.iter().zip(tensor.shape()) {
            match dim {
                Dim::Fixed(d) if *d != n => return Err(mismatch()),
                Dim::Symbol(s) if bind_symbols && *symbols.entry(s.clone()).or_insert(n) != n => {
                    return Err(mismatch());
                }
                _ => {}
            }
        }
    }
    Ok(())
}
