//! Executors: run a compiled plan.

mod control_flow;
mod events;
pub(crate) mod kernel_pool;
pub(crate) mod limits;
mod loop_append;
mod parallel;
mod queue;
pub(crate) mod run_site;
mod sequential;
mod trace;
pub mod value_ops;
mod work;

#[cfg(test)]
mod arena_tests;
#[cfg(test)]
mod pool_tests;

#[cfg(feature = "internals")]
pub use kernel_pool::with_workers_awake;
pub use limits::RunLimits;
pub use parallel::{ParallelExecutor, RunOptions};
pub use queue::QueueKind;
pub use sequential::{RunStats, SequentialPlan, build_kernel, build_kernel_with};
#[cfg(feature = "internals")]
pub use sequential::SequentialRun;
pub use trace::{TraceEvent, chrome_trace_json};
pub use work::Work;
