//! Static memory planning by value lifetime: each intermediate gets an offset in one arena, and
//! two values share bytes only when one's last use comes before the other's production in the
//! sequential order. Offsets are assigned greedily, largest value first (the "greedy by size"
//! strategy of TFLite and ONNX Runtime), into the lowest gap that fits.

// Used by the GPU plan (feature `cuda`); its tests run in every build.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) mod ordered;
pub mod shared;

use crate::graph::Graph;
#[cfg(feature = "internals")]
use crate::graph::ValueId;

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
    items.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (id, bytes) in items {
        let (start, end) = (first[id.index()], last[id.index()]);
        let busy = out
            .placements
            .iter()
            .filter(|(other, _, _)| first[other.index()] <= end && start <= last[other.index()])
            .map(|&(_, offset, size)| (offset, offset + size))
            .collect();
        let offset = first_fit(busy, bytes);
        out.peak_bytes = out.peak_bytes.max(offset + bytes);
        out.naive_bytes += bytes;
        out.placements.push((id, offset, bytes));
    }
    out
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

/// The lowest offset where `bytes` fit between the `[start, end)` ranges already taken by
/// values that may be live at the same time.
pub(crate) fn first_fit(mut busy: Vec<(usize, usize)>, bytes: usize) -> usize {
    busy.sort_unstable();
    let mut offset = 0;
    for (lo, hi) in busy {
        if lo >= offset + bytes {
            break;
        }
        offset = offset.max(hi);
    }
    offset
}

/// Checks that no two placed values whose lifetimes overlap share a byte. Used by tests and,
/// in debug builds, after every plan.
#[cfg(feature = "internals")]
pub fn verify(graph: &Graph, plan: &MemoryPlan) -> Result<(), String> {
    let mut span = vec![(usize::MAX, 0usize); graph.values.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        for v in node.present_outputs().chain(node.present_inputs()) {
            let s = &mut span[v.index()];
            *s = (s.0.min(i), s.1.max(i));
        }
    }
    for (a, &(va, oa, sa)) in plan.placements.iter().enumerate() {
        for &(vb, ob, sb) in &plan.placements[a + 1..] {
            let (la, lb) = (span[va.index()], span[vb.index()]);
            let alive_together = la.0 <= lb.1 && lb.0 <= la.1;
            let overlap = oa < ob + sb && ob < oa + sa;
            if alive_together && overlap {
                return Err(format!(
                    "values {} and {} overlap in time and in memory",
                    va.index(),
                    vb.index()
                ));
            }
        }
    }
    Ok(())
}
