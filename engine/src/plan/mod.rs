//! The plan compiler: Graph × Schedule → [`ExecutionPlan`] (SIR+ §6 made general).
//!
//! Every node becomes a task on the (device, lane) its schedule gives; every value a node reads
//! on another device than the one that produced it gets ONE copy task per (value, destination
//! device), shared by all readers there. Tasks on one lane keep the schedule's launch order
//! (an edge from each task to the next on its lane, like a CUDA stream); HIOS stages add edges
//! from every task of a stage to every task of the next stage on that device. A task whose only
//! reader is the next task on its lane, which reads nothing else computed, forms a chain with
//! it: the executor runs the pair back to back without touching a queue (SIR+ §6.2).

mod compile;
#[cfg(any(test, feature = "internals"))]
pub mod hb_memory;

pub use compile::compile;

use spillway_kernels::Tensor;

use crate::device::{CopyCost, Device};
use crate::exec::Work;

/// Index of a task in [`ExecutionPlan::tasks`].
pub type TaskId = usize;
/// Index of a value slot: one value on one device.
pub type SlotId = usize;

/// Where a task reads an input from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A slot written by another task (or by the caller, for graph inputs).
    Slot(SlotId),
    /// A constant, already on the task's device.
    Constant(usize),
}

/// What a task does.
#[derive(Debug)]
// One per task, built once per session.
#[allow(clippy::large_enum_variant)]
pub enum TaskKind {
    /// Runs a graph node.
    Node {
        /// Index in the graph's node list.
        node: usize,
        /// The kernel or control-flow work.
        work: Work,
        /// Inputs (declared, then captures); `None` for omitted optional inputs.
        inputs: Vec<Option<Source>>,
        /// How many inputs the node declares.
        declared_inputs: usize,
        /// Output slots; `None` for unused outputs.
        outputs: Vec<Option<SlotId>>,
    },
    /// Copies a value between devices.
    Copy {
        /// Source slot.
        from: SlotId,
        /// Destination slot.
        to: SlotId,
        /// The link's cost (Virtual devices simulate it).
        cost: CopyCost,
    },
}

/// One unit of work.
#[derive(Debug)]
pub struct Task {
    /// Display name (node name, or `copy <value> cpu→virtual0`).
    pub name: String,
    /// Op type, or `Copy`.
    pub op_type: String,
    /// What it does.
    pub kind: TaskKind,
    /// The worker (device, lane) that runs it: an index into [`ExecutionPlan::lanes`].
    pub lane: usize,
    /// Tasks that wait for this one (data, lane order, stage order), without duplicates.
    pub successors: Vec<TaskId>,
    /// How many tasks this one waits for.
    pub predecessors: u32,
    /// The successor to run inline right after this task (a fused chain).
    pub chain_next: Option<TaskId>,
    /// The slots this task reads, each once (their reader counts drop when it finishes).
    pub reads: Vec<SlotId>,
}

/// A worker: one lane of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    /// Index in the session's device list.
    pub device_index: usize,
    /// The device.
    pub device: Device,
    /// Lane (or stream) number on the device; copy engines come after the compute lanes.
    pub lane: usize,
    /// True for a device's copy engine.
    pub copy_engine: bool,
}

/// A value on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The graph value.
    pub value: crate::graph::ValueId,
    /// Index in the session's device list.
    pub device_index: usize,
    /// How many tasks read it per run (it is freed after the last, unless it is an output).
    pub readers: u32,
    /// The task that writes it (`None` for graph inputs).
    pub producer: Option<TaskId>,
    /// True when the slot holds a graph output.
    pub is_output: bool,
    /// The shared buffer (of this slot's device) its storage comes from and goes back to:
    /// the sequential order's [`crate::memory::shared`] plan, one set of buffers per device.
    /// Buffers move by ownership, so a plan that a concurrent order outruns only costs reuse.
    pub buffer: Option<usize>,
    /// True when the value's size is unknown before the run: its storage comes from and goes
    /// back to the run's pool of this slot's device.
    pub pooled: bool,
}

/// The compiled, immutable plan shared by every run.
#[derive(Debug)]
pub struct ExecutionPlan {
    /// Tasks, in a topological order.
    pub tasks: Vec<Task>,
    /// Workers.
    pub lanes: Vec<Lane>,
    /// Value slots.
    pub slots: Vec<Slot>,
    /// Constants, per device copy.
    pub constants: Vec<Tensor>,
    /// Where each graph input is written (host device).
    pub input_slots: Vec<SlotId>,
    /// Where each graph output is read (host device), or the constant it is.
    pub output_sources: Vec<Source>,
    /// Tasks with no predecessor.
    pub sources: Vec<TaskId>,
    /// How many shared buffers the slots use (all devices).
    pub buffer_count: usize,
}

impl ExecutionPlan {
    /// `(task name, choice)` for each node task whose kernel has chosen among its algorithms
    /// on the runs so far ([`spillway_kernels::Kernel::choice`]).
    pub fn kernel_choices(&self) -> Vec<(String, String)> {
        self.tasks
            .iter()
            .filter_map(|t| match &t.kind {
                TaskKind::Node { work, .. } => work.choice().map(|c| (t.name.clone(), c)),
                _ => None,
            })
            .collect()
    }

    /// Tasks per lane, in their launch order.
    #[cfg(feature = "internals")]
    pub fn lane_tasks(&self) -> Vec<Vec<TaskId>> {
        let mut out = vec![Vec::new(); self.lanes.len()];
        for (i, t) in self.tasks.iter().enumerate() {
            out[t.lane].push(i);
        }
        out
    }

    /// How many copy tasks the plan has.
    #[cfg(any(test, feature = "internals"))]
    pub fn copy_count(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| matches!(t.kind, TaskKind::Copy { .. }))
            .count()
    }
}
