//! The sequential CPU executor: nodes in topological order, one at a time. Each intermediate
//! is given back right after its last use: its storage returns to the shared buffer the static
//! plan ([`crate::memory::shared`]) gives it, and is offered to the next node writing a value of
//! that buffer. Values of unknown size go back to the run's pool instead, which hands them
//! to later outputs by best fit. The buffers and the pool stay with the plan between runs (one
//! set per concurrent run).
//!
//! A model's static plan can only size what the graph fixes. When its inputs have symbolic
//! dimensions (a batch axis, an image size), a plan made [`SequentialPlan::for_input_shapes`]
//! plans the buffers again for input shapes that come twice in a row ([`ShapeLayouts`]): with
//! the shapes known, the values that follow from them get shared buffers too, instead of the
//! allocator's fresh pages on every run. Shapes that change on every run keep the static plan.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use spillway_kernels::buffer_pool::Pool;
use spillway_kernels::output_buffer::{self, Buffer};
use spillway_kernels::{Kernel, KernelError, KernelOptions};

use super::{RunOptions, TraceEvent, Work};
use crate::error::{Error, Result};
use crate::graph::{Dim, Graph, Node, ValueId, shape_inference};
use crate::memory::shared;
use crate::value::Value;

/// One node, ready to run.
#[derive(Debug)]
struct Step {
    name: String,
    op_type: String,
    work: Work,
    /// How many of `inputs` the node declares (captures follow).
    declared_inputs: usize,
    inputs: Vec<Option<ValueId>>,
    outputs: Vec<Option<ValueId>>,
    /// Values whose last reader is this step: dropped right after it.
    release: Vec<ValueId>,
}

/// An immutable plan: kernels built once, shared by every run (and every thread).
#[derive(Debug)]
pub struct SequentialPlan {
    steps: Vec<Step>,
    /// Constants by value index; `None` for values computed at run time.
    constants: Vec<Option<Value>>,
    outputs: Vec<ValueId>,
    /// The memory of each value, from the static plan.
    layout: Arc<Layout>,
    /// Layouts for the input shapes of recent runs, when the plan makes them.
    shape_layouts: Option<ShapeLayouts>,
    /// Buffer sets left by finished runs, taken by the next ones, with the layout each follows.
    idle_buffers: Mutex<Vec<(Arc<Layout>, BufferSet)>>,
}

/// Which memory each value of a run uses.
#[derive(Debug)]
struct Layout {
    /// The shared buffer of each value (by value index).
    buffer_of: Vec<Option<usize>>,
    /// Whether each value's memory comes from the pool (its size is unknown before the run).
    pooled: Vec<bool>,
    /// How many shared buffers there are.
    buffer_count: usize,
}

impl From<shared::SharedBuffers> for Layout {
    fn from(buffers: shared::SharedBuffers) -> Layout {
        Layout {
            buffer_count: buffers.bytes.len(),
            buffer_of: buffers.buffer_of,
            pooled: buffers.pooled,
        }
    }
}

/// How many input-shape layouts a plan keeps (the least recently used goes first).
const SHAPE_LAYOUTS: usize = 8;

/// The shapes of a run's graph inputs, in order.
type InputShapes = Vec<Vec<usize>>;

/// Layouts planned for the input shapes of recent runs: the graph (its shapes inferred again
/// from each run's input shapes) and what the last runs brought.
#[derive(Debug)]
struct ShapeLayouts {
    graph: Graph,
    state: Mutex<RecentShapes>,
}

/// The layouts by input shapes, most recent last, and the last run's shapes.
#[derive(Debug, Default)]
struct RecentShapes {
    layouts: Vec<(InputShapes, Arc<Layout>)>,
    last: Option<InputShapes>,
}

impl ShapeLayouts {
    /// The layout for these input shapes (graph inputs in order): a recent one, or one
    /// planned now when the last run brought the same shapes; `None` for shapes met once, which
    /// follow the static plan (shapes that change on every run would only churn memory).
    fn layout_for(&self, shapes: InputShapes) -> Option<Arc<Layout>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let repeated = state.last.replace(shapes.clone()).as_ref() == Some(&shapes);
        let recent = &mut state.layouts;
        if let Some(at) = recent.iter().position(|(s, _)| *s == shapes) {
            let entry = recent.remove(at);
            let layout = entry.1.clone();
            recent.push(entry);
            return Some(layout);
        }
        if !repeated {
            return None;
        }
        let began = Instant::now();
        let mut graph = self.graph.clone();
        for (&id, shape) in self.graph.inputs.iter().zip(&shapes) {
            graph.values[id.index()].shape = Some(shape.iter().map(|&d| Dim::Fixed(d)).collect());
        }
        shape_inference::infer(&mut graph);
        let layout = Arc::new(Layout::from(shared::plan(&graph)));
        tracing::debug!(
            ?shapes,
            ms = began.elapsed().as_secs_f64() * 1e3,
            "memory planned for new input shapes"
        );
        if recent.len() == SHAPE_LAYOUTS {
            recent.remove(0);
        }
        recent.push((shapes, layout.clone()));
        Some(layout)
    }
}

