//! Executors: run a compiled plan.

mod control_flow;
mod sequential;

pub use sequential::{RunStats, SequentialPlan, build_kernel};
