//! The arenas of a concurrent plan: one per device, planned by the engine's one memory planner
//! (`memory::happens_before`) over the plan's happens-before relation (data edges,
//! lane order, stage order, copy completion: exactly the edges the executor waits on). A
//! topological-order lifetime is not enough once tasks run concurrently: two values alive at
//! disjoint positions of one topological order can still be alive at the same time on two lanes.

use super::{ExecutionPlan, SlotId, Source, TaskKind};
use crate::memory::ALIGNMENT;
use crate::memory::happens_before::{self, Buffer, HappensBefore};

/// One device's arena.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceArena {
    /// `(slot, offset, bytes)`.
    pub placements: Vec<(SlotId, usize, usize)>,
    /// Arena size.
    pub peak_bytes: usize,
    /// One buffer per value, no reuse.
    pub naive_bytes: usize,
}

/// The plan's happens-before relation over its tasks.
fn happens_before(plan: &ExecutionPlan) -> HappensBefore {
    let successors: Vec<Vec<usize>> = plan.tasks.iter().map(|t| t.successors.clone()).collect();
    HappensBefore::new(&successors)
}

/// The tasks that read each slot, in one pass over the plan.
fn readers(plan: &ExecutionPlan) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); plan.slots.len()];
    for (t, task) in plan.tasks.iter().enumerate() {
        match &task.kind {
            TaskKind::Node { inputs, .. } => {
                for s in inputs.iter().flatten() {
                    if let Source::Slot(s) = s
                        && out[*s].last() != Some(&t)
                    {
                        out[*s].push(t);
                    }
                }
            }
            TaskKind::Copy { from, .. } => out[*from].push(t),
        }
    }
    out
}

/// A produced slot as the planner sees it: its writer and its readers.
fn buffer(
    plan: &ExecutionPlan,
    readers: &[Vec<usize>],
    slot: SlotId,
    bytes: usize,
) -> Option<Buffer> {
    Some(Buffer {
        bytes,
        producer: plan.slots[slot].producer?,
        readers: readers[slot].clone(),
    })
}

/// Plans one arena per device for the slots whose size `size_of` knows. Graph inputs and
/// outputs are the caller's memory and are not planned.
pub fn plan(
    plan: &ExecutionPlan,
    devices: usize,
    size_of: impl Fn(SlotId) -> Option<usize>,
) -> Vec<DeviceArena> {
    let hb = happens_before(plan);
    let readers = readers(plan);
    let mut arenas = vec![DeviceArena::default(); devices];
    for (device, arena) in arenas.iter_mut().enumerate() {
        let (slots, buffers): (Vec<SlotId>, Vec<Buffer>) = (0..plan.slots.len())
            .filter(|&s| plan.slots[s].device_index == device && !plan.slots[s].is_output)
            .filter_map(|s| {
                let bytes = size_of(s)?.div_ceil(ALIGNMENT).max(1) * ALIGNMENT;
                Some((s, buffer(plan, &readers, s, bytes)?))
            })
            .unzip();
        let (offsets, peak) = happens_before::share(&buffers, &hb, ALIGNMENT);
        arena.peak_bytes = peak;
        for ((slot, b), offset) in slots.into_iter().zip(&buffers).zip(offsets) {
            arena.naive_bytes += b.bytes;
            arena.placements.push((slot, offset, b.bytes));
        }
    }
    arenas
}

/// Proves a plan's offsets: any two slots of one device that overlap in memory must be ordered
/// by happens-before. Returns the first violation.
pub fn verify(plan: &ExecutionPlan, arenas: &[DeviceArena]) -> Result<(), String> {
    let hb = happens_before(plan);
    let readers = readers(plan);
    for arena in arenas {
        let mut slots = Vec::new();
        let mut buffers = Vec::new();
        let mut offsets = Vec::new();
        for &(slot, offset, bytes) in &arena.placements {
            let b = buffer(plan, &readers, slot, bytes)
                .ok_or_else(|| format!("slot {slot} is placed but no task writes it"))?;
            slots.push(slot);
            buffers.push(b);
            offsets.push(offset);
        }
        if let Some((a, b)) = happens_before::conflict(&buffers, &offsets, &hb) {
            return Err(format!(
                "slots {} and {} share bytes but may be alive at the same time",
                slots[a], slots[b]
            ));
        }
    }
    Ok(())
}
