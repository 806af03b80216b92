//! The crate's typed error.

use thiserror::Error;

/// Every way placement can fail. Bad input is reported, never a panic.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PlacementError {
    /// An edge names an operator index that does not exist.
    #[error("edge {edge} refers to operator {op}, but the graph has {n} operators")]
    DanglingEdge {
        /// Index of the edge in `CostGraph::edges`.
        edge: usize,
        /// The out-of-range operator index.
        op: usize,
        /// Number of operators.
        n: usize,
    },
    /// The graph is not acyclic.
    #[error("the graph has a cycle through operator {op}")]
    Cycle {
        /// An operator on the cycle.
        op: usize,
    },
    /// A cost, size, speed or bandwidth is negative, NaN or infinite.
    #[error("invalid value: {0}")]
    InvalidValue(String),
    /// A device index is out of range.
    #[error("device index {device} out of range ({n} devices)")]
    DeviceOutOfRange {
        /// The offending index.
        device: usize,
        /// Number of devices.
        n: usize,
    },
    /// The topology is malformed.
    #[error("invalid topology: {0}")]
    InvalidTopology(String),
    /// The schedule does not fit the graph or the topology.
    #[error("invalid schedule: {0}")]
    InvalidSchedule(String),
    /// An operator has no cost for the kind of device it was put on.
    #[error("operator {op} has no cost for device {device} ({kind:?})")]
    Unsupported {
        /// Operator index.
        op: usize,
        /// Device index.
        device: usize,
        /// The device's kind.
        kind: crate::DeviceKind,
    },
    /// A copy is needed between two devices that have no link.
    #[error("no link from device {src} to device {dst}")]
    NoLink {
        /// Source device.
        src: usize,
        /// Destination device.
        dst: usize,
    },
    /// The schedule's stage or stream order waits on itself.
    #[error("deadlock: {0}")]
    Deadlock(String),
    /// An exponential policy was asked to solve a graph over its size limit.
    #[error("{policy} is exponential; it accepts at most {limit} operators, the graph has {n}")]
    TooLarge {
        /// Policy name.
        policy: &'static str,
        /// The graph's size.
        n: usize,
        /// The limit.
        limit: usize,
    },
    /// A policy does not apply to this graph/topology (e.g. no GPU).
    #[error("{policy} does not apply: {reason}")]
    NotApplicable {
        /// Policy name.
        policy: &'static str,
        /// Why.
        reason: String,
    },
    /// The MILP solver failed.
    #[error("solver: {0}")]
    Solver(String),
}

/// Result with [`PlacementError`].
pub type Result<T> = std::result::Result<T, PlacementError>;

/// Checks that `x` is finite and non-negative.
pub(crate) fn check_nonneg(x: f64, what: impl FnOnce() -> String) -> Result<()> {
    if x.is_finite() && x >= 0.0 {
        Ok(())
    } else {
        Err(PlacementError::InvalidValue(format!("{} = {x}", what())))
    }
}