/// One run's memory: the shared buffers by index (`None` while a value holds the memory), and
/// the pool of the values of unknown size.
#[derive(Debug, Default)]
struct BufferSet {
    buffers: Vec<Option<Buffer>>,
    pool: Arc<Pool>,
}

impl BufferSet {
    /// No buffer yet for any of `layout`'s, and `pool`.
    fn empty(layout: &Layout, pool: Arc<Pool>) -> BufferSet {
        BufferSet {
            buffers: (0..layout.buffer_count).map(|_| None).collect(),
            pool,
        }
    }
}

/// Figures from one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Largest number of bytes held by intermediate values at one time.
    pub peak_intermediate_bytes: usize,
    /// Outputs written into a shared buffer taken back from an earlier value (of this run or,
    /// for the first values of a buffer, of an earlier run) instead of new memory.
    pub reused_outputs: usize,
    /// Outputs of unknown planned size written into memory from the pool (given back by an
    /// earlier value of this run or of an earlier one) instead of new memory.
    pub pooled_outputs: usize,
    /// Bytes the pool keeps for the next run after this one.
    pub pool_bytes: usize,
    /// The run executed on the thread that called it, not on a worker of the kernel pool (a
    /// one-lane session runs where its earlier runs were faster; small models run on the
    /// calling thread).
    pub on_calling_thread: bool,
}

/// Builds the CPU kernel for a node with the default [`KernelOptions`], wrapping any error
/// with the node's context.
pub fn build_kernel(node: &Node) -> Result<Box<dyn Kernel>> {
    build_kernel_with(node, &KernelOptions::default())
}

/// Builds the CPU kernel for a node as `options` say, wrapping any error with the node's
/// context.
pub fn build_kernel_with(node: &Node, options: &KernelOptions) -> Result<Box<dyn Kernel>> {
    let spec = node.spec_with(*options);
    spillway_kernels::cpu::build(&spec).map_err(|cause| Error::Unsupported {
        node: node.name.clone(),
        op_type: node.op_type.clone(),
        opset: node.opset,
        cause,
    })
}

impl SequentialPlan {
    /// Builds every kernel and the release points. Fails on the first node the CPU cannot run.
    pub fn compile(graph: &Graph) -> Result<Self> {
        let mut last_use: Vec<Option<usize>> = vec![None; graph.values.len()];
        for (i, node) in graph.nodes.iter().enumerate() {
            for v in node.present_inputs() {
                last_use[v.index()] = Some(i);
            }
        }
        let mut keep = vec![false; graph.values.len()];
        // Inputs belong to the caller and are not counted as intermediates.
        for v in graph
            .outputs
            .iter()
            .chain(&graph.inputs)
            .chain(graph.constants.keys())
        {
            keep[v.index()] = true;
        }
        let mut steps = Vec::with_capacity(graph.nodes.len());
        for (i, node) in graph.nodes.iter().enumerate() {
            let mut release: Vec<ValueId> = node
                .present_inputs()
                .chain(node.present_outputs())
                .filter(|v| !keep[v.index()] && last_use[v.index()].is_none_or(|l| l == i))
                .collect();
            release.sort_unstable();
            release.dedup();
            steps.push(Step {
                name: node.name.clone(),
                op_type: node.op_type.clone(),
                work: Work::build(node, &graph.kernel_options)?,
                declared_inputs: node.declared_inputs,
                inputs: node.inputs.clone(),
                outputs: node.outputs.clone(),
                release,
            });
        }
        let mut constants = vec![None; graph.values.len()];
        for (id, t) in &graph.constants {
            constants[id.index()] = Some(Value::Tensor(t.clone()));
        }
        Ok(SequentialPlan {
            steps,
            constants,
            outputs: graph.outputs.clone(),
            layout: Arc::new(Layout::from(shared::plan(graph))),
            shape_layouts: None,
            idle_buffers: Mutex::new(Vec::new()),
        })
    }

