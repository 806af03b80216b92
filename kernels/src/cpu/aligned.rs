//! Floats that start on a cache line.
//!
//! The allocator aligns a large block to 16 bytes only, so three in four 64-byte vector loads
//! from a packed panel at such an address straddle two cache lines, and each of those costs
//! two loads. Packed weights and the scratch that packed operands stream from are laid out in
//! whole vectors from their start: started on a line, every such load stays within one (the
//! position tiles' weights alone made a chain of 1×1 convolutions 5 % faster).

/// Bytes of a cache line, the alignment of the first float.
const LINE: usize = 64;
/// Floats that fit in a line: the most that skipping to the next line can cost.
const LINE_FLOATS: usize = LINE / size_of::<f32>();

/// A run of `f32`s whose first element starts a cache line.
pub(crate) struct AlignedFloats {
    data: Vec<f32>,
    /// Floats skipped at the start of `data` to reach a line.
    start: usize,
}

impl AlignedFloats {
    /// No floats (nothing allocated).
    pub(crate) const fn new() -> Self {
        AlignedFloats {
            data: Vec::new(),
            start: 0,
        }
    }

    /// `len` zeros.
    pub(crate) fn zeroed(len: usize) -> Self {
        let mut data = vec![0.0f32; len + LINE_FLOATS];
        let start = data.as_mut_ptr().align_offset(LINE);
        // `align_offset` may give up (never for a plain heap pointer); unaligned is then only
        // slower, so the run just starts at the first float.
        let start = if start < LINE_FLOATS { start } else { 0 };
        data.truncate(start + len);
        AlignedFloats { data, start }
    }

    /// The floats of `values`, copied.
    pub(crate) fn from_slice(values: &[f32]) -> Self {
        let mut out = Self::zeroed(values.len());
        out.as_mut_slice().copy_from_slice(values);
        out
    }

    /// Grows to at least `len` floats (zeros after the old ones; a fresh block when it grows).
    pub(crate) fn ensure(&mut self, len: usize) {
        if self.len() < len {
            let mut grown = Self::zeroed(len);
            grown.as_mut_slice()[..self.len()].copy_from_slice(self.as_slice());
            *self = grown;
        }
    }

    /// Floats held.
    pub(crate) fn len(&self) -> usize {
        self.data.len() - self.start
    }

    /// The floats.
    pub(crate) fn as_slice(&self) -> &[f32] {
        &self.data[self.start..]
    }

    /// The floats, to write.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data[self.start..]
    }
}

/// A copy is aligned too (a cloned `Vec` may not start where the original did within a line).
impl Clone for AlignedFloats {
    fn clone(&self) -> Self {
        Self::from_slice(self.as_slice())
    }
}

/// Equal when the floats are, wherever each run starts.
impl PartialEq for AlignedFloats {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl std::fmt::Debug for AlignedFloats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedFloats")
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_starts_on_a_line_and_keeps_its_floats() {
        for len in [0, 1, 15, 16, 17, 1000, 1 << 20] {
            let values: Vec<f32> = (0..len).map(|i| i as f32).collect();
            let run = AlignedFloats::from_slice(&values);
            assert_eq!(run.as_slice().as_ptr() as usize % LINE, 0, "len {len}");
            assert_eq!(run.as_slice(), &values[..]);
            let copy = run.clone();
            assert_eq!(
                copy.as_slice().as_ptr() as usize % LINE,
                0,
                "clone of {len}"
            );
            assert_eq!(copy, run);
        }
    }

    #[test]
    fn growing_keeps_the_old_floats_and_the_alignment() {
        let mut run = AlignedFloats::from_slice(&[1.0, 2.0, 3.0]);
        run.ensure(2);
        assert_eq!(run.len(), 3);
        run.ensure(5000);
        assert_eq!(run.len(), 5000);
        assert_eq!(&run.as_slice()[..4], &[1.0, 2.0, 3.0, 0.0]);
        assert_eq!(run.as_slice().as_ptr() as usize % LINE, 0);
    }
}
