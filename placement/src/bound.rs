//! A lower bound on the makespan of any schedule, printed beside every makespan.

use crate::graph::{CostGraph, Dag, DeviceKind, SlowdownModel};
use crate::topology::{Topology, op_time};

/// `max(critical path, work bound)`:
/// * critical path with free copies, each operator at its fastest device;
/// * work spread over the devices by speed: `Σ_v min_k cost(v,k) / Σ_d lanes_d · speed_d`,
///   since a lane progresses at most `speed` units of cost per µs;
/// * under [`SlowdownModel::Resource`], also the same with GPU costs weighted by resource demand
///   over `Σ_gpu speed + Σ_cpu speed · lanes`: a GPU never progresses more than `speed` units of
///   resource-weighted cost per µs.
///
/// Valid as long as slowdowns are ≥ 1 and measured t(S) are no shorter than the slowest member
/// alone. Returns 0 for an empty graph and `+∞` if some operator runs on no device.
pub fn lower_bound(g: &CostGraph, dag: &Dag, t: &Topology) -> f64 {
    let n = g.ops.len();
    let d = t.devices.len();
    if n == 0 || d == 0 {
        return 0.0;
    }
    let fastest: Vec<f64> = (0..n)
        .map(|v| {
            (0..d)
                .filter_map(|dev| op_time(g, t, v, dev))
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let mut finish = vec![0.0f64; n];
    for &v in &dag.topo {
        let start = dag.preds[v]
            .iter()
            .map(|&(u, _)| finish[u])
            .fold(0.0, f64::max);
        finish[v] = start + fastest[v];
    }
    let cp = finish.iter().copied().fold(0.0, f64::max);
    // Device d of kind k works off at most `lanes_d · speed_d` units of kind-k cost per µs, so
    // `T ≥ Σ_v min_k cost(v, k) / Σ_d lanes_d · speed_d` (and likewise with resource weights).
    let kinds: Vec<DeviceKind> = t.devices.iter().map(|x| x.kind).collect();
    let min_cost = |v: usize, w: &dyn Fn(DeviceKind, f64) -> f64| {
        g.ops[v]
            .cost_us
            .iter()
            .filter(|(k, _)| kinds.contains(k))
            .map(|(&k, &c)| w(k, c))
            .fold(f64::INFINITY, f64::min)
    };
    let cap: f64 = t.devices.iter().map(|x| x.streams as f64 * x.speed).sum();
    let work = (0..n).map(|v| min_cost(v, &|_, c| c)).sum::<f64>() / cap;
    let mut area = 0.0;
    if g.concurrency.model == SlowdownModel::Resource && g.concurrency.table.is_empty() {
        let r = |v: usize| g.ops[v].resource.min(1.0);
        let cap: f64 = t
            .devices
            .iter()
            .map(|x| match x.kind {
                DeviceKind::Gpu => x.speed,
                DeviceKind::Cpu => x.speed * x.streams as f64,
            })
            .sum();
        area = (0..n)
            .map(|v| min_cost(v, &|k, c| if k == DeviceKind::Gpu { c * r(v) } else { c }))
            .sum::<f64>()
            / cap;
    }
    cp.max(work).max(area)
}