    /// Lets runs plan their memory for their own input shapes when `graph` (the graph this
    /// plan was compiled from) leaves some intermediate's size to them: tensor inputs with
    /// symbolic dimensions and values the static plan could not size. Shapes are planned for
    /// when two runs in a row bring them, at the cost of one shape inference over the graph;
    /// the last `SHAPE_LAYOUTS` are kept.
    pub fn for_input_shapes(mut self, graph: &Graph) -> Self {
        let symbolic = graph.inputs.iter().any(|&v| {
            let info = graph.value(v);
            info.kind.is_tensor() && info.fixed_shape().is_none()
        });
        if symbolic && self.layout.pooled.iter().any(|&p| p) {
            self.shape_layouts = Some(ShapeLayouts {
                graph: graph.clone(),
                state: Mutex::default(),
            });
        }
        self
    }

    /// The layout a run on `inputs` follows.
    fn layout_for(&self, inputs: &[(ValueId, Value)]) -> Arc<Layout> {
        let Some(layouts) = &self.shape_layouts else {
            return self.layout.clone();
        };
        let shapes: Option<InputShapes> = layouts
            .graph
            .inputs
            .iter()
            .map(|id| {
                inputs
                    .iter()
                    .find(|(v, _)| v == id)
                    .and_then(|(_, value)| value.as_tensor())
                    .map(|t| t.shape().to_vec())
            })
            .collect();
        shapes
            .and_then(|shapes| layouts.layout_for(shapes))
            .unwrap_or_else(|| self.layout.clone())
    }

    /// `(node name, choice)` for each node whose kernel has chosen among its algorithms on
    /// the runs so far ([`spillway_kernels::Kernel::choice`]: `winograd-avx512`, `generic`,
    /// ...).
    pub fn kernel_choices(&self) -> Vec<(String, String)> {
        self.steps
            .iter()
            .filter_map(|s| s.work.choice().map(|c| (s.name.clone(), c)))
            .collect()
    }

    /// Runs the plan on inputs already validated by the session; returns the graph outputs in order.
    pub fn run(&self, inputs: Vec<(ValueId, Value)>) -> Result<(Vec<Value>, RunStats)> {
        self.run_with_options(inputs, &RunOptions::default())
            .map(|run| (run.outputs, run.stats))
    }

    /// [`SequentialPlan::run`] with per-run options: a trace of every node (device 0, lane 0)
    /// and the fault-injection hook.
    pub fn run_with_options(
        &self,
        inputs: Vec<(ValueId, Value)>,
        options: &RunOptions,
    ) -> Result<SequentialRun> {
        self.run_impl(inputs, false, options)
    }

