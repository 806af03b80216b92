//! The output of every policy.

use serde::{Deserialize, Serialize};

use crate::error::{PlacementError, Result};
use crate::graph::{CostGraph, Dag};
use crate::topology::{Topology, op_time};

/// Where and when one operator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpPlacement {
    /// Device index.
    pub device: usize,
    /// Stream (GPU) or lane (CPU) on that device. Ignored for staged devices.
    pub stream: usize,
    /// Global launch position (a permutation of `0..n` that is a topological order).
    pub order: usize,
    /// Stage on its device, where the policy uses stages (HIOS, IOS). Either every operator on a
    /// device has a stage or none has; a stage holds at most as many operators as the device
    /// has streams (each needs one).
    #[serde(default)]
    pub stage: Option<usize>,
}

/// A schedule: one placement per operator, indexed by op id.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Schedule {
    /// Name of the policy that made it.
    #[serde(default)]
    pub policy: String,
    /// Per operator.
    pub ops: Vec<OpPlacement>,
}

impl Schedule {
    /// Builds a schedule from per-op devices and streams and a launch sequence of op ids.
    pub fn from_sequence(
        policy: &str,
        device: &[usize],
        stream: &[usize],
        sequence: &[usize],
    ) -> Self {
        let mut ops: Vec<OpPlacement> = device
            .iter()
            .zip(stream)
            .map(|(&device, &stream)| OpPlacement {
                device,
                stream,
                order: usize::MAX,
                stage: None,
            })
            .collect();
        for (pos, &v) in sequence.iter().enumerate() {
            if let Some(o) = ops.get_mut(v) {
                o.order = pos;
            }
        }
        Schedule {
            policy: policy.to_string(),
            ops,
        }
    }

    /// Op ids in launch order.
    pub fn sequence(&self) -> Vec<usize> {
        let mut seq: Vec<usize> = (0..self.ops.len()).collect();
        seq.sort_by_key(|&v| self.ops[v].order);
        seq
    }

    /// Checks the schedule against the graph and topology: sizes, device and stream ranges,
    /// supported kinds, a launch order that is a topological permutation, consistent stages.
    pub fn validate(&self, g: &CostGraph, dag: &Dag, t: &Topology) -> Result<()> {
        let n = g.ops.len();
        if self.ops.len() != n {
            return Err(PlacementError::InvalidSchedule(format!(
                "{} placements for {n} operators",
                self.ops.len()
            )));
        }
        let d = t.devices.len();
        let mut seen = vec![false; n];
        let mut staged = vec![None::<bool>; d];
        for (v, p) in self.ops.iter().enumerate() {
            let dev = t
                .devices
                .get(p.device)
                .ok_or(PlacementError::DeviceOutOfRange {
                    device: p.device,
                    n: d,
                })?;
            if p.stage.is_none() && p.stream >= dev.streams {
                return Err(PlacementError::InvalidSchedule(format!(
                    "operator {v} on stream {} of device {} which has {}",
                    p.stream, p.device, dev.streams
                )));
            }
            if op_time(g, t, v, p.device).is_none() {
                return Err(PlacementError::Unsupported {
                    op: v,
                    device: p.device,
                    kind: dev.kind,
                });
            }
            if p.order >= n || std::mem::replace(&mut seen[p.order], true) {
                return Err(PlacementError::InvalidSchedule(format!(
                    "launch order {} of operator {v} is out of range or repeated",
                    p.order
                )));
            }
            let s = p.stage.is_some();
            if *staged[p.device].get_or_insert(s) != s {
                return Err(PlacementError::InvalidSchedule(format!(
                    "device {} mixes staged and unstaged operators",
                    p.device
                )));
            }
        }
        let mut per_stage: std::collections::HashMap<(usize, usize), usize> =
            std::collections::HashMap::new();
        for p in &self.ops {
            if let Some(st) = p.stage {
                let k = per_stage.entry((p.device, st)).or_insert(0);
                *k += 1;
                if *k > t.devices[p.device].streams {
                    return Err(PlacementError::InvalidSchedule(format!(
                        "stage {st} of device {} holds more operators than its {} streams",
                        p.device, t.devices[p.device].streams
                    )));
                }
            }
        }
        for (u, succ) in dag.succs.iter().enumerate() {
            for &(v, _) in succ {
                if self.ops[u].order >= self.ops[v].order {
                    return Err(PlacementError::InvalidSchedule(format!(
                        "launch order is not topological: {u} → {v}"
                    )));
                }
                if let (Some(a), Some(b)) = (self.ops[u].stage, self.ops[v].stage)
                    && self.ops[u].device == self.ops[v].device
                    && a >= b
                {
                    return Err(PlacementError::InvalidSchedule(format!(
                        "operators {u} → {v} share device {} but stage {a} is not before {b}",
                        self.ops[u].device
                    )));
                }
            }
        }
        Ok(())
    }

    /// JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}
