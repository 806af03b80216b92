//! The memory of dead values whose size the static plan could not know (shapes that depend on
//! the input image or on data), kept for the next output that fits.
//!
//! A detector's intermediates are mostly of symbolic size, so the static plan cannot give them
//! buffers of the right size: one slot per lifetime would hold whatever its last value left,
//! too small for the next large one, and every large output would be fresh memory whose pages
//! fault in on first write (hundreds of MiB per Faster R-CNN run). The pool instead keeps every
//! large buffer given back during a run and hands each output the smallest one that fits, much
//! as a best-fit arena does — and unlike such an arena it does not grow across runs: a buffer
//! that no output took during a whole run is freed at the end of it, so what the pool holds is
//! bounded by what the last run used.

use std::sync::Mutex;

use crate::output_buffer::Buffer;

/// Buffers below this size come from the allocator, which recycles them from its heap cheaply;
/// only larger ones (fresh mappings, faulted in page by page on every run) are worth pooling.
/// (At 64 KiB the pool kept more than the allocator would, and the resident set grew for a
/// few hundred runs of changing image sizes before it settled.)
pub const MIN_POOLED_BYTES: usize = 4 << 20;

/// A taken buffer may be larger than asked by this many bytes, or up to twice the size asked:
/// a huge buffer is kept for a value that needs it rather than lent to a small one.
const SLACK_BYTES: usize = 1 << 20;

/// Free buffers of dynamic-size values, shared by the threads of one run.
#[derive(Debug, Default)]
pub struct Pool {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    free: Vec<Entry>,
    /// Counts finished runs; an entry stamped with an older run was not used in the last one.
    run: u64,
    /// Buffers taken since the last run ended.
    taken: usize,
}

#[derive(Debug)]
struct Entry {
    buffer: Buffer,
    /// The run in which the buffer was last given back.
    run: u64,
}

impl Pool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps `buffer` for a later output (small buffers are dropped: the heap recycles them).
    pub fn give(&self, buffer: Buffer) {
        if buffer.bytes() < MIN_POOLED_BYTES {
            return;
        }
        if let Ok(mut state) = self.state.lock() {
            let run = state.run;
            state.free.push(Entry { buffer, run });
        }
    }

    /// The smallest free buffer of `T`s that holds `len` of them without being far larger;
    /// `None` when none fits (or `len` is too small to be worth pooling).
    pub fn take<T: 'static>(&self, len: usize) -> Option<Vec<T>> {
        let need = len.checked_mul(size_of::<T>())?;
        if need < MIN_POOLED_BYTES {
            return None;
        }
        let limit = need.saturating_mul(2).max(need.saturating_add(SLACK_BYTES));
        let mut state = self.state.lock().ok()?;
        let best = state
            .free
            .iter()
            .enumerate()
            .filter(|(_, e)| e.buffer.holds::<T>() && (need..=limit).contains(&e.buffer.bytes()))
            .min_by_key(|(_, e)| e.buffer.bytes())
            .map(|(i, _)| i)?;
        state.taken += 1;
        state.free.swap_remove(best).buffer.into_vec()
    }

    /// Ends a run: frees the buffers that were free throughout it (no output of the run took
    /// them), so the pool never holds more than the last run used, and then the smallest ones
    /// until at most twice `keep_bytes` remain (`keep_bytes`: the run's peak of live
    /// intermediates, when known; a buffer may hold a value of half its size, so the buffers
    /// live at that peak may be twice as large: with the peak itself as the bound, RetinaNet
    /// lost ten of its buffers every run and faulted 40 MiB of fresh pages in again). The large
    /// buffers, whose pages are the costly ones to fault in again, are the ones kept. Returns
    /// how many buffers outputs took during the run.
    pub fn end_run(&self, keep_bytes: Option<usize>) -> usize {
        let Ok(mut state) = self.state.lock() else {
            return 0;
        };
        let run = state.run;
        state.free.retain(|e| e.run == run);
        if let Some(keep) = keep_bytes {
            state
                .free
                .sort_by_key(|e| std::cmp::Reverse(e.buffer.bytes()));
            let mut held = 0usize;
            state.free.retain(|e| {
                held += e.buffer.bytes();
                held <= keep.saturating_mul(2)
            });
        }
        state.run += 1;
        std::mem::take(&mut state.taken)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.state
            .lock()
            .map_or(0, |s| s.free.iter().map(|e| e.buffer.bytes()).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;

    fn buffer(len: usize) -> Buffer {
        let t = Tensor::from_shape_vec(&[len], vec![1.0f32; len]).expect("shape");
        Buffer::reclaim(t).expect("unique")
    }

    const BIG: usize = MIN_POOLED_BYTES / 2; // floats: twice the pooled minimum in bytes

    #[test]
    fn the_smallest_fitting_buffer_of_the_right_type_is_taken() {
        let pool = Pool::new();
        pool.give(buffer(BIG));
        pool.give(buffer(2 * BIG));
        pool.give(buffer(4 * BIG));
        assert!(pool.take::<i64>(BIG / 2).is_none(), "no i64 buffers");
        let v = pool.take::<f32>(BIG + 1).expect("fits");
        assert_eq!(v.capacity(), 2 * BIG, "the smallest that holds it");
        assert_eq!(pool.bytes(), 5 * BIG * 4);
        assert!(pool.take::<f32>(8 * BIG).is_none(), "none is large enough");
    }

    #[test]
    fn small_requests_and_far_larger_buffers_are_not_matched() {
        let pool = Pool::new();
        pool.give(buffer(16));
        assert_eq!(pool.bytes(), 0, "small buffers are left to the heap");
        pool.give(buffer(8 * BIG));
        assert!(pool.take::<f32>(16).is_none());
        assert!(
            pool.take::<f32>(BIG).is_none(),
            "an 8× larger buffer is kept for a value that needs it"
        );
        assert!(pool.take::<f32>(5 * BIG).is_some());
    }

    #[test]
    fn a_run_keeps_its_largest_buffers_up_to_twice_the_bytes_asked() {
        let pool = Pool::new();
        for len in [BIG, 4 * BIG, 2 * BIG] {
            pool.give(buffer(len));
        }
        pool.end_run(Some(3 * BIG * 4 + 50));
        assert_eq!(
            pool.bytes(),
            6 * BIG * 4,
            "the two largest: up to twice the bytes asked"
        );
        let v = pool.take::<f32>(BIG).expect("fits");
        assert_eq!(v.capacity(), 2 * BIG, "the smallest was freed");
    }

    #[test]
    fn buffers_unused_for_a_whole_run_are_freed() {
        let pool = Pool::new();
        pool.give(buffer(BIG));
        pool.give(buffer(2 * BIG));
        assert_eq!(pool.end_run(None), 0, "nothing was taken");
        assert_eq!(
            pool.bytes(),
            3 * BIG * 4,
            "both were given back in the run that ended"
        );
        // The next run takes one and gives it back; the other stays free all run.
        let v = pool.take::<f32>(BIG).expect("fits");
        pool.give(
            Buffer::reclaim(Tensor::from_shape_vec(&[v.len()], v).expect("shape")).expect("unique"),
        );
        assert_eq!(pool.end_run(None), 1, "one buffer was taken");
        assert_eq!(pool.bytes(), BIG * 4, "the unused one was freed");
    }
}
