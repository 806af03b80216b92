//! The memory planner: offsets in one region for values whose uses a plan orders. Two values
//! may share bytes only if the plan's happens-before relation (data edges, lane or stream
//! order, stage order, copy completion: exactly what the executor waits on) puts every use of
//! one before the production of the other. A position in one launch order is not enough once
//! lanes or streams run side by side; for a plan that runs its steps one at a time the
//! relation is the total order of the steps, and the rule is the usual lifetime overlap.
//! Offsets are assigned greedily, largest value first (the "greedy by size" strategy of
//! TFLite and ONNX Runtime), into the lowest gap that fits.
//!
//! Every planner of the engine uses it: the sequential order's [`super::plan`], the
//! per-device arenas of a concurrent CPU/Virtual plan (`plan::hb_memory`) and the GPU plan's
//! arena (`gpu::memory`).

/// Which step finishes before which starts, in every run.
#[derive(Debug)]
pub(crate) enum HappensBefore {
    /// Steps run one at a time in index order.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    Total,
    /// Transitive reachability: `bits[a]` has bit `b` when `b` waits (directly or not) for `a`.
    Reach { words: usize, bits: Vec<u64> },
}

impl HappensBefore {
    /// From each step's direct successors (any numbering; the steps must form a DAG).
    pub(crate) fn new(successors: &[Vec<usize>]) -> Self {
        let n = successors.len();
        let words = n.div_ceil(64).max(1);
        let mut bits = vec![0u64; n * words];
        // Kahn's order, then rows filled from the sinks back.
        let mut pending = vec![0u32; n];
        for s in successors.iter().flatten() {
            pending[*s] += 1;
        }
        let mut order: Vec<usize> = (0..n).filter(|&t| pending[t] == 0).collect();
        let mut i = 0;
        while i < order.len() {
            for &s in &successors[order[i]] {
                pending[s] -= 1;
                if pending[s] == 0 {
                    order.push(s);
                }
            }
            i += 1;
        }
        for &a in order.iter().rev() {
            for &s in &successors[a] {
                bits[a * words + s / 64] |= 1 << (s % 64);
                for w in 0..words {
                    bits[a * words + w] |= bits[s * words + w];
                }
            }
        }
        HappensBefore::Reach { words, bits }
    }

    /// True when step `a` finishes before step `b` starts in every run.
    pub(crate) fn before(&self, a: usize, b: usize) -> bool {
        match self {
            HappensBefore::Total => a < b,
            HappensBefore::Reach { words, bits } => bits[a * words + b / 64] & (1 << (b % 64)) != 0,
        }
    }
}

/// A value (or several values that live in one piece of memory, such as a node's output and
/// its reshapes) to place: its size and the steps that write and read it.
#[derive(Debug, Clone)]
pub(crate) struct Buffer {
    /// Bytes (the largest of its values').
    pub(crate) bytes: usize,
    /// The step that writes it.
    pub(crate) producer: usize,
    /// The steps that read it.
    pub(crate) readers: Vec<usize>,
}

impl Buffer {
    /// Every use of `self` happens before `other` is written.
    fn done_before(&self, other: &Buffer, hb: &HappensBefore) -> bool {
        let done = |s: usize| hb.before(s, other.producer);
        done(self.producer) && self.readers.iter().all(|&r| done(r))
    }

    /// Whether the two may be alive at the same time.
    pub(crate) fn may_overlap(&self, other: &Buffer, hb: &HappensBefore) -> bool {
        !self.done_before(other, hb) && !other.done_before(self, hb)
    }
}

/// Offsets for `buffers` in one shared region (each size rounded up to `align`), and the
/// region's size.
pub(crate) fn share(buffers: &[Buffer], hb: &HappensBefore, align: usize) -> (Vec<usize>, usize) {
    let rounded = |b: &Buffer| b.bytes.div_ceil(align).max(1) * align;
    let mut by_size: Vec<usize> = (0..buffers.len()).collect();
    by_size.sort_by(|&a, &b| rounded(&buffers[b]).cmp(&rounded(&buffers[a])).then(a.cmp(&b)));
    let mut offsets = vec![0; buffers.len()];
    let mut placed: Vec<usize> = Vec::with_capacity(buffers.len());
    let mut size = 0;
    for i in by_size {
        let busy = placed
            .iter()
            .filter(|&&p| buffers[p].may_overlap(&buffers[i], hb))
            .map(|&p| (offsets[p], offsets[p] + rounded(&buffers[p])))
            .collect();
        let bytes = rounded(&buffers[i]);
        offsets[i] = first_fit(busy, bytes);
        size = size.max(offsets[i] + bytes);
        placed.push(i);
    }
    (offsets, size)
}

