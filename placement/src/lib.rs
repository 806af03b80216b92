//! Placement: which device and stream runs each operator, and in which order.
//!
//! Pure functions from a [`CostGraph`] (operators, per-device-kind costs, bytes per edge) and a
//! [`Topology`] (devices, streams, links, buses) to a [`Schedule`]. Every policy is judged by
//! the same discrete-event [`simulate`], beside a [`lower_bound`]. No I/O, no threads.

// Graph algorithms here index several parallel arrays by the same op or device id.
#![allow(clippy::needless_range_loop)]

pub mod bound;
pub mod concurrency;
pub mod error;
pub mod gantt;
pub mod generate;
pub mod graph;
pub mod policy;
pub mod rng;
pub mod schedule;
pub mod sim;
pub mod topology;

pub use bound::lower_bound;
pub use concurrency::{ConcurrencyModel, GraphConcurrency};
pub use error::{PlacementError, Result};
pub use graph::{
    Boundness, Concurrency, ConcurrentSet, CostGraph, Dag, DeviceKind, Edge, Op, SlowdownModel,
};
pub use policy::{Options, Policy, place};
pub use schedule::{OpPlacement, Schedule};
pub use sim::{CopyTiming, DeviceStats, OpTiming, SimResult, dispatch, simulate};
pub use topology::{Bus, Device, Link, Topology};