    /// Runs and returns every value computed, indexed by value (the GPU specialization's).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn run_keeping_values(&self, inputs: Vec<(ValueId, Value)>) -> Result<Vec<Option<Value>>> {
        self.run_impl(inputs, true, &RunOptions::default())
            .map(|run| run.values)
    }

    fn run_impl(
        &self,
        inputs: Vec<(ValueId, Value)>,
        keep: bool,
        options: &RunOptions,
    ) -> Result<SequentialRun> {
        let layout = self.layout_for(&inputs);
        let idle = self
            .idle_buffers
            .lock()
            .ok()
            .and_then(|mut sets| sets.pop());
        let mut buffers = match idle {
            Some((l, set)) if Arc::ptr_eq(&l, &layout) => set,
            // A set of other shapes: its buffers go to the pool, where this run's values of
            // any buffer may take them (the end of the run frees what none took).
            Some((_, set)) => {
                for buffer in set.buffers.into_iter().flatten() {
                    set.pool.give(buffer);
                }
                BufferSet::empty(&layout, set.pool)
            }
            None => BufferSet::empty(&layout, Arc::default()),
        };
        let mut result = self.run_steps(inputs, keep, options, &layout, &mut buffers);
        let peak = result
            .as_ref()
            .ok()
            .map(|r| r.stats.peak_intermediate_bytes);
        let pooled_outputs = buffers.pool.end_run(peak);
        if let Ok(run) = &mut result {
            run.stats.pooled_outputs = pooled_outputs;
            run.stats.pool_bytes = buffers.pool.bytes();
        }
        if let Ok(mut sets) = self.idle_buffers.lock() {
            sets.push((layout, buffers));
        }
        result
    }

    fn run_steps(
        &self,
        inputs: Vec<(ValueId, Value)>,
        keep: bool,
        options: &RunOptions,
        layout: &Layout,
        set: &mut BufferSet,
    ) -> Result<SequentialRun> {
        let BufferSet { buffers, pool } = set;
        let start = Instant::now();
        let mut trace = options.trace.then(Vec::new);
        let mut slots: Vec<Option<Value>> = vec![None; self.constants.len()];
        for (id, t) in inputs {
            slots[id.index()] = Some(t);
        }
        let mut live_bytes = 0usize;
        let mut stats = RunStats::default();
        for (index, step) in self.steps.iter().enumerate() {
            let args: Vec<Option<&Value>> = step
                .inputs
                .iter()
                .map(|v| {
                    v.and_then(|v| {
                        slots[v.index()]
                            .as_ref()
                            .or(self.constants[v.index()].as_ref())
                    })
                })
                .collect();
            let fail = |cause| Error::Kernel {
                node: step.name.clone(),
                op_type: step.op_type.clone(),
                cause,
            };
            if let Some(pos) = step
                .inputs
                .iter()
                .zip(&args)
                .position(|(v, a)| v.is_some() && a.is_none())
            {
                return Err(Error::Internal(format!(
                    "node '{}': input {pos} was not computed before the node ran",
                    step.name
                )));
            }
            let buffer_of = |v: &Option<ValueId>| v.and_then(|v| layout.buffer_of[v.index()]);
            let mut offers: Vec<Option<Buffer>> = step
                .outputs
                .iter()
                .map(|v| buffer_of(v).and_then(|b| buffers[b].take()))
                .collect();
            let offered = offers.iter().flatten().count();
            super::limits::check_deadline()?;
            let began = Instant::now();
            let results = if options.inject_failure_at == Some(index) {
                Ok(Err(KernelError::InvalidValue(
                    "injected failure (testing hook)".into(),
                )))
            } else {
                // A kernel that panics fails this run with an error naming it; the plan keeps
                // no state from the step, so the next run is unaffected.
                catch_unwind(AssertUnwindSafe(|| {
                    output_buffer::offer(&mut offers, Some(pool), || {
                        step.work.run(&args, step.declared_inputs)
                    })
                }))
                .unwrap_or_else(|payload| {
                    Err(Error::Panic {
                        context: format!("node '{}' ({})", step.name, step.op_type),
                        message: crate::error::panic_message(&*payload),
                    })
                })
            };
            if let Some(events) = &mut trace {
                events.push(TraceEvent {
                    name: step.name.clone(),
                    op_type: step.op_type.clone(),
                    device: 0,
                    lane: 0,
                    start_us: began.duration_since(start).as_secs_f64() * 1e6,
                    duration_us: began.elapsed().as_secs_f64() * 1e6,
                });
            }
            stats.reused_outputs += offered - offers.iter().flatten().count();
            for (v, left) in step.outputs.iter().zip(offers) {
                if let (Some(b), Some(left)) = (buffer_of(v), left) {
                    buffers[b] = Some(left);
                }
            }
            let results = results?.map_err(fail)?;
            if results.len() < step.outputs.iter().filter(|o| o.is_some()).count()
                || results.len() > step.outputs.len()
            {
                return Err(Error::Internal(format!(
                    "node '{}' ({}) returned {} outputs, the node lists {}",
                    step.name,
                    step.op_type,
                    results.len(),
                    step.outputs.len()
                )));
            }
            for (slot, t) in step.outputs.iter().zip(results) {
                if let Some(v) = slot {
                    live_bytes += t.byte_len();
                    slots[v.index()] = Some(t);
                }
            }
            stats.peak_intermediate_bytes = stats.peak_intermediate_bytes.max(live_bytes);
            for v in step.release.iter().filter(|_| !keep) {
                let Some(value) = slots[v.index()].take() else {
                    continue;
                };
                live_bytes = live_bytes.saturating_sub(value.byte_len());
                let Value::Tensor(t) = value else { continue };
                if let Some(b) = layout.buffer_of[v.index()] {
                    if let Some(back) = Buffer::reclaim(t) {
                        back.keep_larger_in(&mut buffers[b]);
                    }
                } else if layout.pooled[v.index()]
                    && let Some(back) = Buffer::reclaim(t)
                {
                    pool.give(back);
                }
            }
        }
        let outputs = self
            .outputs
            .iter()
            .map(|v| {
                slots[v.index()]
                    .clone()
                    .or_else(|| self.constants[v.index()].clone())
                    .ok_or_else(|| {
                        Error::Internal(format!("output {} was not computed", v.index()))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SequentialRun {
            outputs,
            stats,
            values: if keep { slots } else { Vec::new() },
            trace,
        })
    }
}

/// What one run of a [`SequentialPlan`] gives back.
#[derive(Debug)]
pub struct SequentialRun {
    /// The graph outputs, in order.
    pub outputs: Vec<Value>,
    /// Memory figures.
    pub stats: RunStats,
    /// Every value by index (only when the run kept them).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub values: Vec<Option<Value>>,
    /// Each node's start and duration, when the options asked for a trace.
    pub trace: Option<Vec<TraceEvent>>,
}