/// The first two buffers that share bytes while they may be alive at the same time.
#[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
pub(crate) fn conflict(
    buffers: &[Buffer],
    offsets: &[usize],
    hb: &HappensBefore,
) -> Option<(usize, usize)> {
    for a in 0..buffers.len() {
        for b in a + 1..buffers.len() {
            let (oa, ob) = (offsets[a], offsets[b]);
            let overlap = oa < ob + buffers[b].bytes && ob < oa + buffers[a].bytes;
            if overlap && buffers[a].may_overlap(&buffers[b], hb) {
                return Some((a, b));
            }
        }
    }
    None
}

/// The lowest offset where `bytes` fit between the `[start, end)` ranges already taken by
/// values that may be live at the same time.
fn first_fit(mut busy: Vec<(usize, usize)>, bytes: usize) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(producer: usize, readers: &[usize]) -> Buffer {
        Buffer {
            bytes: 100,
            producer,
            readers: readers.to_vec(),
        }
    }

    #[test]
    fn values_share_only_when_ordered() {
        // Steps 0 → 1 → 3 on one stream, 0 → 2 on another, 2 → 3.
        let hb = HappensBefore::new(&[vec![1, 2], vec![3], vec![3], vec![]]);
        assert!(hb.before(0, 3) && hb.before(2, 3) && !hb.before(1, 2) && !hb.before(2, 1));
        // Step 0's output is read by 1 and 2; step 1's by 3; step 2's by 3; step 3's by none.
        let buffers = [
            buffer(0, &[1, 2]),
            buffer(1, &[3]),
            buffer(2, &[3]),
            buffer(3, &[]),
        ];
        let (offsets, size) = share(&buffers, &hb, 64);
        // 1 and 2 run concurrently with each other's outputs alive: three distinct places, and
        // step 3's output may take step 0's place (both its readers happen before step 3).
        assert_ne!(offsets[0], offsets[1]);
        assert_ne!(offsets[0], offsets[2]);
        assert_ne!(offsets[1], offsets[2]);
        assert_eq!(offsets[3], offsets[0]);
        assert_eq!(size, 3 * 128);
        assert_eq!(conflict(&buffers, &offsets, &hb), None);
        // Moving step 3's output onto step 1's is caught.
        let wrong = [offsets[0], offsets[1], offsets[2], offsets[1]];
        assert_eq!(conflict(&buffers, &wrong, &hb), Some((1, 3)));
    }

    #[test]
    fn the_total_order_is_lifetime_overlap() {
        // A chain: 0 → 1 → 2 → 3. Value of 0 read by 1; of 1 by 3; of 2 by 3.
        let buffers = [buffer(0, &[1]), buffer(1, &[3]), buffer(2, &[3])];
        let chain = HappensBefore::new(&[vec![1], vec![2], vec![3], vec![]]);
        for hb in [HappensBefore::Total, chain] {
            let (offsets, size) = share(&buffers, &hb, 64);
            // 0's value is dead once 1 ran: 2's value may take its place; 1's may not.
            assert_eq!(offsets[2], offsets[0]);
            assert_ne!(offsets[1], offsets[0]);
            assert_eq!(size, 2 * 128);
        }
    }

    #[test]
    fn numbering_need_not_follow_the_order() {
        // 2 → 0 → 1: Kahn's order, not the indices, decides.
        let hb = HappensBefore::new(&[vec![1], vec![], vec![0]]);
        assert!(hb.before(2, 1) && hb.before(2, 0) && hb.before(0, 1) && !hb.before(1, 2));
    }
}
