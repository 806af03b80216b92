//! Heads and tails that count copies: for each operator and each device it may run on, the
//! earliest it can start there and the least time that must follow its finish, when every input
//! either comes from a producer on the same device (which then ran there first) or is copied in.

use crate::graph::{CostGraph, Dag, DeviceKind, SlowdownModel, reaches};
use crate::topology::{TopoView, Topology};

/// Per-(operator, device) heads and tails, and the longest path they prove.
pub(crate) struct HeadsTails {
    /// `head[v]`: the earliest start of `v` on any device.
    pub head: Vec<f64>,
    /// `tail[v]`: the least time between the finish of `v` and the end, on any device.
    pub tail: Vec<f64>,
    /// `max_v min_d (head(v, d) + time(v, d) + tail(v, d))`: a lower bound on the makespan.
    pub path: f64,
}

/// How fast device `d` can work off a set of operators that must all run on it one after
/// another (in any overlap its lanes allow).
struct Capacity {
    lanes: f64,
    /// Resource-weighted work also counts (GPU, `Resource` model, no measured table): a GPU
    /// progresses at most one unit of `time · min(resource, 1)` per µs.
    area: bool,
}

/// One producer (or consumer) of the operator whose head (or tail) is computed: `remote` is the
/// earliest its data can arrive (leave) through a copy, `release` / `time` / `area` what it
/// costs if it runs on the same device instead.
#[derive(Clone, Copy)]
struct Neighbour {
    remote: f64,
    release: f64,
    time: f64,
    area: f64,
}

/// Heads and tails of every operator on every device (`time[v][d]`: `INFINITY` where `v`
/// cannot run on `d`).
///
/// `head(v, d)`: for each producer `u`, either `u` runs on `d` too (then all such producers run
/// on `d`'s lanes before `v`, each no earlier than `head(u, d)`: the classic one-machine bound
/// with release dates, `max_i r_(i) + Σ_{r_j ≥ r_(i)} p_j / lanes`, and the resource-weighted
/// sum where it applies), or its result is copied: `min_{d' ≠ d} head(u, d') + time(u, d') +
/// copy(d' → d, bytes)`. The producers kept local are, for the best split, those whose copy
/// would arrive latest, so trying each prefix of the producers sorted by copy arrival is exact
/// for this relaxation. Tails are the mirror image over consumers. A copy in the simulator moves
/// at least the edge's bytes and may wait for its link, so neither is shorter than assumed.
pub(crate) fn heads_tails(
    g: &CostGraph,
    dag: &Dag,
    t: &Topology,
    view: &TopoView,
    time: &[Vec<f64>],
    share: &[(f64, f64)],
) -> HeadsTails {
    let n = g.ops.len();
    let d = t.devices.len();
    let caps: Vec<Capacity> = t
        .devices
        .iter()
        .map(|x| Capacity {
            lanes: x.streams as f64,
            area: x.kind == DeviceKind::Gpu
                && g.concurrency.model == SlowdownModel::Resource
                && g.concurrency.table.is_empty(),
        })
        .collect();
    let res: Vec<f64> = g.ops.iter().map(|o| o.resource.min(1.0)).collect();
    let copy =
        |b: f64, src: usize, dst: usize| view.copy_us(t, src, dst, b).unwrap_or(f64::INFINITY);
    let reach = dag.reachability();
    let mut hd = vec![vec![f64::INFINITY; d]; n];
    let mut nb: Vec<Neighbour> = Vec::new();
    for &v in &dag.topo {
        for dv in 0..d {
            if !time[v][dv].is_finite() {
                continue;
            }
            nb.clear();
            for &(u, e) in &dag.preds[v] {
                let bytes = g.edges[e].bytes;
                let remote = (0..d)
                    .filter(|&du| du != dv)
                    .map(|du| hd[u][du] + time[u][du] + copy(bytes, du, dv))
                    .fold(f64::INFINITY, f64::min);
                nb.push(Neighbour {
                    remote,
                    release: hd[u][dv],
                    time: time[u][dv],
                    area: time[u][dv] * res[u],
                });
            }
            hd[v][dv] = best_split(&mut nb, &caps[dv]);
        }
        let before: Vec<usize> = (0..n).filter(|&u| reaches(&reach[u], v)).collect();
        raise(&mut hd, v, &before, share);
    }
    let mut tl = vec![vec![f64::INFINITY; d]; n];
    for &v in dag.topo.iter().rev() {
        for dv in 0..d {
            if !time[v][dv].is_finite() {
                continue;
            }
            nb.clear();
            for &(w, e) in &dag.succs[v] {
                let bytes = g.edges[e].bytes;
                let remote = (0..d)
                    .filter(|&dw| dw != dv)
                    .map(|dw| copy(bytes, dv, dw) + time[w][dw] + tl[w][dw])
                    .fold(f64::INFINITY, f64::min);
                nb.push(Neighbour {
                    remote,
                    release: tl[w][dv],
                    time: time[w][dv],
                    area: time[w][dv] * res[w],
                });
            }
            tl[v][dv] = best_split(&mut nb, &caps[dv]);
        }
        let after: Vec<usize> = (0..n).filter(|&w| reaches(&reach[v], w)).collect();
        raise(&mut tl, v, &after, share);
    }
    let min_row = |row: &[f64]| row.iter().copied().fold(f64::INFINITY, f64::min);
    let path = (0..n)
        .map(|v| {
            (0..d)
                .map(|x| hd[v][x] + time[v][x] + tl[v][x])
                .fold(f64::INFINITY, f64::min)
        })
        .fold(0.0, f64::max);
    HeadsTails {
        head: hd.iter().map(|r| min_row(r)).collect(),
        tail: tl.iter().map(|r| min_row(r)).collect(),
        path,
    }
}

