//! Building an [`ExecutionPlan`] from a graph, a schedule and the session's devices.

use std::collections::HashMap;

use spillway_placement::Schedule;

use super::{ExecutionPlan, Lane, Slot, SlotId, Source, Task, TaskId, TaskKind};
use crate::device::Devices;
use crate::error::{Error, Result};
use crate::exec::Work;
use crate::graph::{Graph, ValueId};

/// The host: inputs arrive and outputs leave here.
const HOST: usize = 0;

/// Compiles `graph` (whose nodes are the schedule's ops, in order) for `devices`.
pub fn compile(graph: &Graph, schedule: &Schedule, devices: &Devices) -> Result<ExecutionPlan> {
    if schedule.ops.len() != graph.nodes.len() {
        return Err(Error::Internal(format!(
            "the schedule places {} operators, the graph has {} nodes",
            schedule.ops.len(),
            graph.nodes.len()
        )));
    }
    let specs = devices.specs();
    let mut b = Builder::default();
    // Compute lanes first, then one copy engine per device when there is more than one device.
    let mut first_lane = Vec::with_capacity(specs.len());
    for (d, spec) in specs.iter().enumerate() {
        first_lane.push(b.lanes.len());
        for lane in 0..spec.lanes {
            b.lanes.push(Lane {
                device_index: d,
                device: spec.device,
                lane,
                copy_engine: false,
            });
        }
    }
    let copy_lane: Vec<usize> = if specs.len() > 1 {
        specs
            .iter()
            .enumerate()
            .map(|(d, spec)| {
                b.lanes.push(Lane {
                    device_index: d,
                    device: spec.device,
                    lane: spec.lanes,
                    copy_engine: true,
                });
                b.lanes.len() - 1
            })
            .collect()
    } else {
        Vec::new()
    };

    for &v in &graph.inputs {
        let slot = b.slot(v, HOST, None, true);
        b.input_slots.push(slot);
    }
    let mut sequence: Vec<usize> = (0..graph.nodes.len()).collect();
    sequence.sort_by_key(|&i| schedule.ops[i].order);
    let mut node_task = vec![usize::MAX; graph.nodes.len()];
    for &i in &sequence {
        let node = &graph.nodes[i];
        let place = schedule.ops[i];
        let spec = specs.get(place.device).ok_or_else(|| {
            Error::Internal(format!(
                "node '{}' is placed on device {}, the session has {}",
                node.name,
                place.device,
                specs.len()
            ))
        })?;
        let lane = first_lane[place.device] + place.stream % spec.lanes;
        let mut inputs = Vec::with_capacity(node.inputs.len());
        for v in &node.inputs {
            inputs.push(match v {
                None => None,
                Some(v) => Some(b.source(graph, *v, place.device, devices, &copy_lane)?),
            });
        }
        let task = b.tasks.len();
        let mut reads: Vec<SlotId> = inputs
            .iter()
            .filter_map(|s| match s {
                Some(Source::Slot(s)) => Some(*s),
                _ => None,
            })
            .collect();
        reads.sort_unstable();
        reads.dedup();
        let outputs = node
            .outputs
            .iter()
            .map(|v| v.map(|v| b.slot(v, place.device, Some(task), true)))
            .collect();
        b.tasks.push(Task {
            name: node.name.clone(),
            op_type: node.op_type.clone(),
            kind: TaskKind::Node {
                node: i,
                work: Work::build(node, &graph.kernel_options)?,
                inputs,
                declared_inputs: node.declared_inputs,
                outputs,
            },
            lane,
            successors: Vec::new(),
            predecessors: 0,
            chain_next: None,
            reads,
        });
        node_task[i] = task;
    }
    let mut output_sources = Vec::with_capacity(graph.outputs.len());
    for &v in &graph.outputs {
        let source = b.source(graph, v, HOST, devices, &copy_lane)?;
        if let Source::Slot(s) = source {
            b.slots[s].is_output = true;
        }
        output_sources.push(source);
    }
    let stages: Vec<Option<(usize, usize)>> = (0..graph.nodes.len())
        .map(|i| schedule.ops[i].stage.map(|s| (schedule.ops[i].device, s)))
        .collect();
    b.link(&node_task, &stages);
    let sources = (0..b.tasks.len())
        .filter(|&t| b.tasks[t].predecessors == 0)
        .collect();
    let shared = crate::memory::shared::plan(graph);
    for slot in b.slots.iter_mut().filter(|s| !s.is_output) {
        slot.buffer =
            shared.buffer_of[slot.value.index()].map(|k| k * specs.len() + slot.device_index);
        slot.pooled = shared.pooled[slot.value.index()];
    }
    Ok(ExecutionPlan {
        buffer_count: shared.bytes.len() * specs.len(),
        tasks: b.tasks,
        lanes: b.lanes,
        slots: b.slots,
        constants: b.constants,
        input_slots: b.input_slots,
        output_sources,
        sources,
    })
}

#[derive(Default)]
struct Builder {
    tasks: Vec<Task>,
    lanes: Vec<Lane>,
    slots: Vec<Slot>,
    slot_of: HashMap<(ValueId, usize), SlotId>,
    /// Where each value is produced (or arrives): the source of every copy of it.
    origin: HashMap<ValueId, (usize, SlotId)>,
    constants: Vec<crate::Tensor>,
    constant_of: HashMap<(ValueId, usize), usize>,
    input_slots: Vec<SlotId>,
}

