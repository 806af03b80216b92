//! Executors: run a compiled plan.

mod sequential;

pub use sequential::{RunStats, SequentialPlan, build_kernel};
