//! What a simulation reports: when each operator and copy ran, and per-device totals.

use serde::{Deserialize, Serialize};

/// When one operator ran.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct OpTiming {
    /// Device.
    pub device: usize,
    /// Stream or lane (for staged devices: the position inside its stage).
    pub stream: usize,
    /// When its last input arrived.
    pub ready: f64,
    /// Start.
    pub start: f64,
    /// Finish (for staged operators: the end of the stage).
    pub finish: f64,
}

/// One copy between devices.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CopyTiming {
    /// Producing operator.
    pub producer: usize,
    /// Source device.
    pub src: usize,
    /// Destination device.
    pub dst: usize,
    /// Bytes moved.
    pub bytes: f64,
    /// Start.
    pub start: f64,
    /// Finish.
    pub finish: f64,
}

/// Per-device totals.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct DeviceStats {
    /// Time with at least one operator running.
    pub busy_us: f64,
    /// `busy_us / makespan`.
    pub utilization: f64,
    /// Sum over its operators of `start − ready` (waiting for a stream or stage).
    pub queueing_us: f64,
    /// Sum of the durations of copies into this device.
    pub copy_in_us: f64,
    /// Operators placed here.
    pub ops: usize,
}

/// What the simulator reports.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SimResult {
    /// Finish of the last operator.
    pub makespan: f64,
    /// The [`lower_bound`](crate::lower_bound) of the same inputs, for comparison.
    pub lower_bound: f64,
    /// Per operator.
    pub ops: Vec<OpTiming>,
    /// Every copy, in start order.
    pub copies: Vec<CopyTiming>,
    /// Per device.
    pub devices: Vec<DeviceStats>,
}

impl SimResult {
    /// Operators of one (device, stream) in start order: the timeline of that row.
    pub fn timeline(&self, device: usize, stream: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.ops.len())
            .filter(|&i| self.ops[i].device == device && self.ops[i].stream == stream)
            .collect();
        v.sort_by(|&a, &b| self.ops[a].start.total_cmp(&self.ops[b].start));
        v
    }
}
