//! Ready queues: lock-free (`crossbeam_queue::SegQueue`, the default) or mutex-guarded (kept
//! only to measure what the lock costs, as SIR+ §6 does).

use std::collections::VecDeque;
use std::sync::Mutex;

use crossbeam_queue::SegQueue;

/// Which ready-queue implementation a session uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueKind {
    /// Lock-free MPMC queues.
    #[default]
    LockFree,
    /// `Mutex<VecDeque>` queues (for comparison benchmarks).
    Mutex,
}

/// A multi-producer, multi-consumer FIFO of ready tasks.
// One queue per lane, created once: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum ReadyQueue<T> {
    /// Lock-free.
    LockFree(SegQueue<T>),
    /// Mutex-guarded.
    Mutex(Mutex<VecDeque<T>>),
}

impl<T> ReadyQueue<T> {
    /// An empty queue of the given kind.
    pub fn new(kind: QueueKind) -> Self {
        match kind {
            QueueKind::LockFree => ReadyQueue::LockFree(SegQueue::new()),
            QueueKind::Mutex => ReadyQueue::Mutex(Mutex::new(VecDeque::new())),
        }
    }

    /// Appends.
    pub fn push(&self, item: T) {
        match self {
            ReadyQueue::LockFree(q) => q.push(item),
            ReadyQueue::Mutex(q) => q.lock().unwrap_or_else(|p| p.into_inner()).push_back(item),
        }
    }

    /// Takes the oldest item.
    pub fn pop(&self) -> Option<T> {
        match self {
            ReadyQueue::LockFree(q) => q.pop(),
            ReadyQueue::Mutex(q) => q.lock().unwrap_or_else(|p| p.into_inner()).pop_front(),
        }
    }

    /// True when empty (a hint: another thread may push right after).
    pub fn is_empty(&self) -> bool {
        match self {
            ReadyQueue::LockFree(q) => q.is_empty(),
            ReadyQueue::Mutex(q) => q.lock().unwrap_or_else(|p| p.into_inner()).is_empty(),
        }
    }
}