impl Builder {
    /// A new slot; `is_origin` for where the value is produced (copies are not origins).
    fn slot(
        &mut self,
        value: ValueId,
        device_index: usize,
        producer: Option<TaskId>,
        is_origin: bool,
    ) -> SlotId {
        self.slots.push(Slot {
            value,
            device_index,
            readers: 0,
            producer,
            is_output: false,
            buffer: None,
            pooled: false,
        });
        let id = self.slots.len() - 1;
        self.slot_of.insert((value, device_index), id);
        if is_origin {
            self.origin.insert(value, (device_index, id));
        }
        id
    }

    /// Where a reader on `device` gets `value`: a constant copy on that device, the value's slot
    /// there, or a new copy task from where it was produced.
    fn source(
        &mut self,
        graph: &Graph,
        value: ValueId,
        device: usize,
        devices: &Devices,
        copy_lane: &[usize],
    ) -> Result<Source> {
        if let Some(t) = graph.constants.get(&value) {
            let id = *self.constant_of.entry((value, device)).or_insert_with(|| {
                // A device other than the host has its own memory: its constants are its own.
                let copy = if device == HOST {
                    t.clone()
                } else {
                    deep_copy(t)
                };
                self.constants.push(copy);
                self.constants.len() - 1
            });
            return Ok(Source::Constant(id));
        }
        if let Some(&slot) = self.slot_of.get(&(value, device)) {
            return Ok(Source::Slot(slot));
        }
        let (from_device, from) = *self.origin.get(&value).ok_or_else(|| {
            Error::Internal(format!(
                "value '{}' is read before it is produced",
                graph.name(value)
            ))
        })?;
        let specs = devices.specs();
        // A copy's cost is that of the non-host end (CPU↔CPU copies are free).
        let cost = if device == HOST {
            specs[from_device].copy_cost
        } else {
            specs[device].copy_cost
        };
        let task = self.tasks.len();
        let to = self.slot(value, device, Some(task), false);
        self.tasks.push(Task {
            name: format!(
                "copy {} {}→{}",
                graph.name(value),
                specs[from_device].device,
                specs[device].device
            ),
            op_type: "Copy".into(),
            kind: super::TaskKind::Copy { from, to, cost },
            lane: copy_lane[device],
            successors: Vec::new(),
            predecessors: 0,
            chain_next: None,
            reads: vec![from],
        });
        Ok(Source::Slot(to))
    }

    /// Adds data, lane-order and stage edges, reader counts, and chains.
    fn link(&mut self, node_task: &[TaskId], stages: &[Option<(usize, usize)>]) {
        let n = self.tasks.len();
        let mut edges: Vec<Vec<TaskId>> = vec![Vec::new(); n];
        for t in 0..n {
            let reads: Vec<SlotId> = match &self.tasks[t].kind {
                TaskKind::Node { inputs, .. } => inputs
                    .iter()
                    .flatten()
                    .filter_map(|s| {
                        if let Source::Slot(s) = s {
                            Some(*s)
                        } else {
                            None
                        }
                    })
                    .collect(),
                TaskKind::Copy { from, .. } => vec![*from],
            };
            let mut reads = reads;
            reads.sort_unstable();
            reads.dedup();
            for s in reads {
                self.slots[s].readers += 1;
                if let Some(p) = self.slots[s].producer {
                    edges[p].push(t);
                }
            }
        }
        // Lane order: each compute lane runs its tasks in launch order, like a stream.
        let mut last_on_lane: HashMap<usize, TaskId> = HashMap::new();
        for t in 0..n {
            if matches!(self.tasks[t].kind, TaskKind::Copy { .. }) {
                continue;
            }
            if let Some(prev) = last_on_lane.insert(self.tasks[t].lane, t) {
                edges[prev].push(t);
            }
        }
        // HIOS stages: a stage starts when the previous stage on its device is done.
        let mut by_stage: std::collections::BTreeMap<(usize, usize), Vec<TaskId>> =
            Default::default();
        for (node, st) in stages.iter().enumerate() {
            if let Some(key) = st {
                by_stage.entry(*key).or_default().push(node_task[node]);
            }
        }
        let keys: Vec<(usize, usize)> = by_stage.keys().copied().collect();
        for pair in keys.windows(2) {
            if pair[0].0 == pair[1].0 {
                for &a in &by_stage[&pair[0]] {
                    edges[a].extend(by_stage[&pair[1]].iter().copied());
                }
            }
        }
        for (t, mut succ) in edges.into_iter().enumerate() {
            succ.sort_unstable();
            succ.dedup();
            for &s in &succ {
                self.tasks[s].predecessors += 1;
            }
            self.tasks[t].successors = succ;
        }
        // Chains: the next task on the lane runs inline when this task is its only predecessor.
        for t in 0..n {
            let lane = self.tasks[t].lane;
            let next = self.tasks[t].successors.iter().copied().find(|&s| {
                self.tasks[s].lane == lane
                    && self.tasks[s].predecessors == 1
                    && !matches!(self.tasks[s].kind, TaskKind::Copy { .. })
            });
            self.tasks[t].chain_next = next;
        }
    }
}

/// A copy that shares nothing with the original (a device's own memory).
fn deep_copy(t: &crate::Tensor) -> crate::Tensor {
    spillway_kernels::dispatch_all!(t, a => spillway_kernels::Element::into_tensor(a.to_owned().into_shared()))
}
