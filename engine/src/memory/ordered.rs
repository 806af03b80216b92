//! Sharing memory among values of a concurrent plan: two values may share bytes only if the
//! plan's happens-before order (data edges and stream or lane order: exactly what the
//! executor keeps) puts every use of one before the production of the other. A position in
//! one launch order is not enough once streams run side by side. The GPU plan uses it; the
//! CPU's concurrent plans use the same rule (`plan::hb_memory`).

use super::first_fit;

/// Values that live in one piece of memory: a node's output and the aliases (reshapes) of it.
#[derive(Debug, Clone)]
pub(crate) struct Buffer {
    /// Bytes (the largest of its values').
    pub(crate) bytes: usize,
    /// Launch position of the step that writes it.
    pub(crate) producer: usize,
    /// Launch positions of the steps that read it.
    pub(crate) readers: Vec<usize>,
}

/// `before(a, b)`: step `a` happens before step `b` (launch positions).
#[derive(Debug)]
pub(crate) struct HappensBefore {
    words: usize,
    bits: Vec<u64>,
}

impl HappensBefore {
    /// From each step's direct successors (launch positions, all later than the step).
    pub(crate) fn new(successors: &[Vec<usize>]) -> Self {
        let n = successors.len();
        let words = n.div_ceil(64).max(1);
        let mut bits = vec![0u64; n * words];
        for a in (0..n).rev() {
            for &s in &successors[a] {
                bits[a * words + s / 64] |= 1 << (s % 64);
                for w in 0..words {
                    bits[a * words + w] |= bits[s * words + w];
                }
            }
        }
        HappensBefore { words, bits }
    }

    pub(crate) fn before(&self, a: usize, b: usize) -> bool {
        self.bits[a * self.words + b / 64] & (1 << (b % 64)) != 0
    }
}

/// Offsets for `buffers` in one shared region (each rounded up to `align`), and its size.
/// `buffers` are in the launch order of their producers.
pub(crate) fn share(buffers: &[Buffer], hb: &HappensBefore, align: usize) -> (Vec<usize>, usize) {
    let mut offsets: Vec<usize> = Vec::with_capacity(buffers.len());
    let mut size = 0;
    for (i, c) in buffers.iter().enumerate() {
        // Earlier buffers still in use when `c` is written: some use of theirs is not ordered
        // before `c`'s producer.
        let busy = buffers[..i]
            .iter()
            .zip(&offsets)
            .filter(|(b, _)| {
                let done = |s: usize| hb.before(s, c.producer);
                !(done(b.producer) && b.readers.iter().all(|&r| done(r)))
            })
            .map(|(b, &o)| (o, o + b.bytes.div_ceil(align) * align))
            .collect();
        let bytes = c.bytes.div_ceil(align) * align;
        let offset = first_fit(busy, bytes.max(align));
        size = size.max(offset + bytes);
        offsets.push(offset);
    }
    (offsets, size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_share_only_when_ordered() {
        // Steps 0 → 1 → 3 on one stream, 0 → 2 on another, 2 → 3.
        let hb = HappensBefore::new(&[vec![1, 2], vec![3], vec![3], vec![]]);
        assert!(hb.before(0, 3) && hb.before(2, 3) && !hb.before(1, 2) && !hb.before(2, 1));
        let buffer = |producer, readers: &[usize]| Buffer {
            bytes: 100,
            producer,
            readers: readers.to_vec(),
        };
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
    }
}
