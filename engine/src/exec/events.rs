//! Completion events from a pre-created pool: how the executor observes device work that
//! finishes asynchronously. A CUDA event is recorded on a stream and queried; a Virtual
//! device's event completes at a deadline (its simulated copy time). Both go through this
//! path, so the Virtual device exercises what CUDA will use.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_queue::ArrayQueue;

/// A fixed pool of events, created once per session; acquiring and releasing never allocate.
pub struct EventPool {
    epoch: Instant,
    /// Deadline of each event in ns since `epoch` (`u64::MAX` when not recorded).
    deadlines: Vec<AtomicU64>,
    free: ArrayQueue<usize>,
}

/// A recorded event: completes when its work is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event(usize);

impl EventPool {
    /// A pool of `size` events.
    pub fn new(size: usize) -> Self {
        let free = ArrayQueue::new(size.max(1));
        for i in 0..size.max(1) {
            let _ = free.push(i);
        }
        EventPool {
            epoch: Instant::now(),
            deadlines: (0..size.max(1)).map(|_| AtomicU64::new(u64::MAX)).collect(),
            free,
        }
    }

    /// Records an event that completes at `deadline`; `None` when every event is in use
    /// (the caller completes the work synchronously instead).
    pub fn record(&self, deadline: Instant) -> Option<Event> {
        let i = self.free.pop()?;
        let ns = deadline.saturating_duration_since(self.epoch).as_nanos() as u64;
        self.deadlines[i].store(ns, Ordering::Release);
        Some(Event(i))
    }

    /// Whether the event has completed (`cudaEventQuery`).
    pub fn query(&self, e: Event) -> bool {
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.deadlines[e.0].load(Ordering::Acquire) <= now
    }

    /// Time until the event completes (zero when done).
    pub fn remaining(&self, e: Event) -> std::time::Duration {
        let now = self.epoch.elapsed().as_nanos() as u64;
        std::time::Duration::from_nanos(
            self.deadlines[e.0]
                .load(Ordering::Acquire)
                .saturating_sub(now),
        )
    }

    /// Returns a completed event to the pool.
    pub fn release(&self, e: Event) {
        self.deadlines[e.0].store(u64::MAX, Ordering::Release);
        let _ = self.free.push(e.0);
    }
}
