//! `HiosLp`: iterative longest-valid-path mapping (HIOS, seed 000, Alg. 1) followed by the
//! intra-GPU sliding window (Alg. 2, [`super::hios_window`]).

use crate::error::Result;
use crate::policy::common::Ctx;
use crate::policy::hios_window::parallelize;
use crate::schedule::Schedule;

/// One iteration of Alg. 1: the path found and the latency of mapping it onto each device.
#[derive(Debug, Clone, PartialEq)]
pub struct LpStep {
    /// Operators of the path (only the unmapped ones, in path order).
    pub path: Vec<usize>,
    /// Latency of the mapped subgraph with the path on device `i` (`INFINITY` if it cannot run there).
    pub latency: Vec<f64>,
    /// The device chosen (lowest latency, ties: lowest id).
    pub device: usize,
}

/// HIOS weights: vertex weight = mean time over devices, edge weight = mean copy time.
pub fn hios_weights(c: &Ctx) -> (Vec<f64>, Vec<f64>) {
    let vw = (0..c.n()).map(|v| c.mean_time(v)).collect();
    let ew = (0..c.g.edges.len()).map(|e| c.mean_comm(e)).collect();
    (vw, ew)
}

/// Priority indicator p(v): longest path from `v` to an exit counting vertex and edge weights.
pub fn hios_priority(c: &Ctx, vw: &[f64], ew: &[f64]) -> Vec<f64> {
    let mut p = vec![0.0; c.n()];
    for &v in c.dag.topo.iter().rev() {
        p[v] = vw[v]
            + c.dag.succs[v]
                .iter()
                .map(|&(s, e)| ew[e] + p[s])
                .fold(0.0, f64::max);
    }
    p
}

/// Alg. 1 lines 1–16: the device of every operator, and the trace of iterations.
///
/// Line 5's longest valid path is found exactly by a DP over the unmapped subgraph: a path may
/// begin with an edge from a mapped operator and end with an edge to one (both counted, as in
/// the Fig. 4 walk-through), and every unmapped vertex except its first and last must have no
/// edge from or to a mapped operator. Lines 10–13 (the latency of a tentative mapping) list-
/// schedule the mapped operators in decreasing priority, each at the earliest start on its
/// device (appending), counting copy time between devices and ignoring unmapped predecessors.
pub fn lp_mapping(c: &Ctx) -> (Vec<usize>, Vec<LpStep>) {
    let n = c.n();
    let (vw, ew) = hios_weights(c);
    let prio = hios_priority(c, &vw, &ew);
    let order = c.priority_order(&prio);
    let mut mapped = vec![false; n];
    let mut device = vec![0usize; n];
    let mut steps = Vec::new();
    let mut left = n;
    while left > 0 {
        let path = longest_valid_path(c, &mapped, &vw, &ew);
        for &v in &path {
            mapped[v] = true;
        }
        left -= path.len();
        let mut latency = vec![f64::INFINITY; c.d()];
        for (d, lat) in latency.iter_mut().enumerate() {
            if path.iter().any(|&v| !c.time[v][d].is_finite()) {
                continue;
            }
            for &v in &path {
                device[v] = d;
            }
            *lat = mapped_latency(c, &order, &mapped, &device);
        }
        let best = (0..c.d())
            .min_by(|&a, &b| latency[a].total_cmp(&latency[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        for &v in &path {
            device[v] = best;
        }
        steps.push(LpStep {
            path,
            latency,
            device: best,
        });
    }
    (device, steps)
}

fn mapped_latency(c: &Ctx, order: &[usize], mapped: &[bool], device: &[usize]) -> f64 {
    let mut free = vec![0.0f64; c.d()];
    let mut fin = vec![0.0f64; c.n()];
    let mut lat = 0.0f64;
    for &v in order {
        if !mapped[v] {
            continue;
        }
        let d = device[v];
        let ready = c.dag.preds[v]
            .iter()
            .filter(|&&(u, _)| mapped[u])
            .map(|&(u, e)| {
                fin[u]
                    + if device[u] == d {
                        0.0
                    } else {
                        c.comm(e, device[u], d)
                    }
            })
            .fold(0.0, f64::max);
        fin[v] = free[d].max(ready) + c.time[v][d];
        free[d] = fin[v];
        lat = lat.max(fin[v]);
    }
    lat
}

fn longest_valid_path(c: &Ctx, mapped: &[bool], vw: &[f64], ew: &[f64]) -> Vec<usize> {
    let n = c.n();
    let clean: Vec<bool> = (0..n)
        .map(|v| {
            c.dag.preds[v].iter().all(|&(u, _)| !mapped[u])
                && c.dag.succs[v].iter().all(|&(s, _)| !mapped[s])
        })
        .collect();
    // a[v]: best path whose first unmapped vertex is v (only v so far); b[v]: ≥ 2 unmapped vertices ending at v.
    let mut a = vec![f64::NEG_INFINITY; n];
    let mut b = vec![f64::NEG_INFINITY; n];
    let mut from_b = vec![usize::MAX; n];
    for &v in &c.dag.topo {
        if mapped[v] {
            continue;
        }
        let entry = c.dag.preds[v]
            .iter()
            .filter(|&&(u, _)| mapped[u])
            .map(|&(_, e)| ew[e])
            .fold(0.0, f64::max);
        a[v] = vw[v] + entry;
        for &(u, e) in &c.dag.preds[v] {
            if mapped[u] {
                continue;
            }
            let mut cand = a[u];
            if clean[u] && b[u] > cand {
                cand = b[u];
            }
            let cand = cand + ew[e] + vw[v];
            if cand > b[v] {
                b[v] = cand;
                from_b[v] = u;
            }
        }
    }
    let mut best = (f64::NEG_INFINITY, usize::MAX);
    for &v in &c.dag.topo {
        if mapped[v] {
            continue;
        }
        let exit = c.dag.succs[v]
            .iter()
            .filter(|&&(s, _)| mapped[s])
            .map(|&(_, e)| ew[e])
            .fold(0.0, f64::max);
        let val = a[v].max(b[v]) + exit;
        if val > best.0 {
            best = (val, v);
        }
    }
    let mut path = vec![best.1];
    let mut v = best.1;
    // Walk back: at v we came from b if b[v] >= a[v]; at u we continue through b[u] only when it was used.
    let mut use_b = b[v] >= a[v];
    while use_b {
        let u = from_b[v];
        path.push(u);
        use_b = clean[u] && b[u] > a[u];
        v = u;
    }
    path.reverse();
    path
}

/// HIOS-LP: Alg. 1 then Alg. 2 with window `w`.
pub fn hios_lp(c: &Ctx, w: usize) -> Result<Schedule> {
    let (device, _) = lp_mapping(c);
    parallelize(c, "hios_lp", &device, w)
}
