//! The public entry point: [`Session`] and its builder.

use std::collections::HashMap;
use std::path::Path;

use spillway_kernels::Tensor;

use crate::error::{Error, Result};
use crate::exec::{RunStats, SequentialPlan};
use crate::graph::{Dim, Graph, ValueId, ValueInfo, passes, shape_inference, shape_to_string};
use crate::io::SessionOutputs;
use crate::memory::{self, MemoryPlan};

/// How much the graph is rewritten before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OptimizationLevel {
    /// Run the model exactly as written.
    Disabled,
    /// Identity/Dropout removal, constant folding (with shape inference), BatchNorm folding.
    #[default]
    All,
}

/// Configures and creates a [`Session`].
#[derive(Debug, Clone, Default)]
pub struct SessionBuilder {
    optimization: OptimizationLevel,
}

impl SessionBuilder {
    /// Sets the optimization level (default: [`OptimizationLevel::All`]).
    pub fn with_optimization(mut self, level: OptimizationLevel) -> Self {
        self.optimization = level;
        self
    }

    /// Loads, optimizes and compiles a model file.
    pub fn commit_from_file(self, path: impl AsRef<Path>) -> Result<Session> {
        let _span = tracing::info_span!("load", path = %path.as_ref().display()).entered();
        let graph = crate::onnx::load_file(path.as_ref())?;
        self.commit(graph)
    }

    /// Loads, optimizes and compiles a model held in memory (external data is not allowed).
    pub fn commit_from_memory(self, bytes: &[u8]) -> Result<Session> {
        let _span = tracing::info_span!("load", bytes = bytes.len()).entered();
        let graph = crate::onnx::load_bytes(bytes::Bytes::copy_from_slice(bytes), None)?;
        self.commit(graph)
    }

    /// Optimizes and compiles a graph built or rewritten by the caller.
    pub fn commit_graph(self, graph: Graph) -> Result<Session> {
        self.commit(graph)
    }

    fn commit(self, mut graph: Graph) -> Result<Session> {
        if self.optimization == OptimizationLevel::All {
            let _span = tracing::info_span!("optimize").entered();
            passes::optimize(&mut graph)?;
        }
        let _span = tracing::info_span!("compile").entered();
        let plan = SequentialPlan::compile(&graph)?;
        let input_index = graph
            .inputs
            .iter()
            .enumerate()
            .map(|(i, v)| (graph.name(*v).to_string(), i))
            .collect();
        Ok(Session {
            plan,
            input_index,
            graph,
        })
    }
}

/// A loaded model, ready to run. `run` takes `&self` and may be called from many threads
/// at once: the plan is immutable and every run has its own state.
#[derive(Debug)]
pub struct Session {
    graph: Graph,
    plan: SequentialPlan,
    input_index: HashMap<String, usize>,
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
        self.run_with_stats(inputs).map(|(out, _)| out)
    }

    /// Like [`Session::run`], also returning the run's memory figures.
    pub fn run_with_stats<S: AsRef<str>>(
        &self,
        inputs: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Result<(SessionOutputs, RunStats)> {
        let _span = tracing::debug_span!("run").entered();
        let bound = self.bind_inputs(inputs)?;
        let (tensors, stats) = self.plan.run(bound)?;
        let names = self
            .graph
            .outputs
            .iter()
            .map(|v| self.graph.name(*v).to_string())
            .collect();
        Ok((SessionOutputs::new(names, tensors), stats))
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
            if let Some(expected) = info.dtype {
                if tensor.dtype() != expected {
                    return Err(Error::InputDType {
                        name: info.name.clone(),
                        expected,
                        got: tensor.dtype(),
                    });
                }
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
                        Dim::Symbol(s) => {
                            if *symbols.entry(s.as_str()).or_insert(n) != n {
                                return Err(mismatch());
                            }
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
