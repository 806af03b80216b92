//! The pluggable slowdown model for operators sharing a GPU.

use crate::graph::{CostGraph, Dag, DeviceKind, SlowdownModel};
use crate::topology::Device;

/// How much operators running together on one device slow each other down.
///
/// The simulator calls it whenever the set of operators running on a device changes; every
/// operator in the set then progresses at rate `1 / slowdown` (processor sharing). Results must
/// be ≥ 1 (values below 1 are clamped), or the lower bound would not hold.
pub trait ConcurrencyModel {
    /// Common slowdown of `running` (op ids) on `device`; `alone_us[i]` is the time
    /// `running[i]` takes alone there.
    fn slowdown(&self, device: &Device, running: &[usize], alone_us: &[f64]) -> f64;
}

/// The model a [`CostGraph`] declares: its measured t(S) table first, else its [`SlowdownModel`].
/// CPU lanes never slow each other down.
pub struct GraphConcurrency<'a> {
    graph: &'a CostGraph,
    dag: &'a Dag,
}

impl<'a> GraphConcurrency<'a> {
    /// The model of `graph`.
    pub fn new(graph: &'a CostGraph, dag: &'a Dag) -> Self {
        GraphConcurrency { graph, dag }
    }

    /// t(S) of a set started together (a HIOS stage), on `device`: the measured table entry
    /// if there is one, else processor sharing under the model.
    pub fn stage_time(&self, device: &Device, ops: &[usize], alone_us: &[f64]) -> f64 {
        if ops.len() > 1 && device.kind == DeviceKind::Gpu && !self.dag.table.is_empty() {
            let mut key = ops.to_vec();
            key.sort_unstable();
            if let Some(&t) = self.dag.table.get(&key) {
                return t / device.speed;
            }
        }
        stage_time_with(self, device, ops, alone_us)
    }
}

/// Processor-sharing time of a set started together under `model`.
pub fn stage_time_with(
    model: &dyn ConcurrencyModel,
    device: &Device,
    ops: &[usize],
    alone_us: &[f64],
) -> f64 {
    let mut items: Vec<(usize, f64)> = ops.iter().copied().zip(alone_us.iter().copied()).collect();
    let mut t = 0.0;
    while !items.is_empty() {
        let ids: Vec<usize> = items.iter().map(|x| x.0).collect();
        let rem: Vec<f64> = items.iter().map(|x| x.1).collect();
        let f = model.slowdown(device, &ids, &rem).max(1.0);
        let m = rem.iter().copied().fold(f64::INFINITY, f64::min);
        t += m * f;
        for it in &mut items {
            it.1 -= m;
        }
        items.retain(|x| x.1 > 1e-12);
    }
    t
}

impl ConcurrencyModel for GraphConcurrency<'_> {
    fn slowdown(&self, device: &Device, running: &[usize], alone_us: &[f64]) -> f64 {
        if running.len() <= 1 || device.kind == DeviceKind::Cpu {
            return 1.0;
        }
        if !self.dag.table.is_empty() {
            let mut key = running.to_vec();
            key.sort_unstable();
            if let Some(&t) = self.dag.table.get(&key) {
                let longest = alone_us.iter().copied().fold(0.0, f64::max);
                if longest > 0.0 {
                    return (t / device.speed / longest).max(1.0);
                }
            }
        }
        match self.graph.concurrency.model {
            SlowdownModel::None => 1.0,
            SlowdownModel::Resource => {
                let r: f64 = running
                    .iter()
                    .filter_map(|&v| self.graph.ops.get(v))
                    .map(|o| o.resource)
                    .sum();
                r.max(1.0)
            }
            SlowdownModel::Linear { per_extra } => 1.0 + per_extra * (running.len() - 1) as f64,
        }
    }
}
