//! A lower bound on the makespan of any schedule, printed beside every makespan.

use crate::graph::{CostGraph, Dag, DeviceKind, SlowdownModel};
use crate::topology::{Topology, op_time};

mod heads;

/// `max(critical path, work bound)`:
/// * critical path with free copies, each operator at its fastest device;
/// * the same path with copies counted (heads and tails per device: each input is produced on
///   the same device, which then runs those producers first, or copied in; and no operator
///   starts before all its ancestors' work is done, `head(v) ≥ h + W({u ancestor of v :
///   head(u) ≥ h}) / capacity` for every threshold `h`, and the mirror image for tails; see
///   the private `heads` module), which is what lifts the bound where copies cost as much as
///   operators and where graphs narrow to one operator between wide stages;
/// * work spread over the devices by speed: `Σ_v min_k cost(v,k) / Σ_d lanes_d · speed_d`,
///   since a lane progresses at most `speed` units of cost per µs;
/// * under [`SlowdownModel::Resource`], also the same with GPU costs weighted by resource demand
///   over `Σ_gpu speed + Σ_cpu speed · lanes`: a GPU never progresses more than `speed` units of
///   resource-weighted cost per µs.
///
/// * windows (heads and tails): for any set `S` of operators, none starts before the
///   smallest head `h(S)` (its fastest chain of predecessors, copies free) and each must finish
///   by `T − q(S)` (`q(S)`: the smallest fastest chain of successors), so all of `S`'s work is
///   done inside a window of length `T − h(S) − q(S)`: `T ≥ h(S) + q(S) + W(S) / capacity`,
///   with `W`/capacity either of the two work measures above. Checked for the sets
///   `{v : head_v ≥ h}` and `{v : tail_v ≥ q}` over every threshold (two sorts). This is the
///   classic head–body–tail bound of machine scheduling; it is what the critical path and the
///   work bound each miss when a graph ramps up and down.
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
    let area_cap: f64 = t
        .devices
        .iter()
        .map(|x| match x.kind {
            DeviceKind::Gpu => x.speed,
            DeviceKind::Cpu => x.speed * x.streams as f64,
        })
        .sum();
    let mut area = 0.0;
    if g.concurrency.model == SlowdownModel::Resource && g.concurrency.table.is_empty() {
        let r = |v: usize| g.ops[v].resource.min(1.0);
        area = (0..n)
            .map(|v| min_cost(v, &|k, c| if k == DeviceKind::Gpu { c * r(v) } else { c }))
            .sum::<f64>()
            / area_cap;
    }
    let mut tail = vec![0.0f64; n];
    for &v in dag.topo.iter().rev() {
        tail[v] = dag.succs[v]
            .iter()
            .map(|&(w, _)| fastest[w] + tail[w])
            .fold(0.0, f64::max);
    }
    // Per operator, the larger of its two work measures' share of the horizon.
    let plain_cap = cap;
    let share: Vec<(f64, f64)> = (0..n)
        .map(|v| {
            let w = min_cost(v, &|_, c| c) / plain_cap;
            let a = if area > 0.0 {
                let r = g.ops[v].resource.min(1.0);
                min_cost(v, &|k, c| if k == DeviceKind::Gpu { c * r } else { c }) / area_cap
            } else {
                0.0
            };
            (w, a)
        })
        .collect();
    let mut head: Vec<f64> = (0..n).map(|v| finish[v] - fastest[v]).collect();
    let mut path = cp;
    if let Ok(view) = t.view() {
        let time: Vec<Vec<f64>> = (0..n)
            .map(|v| {
                (0..d)
                    .map(|dev| op_time(g, t, v, dev).unwrap_or(f64::INFINITY))
                    .collect()
            })
            .collect();
        let ht = heads::heads_tails(g, dag, t, &view, &time, &share);
        path = path.max(ht.path);
        for v in 0..n {
            head[v] = head[v].max(ht.head[v]);
            tail[v] = tail[v].max(ht.tail[v]);
        }
    }
    let windows = window_bound(&head, &tail, &share).max(window_bound(&tail, &head, &share));
    path.max(work).max(area).max(windows)
}

/// `max over thresholds x of (x + min_{v: key_v ≥ x} other_v + Σ_{v: key_v ≥ x} share_v)`,
/// each of the two shares summed separately (a set's bound uses one capacity at a time).
fn window_bound(key: &[f64], other: &[f64], share: &[(f64, f64)]) -> f64 {
    let mut idx: Vec<usize> = (0..key.len()).collect();
    idx.sort_by(|&a, &b| key[b].total_cmp(&key[a]));
    let (mut w, mut a, mut min_other) = (0.0f64, 0.0f64, f64::INFINITY);
    let mut best = 0.0f64;
    for &v in &idx {
        w += share[v].0;
        a += share[v].1;
        min_other = min_other.min(other[v]);
        // `key[v]` is the smallest key so far: the set {key ≥ key[v]} is what has been summed
        // (ties are added one by one; a partial tie set is a subset and still a valid set).
        best = best.max(key[v] + min_other + w.max(a));
    }
    best
}
