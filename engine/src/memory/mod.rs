//! Static memory planning by value lifetime: each intermediate gets an offset in one arena, and
//! two values share bytes only when one's last use comes before the other's production. One
//! planner serves every plan (`happens_before`); here it plans the sequential order.

// The GPU plan's, the concurrent plans' (internals) and the sequential report's planner.
#[cfg(any(test, feature = "internals", feature = "cuda"))]
pub(crate) mod happens_before;
pub mod shared;

use crate::graph::Graph;
#[cfg(feature = "internals")]
use crate::graph::ValueId;
#[cfg(feature = "internals")]
use happens_before::{Buffer, HappensBefore};

/// Byte alignment of every offset (one cache line; also what SIMD loads like).
#[cfg(any(test, feature = "internals"))]
pub const ALIGNMENT: usize = 64;

/// Where each intermediate lives in the arena.
#[cfg(feature = "internals")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryPlan {
    /// `(value, offset, bytes)` for every planned intermediate.
    pub placements: Vec<(ValueId, usize, usize)>,
    /// Arena size: the planned peak.
    pub peak_bytes: usize,
    /// What one buffer per value would take (no reuse).
    pub naive_bytes: usize,
    /// Intermediates whose size is not known before running (planned per run instead).
    pub dynamic: Vec<ValueId>,
    /// What the CPU executor's shared buffers take: each [`shared`] buffer as large as the
    /// largest value it holds (values of unknown size count nothing).
    pub shared_bytes: usize,
}

/// Plans the intermediates of `graph` (node outputs that are not graph outputs), whose nodes
/// run in list order. Sizes come from the inferred shapes.
#[cfg(feature = "internals")]
pub fn plan(graph: &Graph) -> MemoryPlan {
    let (first, last) = lifetimes(graph);
    let mut out = MemoryPlan {
        shared_bytes: shared::plan(graph).bytes.iter().sum(),
        ..MemoryPlan::default()
    };
    let mut items: Vec<(ValueId, usize)> = Vec::new();
    for (index, info) in graph.values.iter().enumerate() {
        let id = ValueId::new(index);
        if first[index] == usize::MAX || graph.outputs.contains(&id) {
            continue;
        }
        match info.fixed_bytes() {
            Some(bytes) => items.push((id, bytes.div_ceil(ALIGNMENT) * ALIGNMENT)),
            None => out.dynamic.push(id),
        }
    }
    let buffers = lifetime_buffers(&first, &last, &items);
    let (offsets, peak) = happens_before::share(&buffers, &HappensBefore::Total, ALIGNMENT);
    out.peak_bytes = peak;
    for (&(id, bytes), offset) in items.iter().zip(offsets) {
        out.naive_bytes += bytes;
        out.placements.push((id, offset, bytes));
    }
    out
}

/// Each value as the planner sees it in the sequential order: written at its first node, read
/// until its last.
#[cfg(feature = "internals")]
fn lifetime_buffers(first: &[usize], last: &[usize], items: &[(ValueId, usize)]) -> Vec<Buffer> {
    items
        .iter()
        .map(|&(id, bytes)| Buffer {
            bytes,
            producer: first[id.index()],
            readers: vec![last[id.index()]],
        })
        .collect()
}

/// The first (producing) and last (reading) node of every value, in list order;
/// `usize::MAX` as first for values no node produces.
pub(crate) fn lifetimes(graph: &Graph) -> (Vec<usize>, Vec<usize>) {
    let n = graph.values.len();
    let mut first = vec![usize::MAX; n];
    let mut last = vec![0usize; n];
    for (i, node) in graph.nodes.iter().enumerate() {
        for v in node.present_outputs() {
            first[v.index()] = first[v.index()].min(i);
            last[v.index()] = last[v.index()].max(i);
        }
        for v in node.present_inputs() {
            last[v.index()] = last[v.index()].max(i);
        }
    }
    (first, last)
}


/// Checks that no two placed values whose lifetimes overlap share a byte. Used by tests and,
/// in debug builds, after every plan.
#[cfg(feature = "internals")]
pub fn verify(graph: &Graph, plan: &MemoryPlan) -> Result<(), String> {
    let (first, last) = lifetimes(graph);
    let items: Vec<(ValueId, usize)> = plan.placements.iter().map(|&(v, _, b)| (v, b)).collect();
    if let Some(&(v, ..)) = plan.placements.iter().find(|p| first[p.0.index()] == usize::MAX) {
        return Err(format!("value {} is placed but no node writes it", v.index()));
    }
    let offsets: Vec<usize> = plan.placements.iter().map(|p| p.1).collect();
    let buffers = lifetime_buffers(&first, &last, &items);
    match happens_before::conflict(&buffers, &offsets, &HappensBefore::Total) {
        Some((a, b)) => Err(format!(
            "values {} and {} overlap in time and in memory",
            items[a].0.index(),
            items[b].0.index()
        )),
        None => Ok(()),
    }
}
