//! Memory planning for concurrent plans. Two values may share bytes only if the plan's
//! happens-before relation (data edges, lane order, stage order, copy completion — exactly the
//! edges the executor waits on) orders every use of one before the production of the other. A
//! topological-order lifetime is not enough once tasks run concurrently: two values alive at
//! disjoint positions of one topological order can still be alive at the same time on two lanes.

use super::{ExecutionPlan, SlotId, TaskKind};
use crate::memory::ALIGNMENT;

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

/// Which task transitively precedes which: `reach[a]` has bit `b` when `b` waits (directly or
/// not) for `a`.
pub struct HappensBefore {
    reach: Vec<Vec<u64>>,
}

impl HappensBefore {
    /// Computes reachability over the plan's task graph.
    pub fn new(plan: &ExecutionPlan) -> Self {
        let n = plan.tasks.len();
        let words = n.div_ceil(64);
        let mut reach = vec![vec![0u64; words]; n];
        // Kahn order, then fill in reverse.
        let mut pending: Vec<u32> = plan.tasks.iter().map(|t| t.predecessors).collect();
        let mut order: Vec<usize> = plan.sources.clone();
        let mut i = 0;
        while i < order.len() {
            for &s in &plan.tasks[order[i]].successors {
                pending[s] -= 1;
                if pending[s] == 0 {
                    order.push(s);
                }
            }
            i += 1;
        }
        for &t in order.iter().rev() {
            let mut row = vec![0u64; words];
            for &s in &plan.tasks[t].successors {
                row[s / 64] |= 1 << (s % 64);
                for (w, r) in row.iter_mut().zip(&reach[s]) {
                    *w |= r;
                }
            }
            reach[t] = row;
        }
        HappensBefore { reach }
    }

    /// True when `a` finishes before `b` starts in every run.
    pub fn before(&self, a: usize, b: usize) -> bool {
        self.reach[a][b / 64] >> (b % 64) & 1 == 1
    }
}

/// The tasks that touch a slot: its producer and its readers.
fn uses(plan: &ExecutionPlan) -> Vec<(Option<usize>, Vec<usize>)> {
    let mut out: Vec<(Option<usize>, Vec<usize>)> = plan
        .slots
        .iter()
        .map(|s| (s.producer, Vec::new()))
        .collect();
    for (t, task) in plan.tasks.iter().enumerate() {
        match &task.kind {
            TaskKind::Node { inputs, .. } => {
                for s in inputs.iter().flatten() {
                    if let super::Source::Slot(s) = s {
                        out[*s].1.push(t);
                    }
                }
            }
            TaskKind::Copy { from, .. } => out[*from].1.push(t),
        }
    }
    out
}

/// Every use of `a` happens before `b` is produced.
fn ordered(
    hb: &HappensBefore,
    a: &(Option<usize>, Vec<usize>),
    b: &(Option<usize>, Vec<usize>),
) -> bool {
    let Some(pb) = b.0 else { return false };
    let Some(pa) = a.0 else { return false };
    if a.1.is_empty() {
        return hb.before(pa, pb);
    }
    a.1.iter().all(|&r| r != pb && hb.before(r, pb))
}

/// Plans one arena per device for the slots whose size `size_of` knows. Graph inputs and
/// outputs are the caller's memory and are not planned.
pub fn plan(
    plan: &ExecutionPlan,
    devices: usize,
    size_of: impl Fn(SlotId) -> Option<usize>,
) -> Vec<DeviceArena> {
    let hb = HappensBefore::new(plan);
    let uses = uses(plan);
    let mut arenas = vec![DeviceArena::default(); devices];
    let mut items: Vec<(SlotId, usize)> = (0..plan.slots.len())
        .filter(|&s| plan.slots[s].producer.is_some() && !plan.slots[s].is_output)
        .filter_map(|s| size_of(s).map(|b| (s, b.div_ceil(ALIGNMENT).max(1) * ALIGNMENT)))
        .collect();
    items.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (slot, bytes) in items {
        let arena = &mut arenas[plan.slots[slot].device_index];
        let busy = arena
            .placements
            .iter()
            .filter(|(other, _, _)| {
                !ordered(&hb, &uses[*other], &uses[slot])
                    && !ordered(&hb, &uses[slot], &uses[*other])
            })
            .map(|&(_, o, b)| (o, o + b))
            .collect();
        let offset = crate::memory::first_fit(busy, bytes);
        arena.peak_bytes = arena.peak_bytes.max(offset + bytes);
        arena.naive_bytes += bytes;
        arena.placements.push((slot, offset, bytes));
    }
    arenas
}

/// Proves a plan's offsets: any two slots of one device that overlap in memory must be ordered
/// by happens-before. Returns the first violation.
pub fn verify(plan: &ExecutionPlan, arenas: &[DeviceArena]) -> Result<(), String> {
    let hb = HappensBefore::new(plan);
    let uses = uses(plan);
    for arena in arenas {
        for (i, &(a, oa, sa)) in arena.placements.iter().enumerate() {
            for &(b, ob, sb) in &arena.placements[i + 1..] {
                let overlap = oa < ob + sb && ob < oa + sa;
                if overlap && !ordered(&hb, &uses[a], &uses[b]) && !ordered(&hb, &uses[b], &uses[a])
                {
                    return Err(format!(
                        "slots {a} and {b} share bytes but may be alive at the same time"
                    ));
                }
            }
        }
    }
    Ok(())
}