/// `min over k of max(largest remote arrival outside the k kept local, local bound of the k
/// kept local)`, the neighbours sorted by remote arrival, latest first.
fn best_split(nb: &mut [Neighbour], cap: &Capacity) -> f64 {
    if nb.is_empty() {
        return 0.0;
    }
    nb.sort_by(|a, b| b.remote.total_cmp(&a.remote));
    let mut best = nb[0].remote;
    for k in 1..=nb.len() {
        let outside = nb.get(k).map_or(0.0, |x| x.remote);
        if outside >= best {
            continue;
        }
        let local = local_bound(&nb[..k], cap);
        best = best.min(local.max(outside));
    }
    best
}

/// Least finish of a set of operators that all run on one device, each no earlier than its
/// release: `max_i r_(i) + max(Σ p / lanes, Σ area)` over the sets of the `i` latest releases,
/// and every single `r + p`.
fn local_bound(set: &[Neighbour], cap: &Capacity) -> f64 {
    if set
        .iter()
        .any(|x| !x.time.is_finite() || !x.release.is_finite())
    {
        return f64::INFINITY;
    }
    let mut items: Vec<Neighbour> = set.to_vec();
    items.sort_by(|a, b| b.release.total_cmp(&a.release));
    let (mut p, mut a, mut best) = (0.0f64, 0.0f64, 0.0f64);
    for x in &items {
        p += x.time;
        a += x.area;
        let work = if cap.area {
            (p / cap.lanes).max(a)
        } else {
            p / cap.lanes
        };
        best = best.max(x.release + work).max(x.release + x.time);
    }
    best
}

/// Raises `v`'s row of `bound` (heads or tails per device) to the work bound of `others` (its
/// ancestors, or descendants): every one of them is done before `v` starts (or starts after
/// `v` ends), so for the set `S` of those whose own bound is at least `x`, `v`'s bound is at
/// least `x + max(Σ_S work share, Σ_S resource-weighted share)` — the machine works off at most
/// one unit of either per µs.
fn raise(bound: &mut [Vec<f64>], v: usize, others: &[usize], share: &[(f64, f64)]) {
    if others.is_empty() {
        return;
    }
    let min_row = |row: &[f64]| row.iter().copied().fold(f64::INFINITY, f64::min);
    let mut keyed: Vec<(f64, usize)> = others.iter().map(|&u| (min_row(&bound[u]), u)).collect();
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (mut w, mut a, mut best) = (0.0f64, 0.0f64, 0.0f64);
    for &(x, u) in &keyed {
        if !x.is_finite() {
            continue;
        }
        w += share[u].0;
        a += share[u].1;
        best = best.max(x + w.max(a));
    }
    for b in bound[v].iter_mut() {
        if b.is_finite() {
            *b = b.max(best);
        }
    }
}
