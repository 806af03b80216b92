//! What one run may take: the bytes of any tensor it makes, its wall time, and the iterations
//! of a `Loop`. A model or an input that asks for more gets [`Error::ResourceLimit`] (or, from
//! a kernel, [`KernelError::ResourceLimit`](spillway_kernels::KernelError::ResourceLimit)
//! naming the node), and the session stays usable.
//!
//! The limits of the run in progress are held by the thread that executes it, and by each
//! executor lane while it runs a task of it, so that nested runs (a `Loop`'s body, an `If`'s
//! branch) see them without being handed them.

use std::cell::Cell;
use std::time::{Duration, Instant};

use spillway_kernels::KernelError;

use crate::error::{Error, Result};

/// Limits of each run of a session (`SessionBuilder::with_run_limits`):
/// `RunLimits::default().with_timeout(Some(Duration::from_secs(5)))`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunLimits {
    /// The largest tensor a run may make, in bytes (default: half the machine's memory).
    pub max_tensor_bytes: Option<usize>,
    /// The longest a run may take; checked between nodes and between a `Loop`'s iterations
    /// (default: none).
    pub timeout: Option<Duration>,
    /// The most iterations one `Loop` node may run (default: none).
    pub max_loop_iterations: Option<u64>,
}

/// The limits of a run that has started.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Active {
    max_tensor_bytes: usize,
    deadline: Option<(Instant, Duration)>,
    max_loop_iterations: Option<u64>,
}

thread_local! {
    static CURRENT: Cell<Option<Active>> = const { Cell::new(None) };
}

impl RunLimits {
    /// The largest tensor a run may make, in bytes (`None`: half the machine's memory).
    pub fn with_max_tensor_bytes(mut self, bytes: Option<usize>) -> Self {
        self.max_tensor_bytes = bytes;
        self
    }

    /// The longest a run may take (`None`: no limit).
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The most iterations one `Loop` node may run (`None`: no limit).
    pub fn with_max_loop_iterations(mut self, iterations: Option<u64>) -> Self {
        self.max_loop_iterations = iterations;
        self
    }

    /// The limits of a run starting now.
    pub(crate) fn start(&self) -> Active {
        Active {
            max_tensor_bytes: self
                .max_tensor_bytes
                .unwrap_or_else(spillway_kernels::limits::default_max_tensor_bytes),
            deadline: self.timeout.map(|t| (Instant::now() + t, t)),
            max_loop_iterations: self.max_loop_iterations,
        }
    }
}

/// The limits of the run this thread is executing, if any.
pub(crate) fn current() -> Option<Active> {
    CURRENT.with(Cell::get)
}

/// Runs `f` under `active` on this thread (the kernels' tensor limit included), then puts the
/// previous limits back.
pub(crate) fn scoped<R>(active: Option<Active>, f: impl FnOnce() -> R) -> R {
    let Some(active) = active else {
        return f();
    };
    struct Restore(Option<Active>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(Some(active))));
    spillway_kernels::limits::with_max_tensor_bytes(active.max_tensor_bytes, f)
}

/// Fails once the run in progress has passed its time limit.
pub(crate) fn check_deadline() -> Result<()> {
    match current().and_then(|a| a.deadline) {
        Some((deadline, limit)) if Instant::now() > deadline => Err(Error::ResourceLimit(format!(
            "the run took longer than its time limit of {limit:?}"
        ))),
        _ => Ok(()),
    }
}

/// Fails when a `Loop` is about to start iteration `iteration` (counted from 0) past the
/// run's limit, or past the run's time (the caller names the node).
pub(crate) fn check_loop(iteration: u64) -> std::result::Result<(), KernelError> {
    if let Some(max) = current().and_then(|a| a.max_loop_iterations)
        && iteration >= max
    {
        return Err(KernelError::ResourceLimit(format!(
            "more than {max} iterations"
        )));
    }
    check_deadline().map_err(|e| KernelError::ResourceLimit(e.to_string()))
}
