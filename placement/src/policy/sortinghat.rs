//! `SortingHat`: dominator partitioning and per-submodel MILP with topology-aware copies
//! (Jung et al., ICS '25, seed 004, §3.1, §3.3, §3.4).

use crate::error::Result;
use crate::graph::reaches;
use crate::policy::Options;
use crate::policy::common::Ctx;
use crate::policy::milp::{Sub, machines, solve};
use crate::schedule::Schedule;

/// Partition nodes: operators on every path from an input to an output (the dominators of a
/// virtual output fed by every sink, with a virtual input feeding every source), in topological
/// order.
pub fn partition_nodes(c: &Ctx) -> Vec<usize> {
    let n = c.n();
    let words = n.div_ceil(64).max(1);
    let mut dom: Vec<Vec<u64>> = vec![vec![0; words]; n];
    for &v in &c.dag.topo {
        let mut d = if c.dag.preds[v].is_empty() {
            vec![0; words]
        } else {
            let mut acc = vec![u64::MAX; words];
            for &(u, _) in &c.dag.preds[v] {
                for (a, b) in acc.iter_mut().zip(&dom[u]) {
                    *a &= b;
                }
            }
            acc
        };
        d[v / 64] |= 1 << (v % 64);
        dom[v] = d;
    }
    let mut out_dom = vec![u64::MAX; words];
    for s in c.dag.sinks() {
        for (a, b) in out_dom.iter_mut().zip(&dom[s]) {
            *a &= b;
        }
    }
    c.dag
        .topo
        .iter()
        .copied()
        .filter(|&v| reaches(&out_dom, v))
        .collect()
}

/// Submodels: operators up to and including every `per` partition nodes, in topological order.
pub fn submodels(c: &Ctx, per: usize) -> Vec<Vec<usize>> {
    let doms = partition_nodes(c);
    let reach = c.dag.reachability();
    let k = doms.len();
    let seg = |v: usize| {
        doms.iter()
            .position(|&d| d == v || reaches(&reach[v], d))
            .unwrap_or(k)
    };
    let per = per.max(1);
    let groups = k / per + 1;
    let mut subs = vec![Vec::new(); groups];
    for &v in &c.dag.topo {
        subs[(seg(v) / per).min(groups - 1)].push(v);
    }
    subs.retain(|s| !s.is_empty());
    subs
}

/// SortingHat §3.1–§3.4. Each submodel (see [`submodels`]) is placed in turn with every earlier
/// operator fixed (device, finish) and each machine busy until its last earlier operator ends:
/// exactly by the MILP when it has at most `sortinghat_milp_ops` operators (time limit
/// `milp_time_limit_s / 10` each), else by earliest-finish list scheduling. Copy times are
/// inflated as §3.4 recommends: ×1.5 over a direct link, ×(number of GPUs) over a shared bus.
///
/// Choices: SortingHat's subgraph slots, parameter placement (DHA / PT) and memory limits have
/// no counterpart in a cost graph and are left out; each machine is a device (or a stream when
/// streams do not slow each other down), as in [`super::milp`].
pub fn sortinghat(c: &Ctx, o: &Options) -> Result<Schedule> {
    let n = c.n();
    let gpus =
        c.t.devices
            .iter()
            .filter(|d| d.kind == crate::DeviceKind::Gpu)
            .count()
            .max(1) as f64;
    let factor = |a: usize, b: usize| match c.view.link(a, b).and_then(|l| c.t.links[l].bus) {
        Some(_) => gpus,
        None => 1.5,
    };
    let mach = machines(c);
    let mut fixed: Vec<Option<(usize, f64)>> = vec![None; n];
    let mut free = vec![0.0; mach.len()];
    let mut device = vec![0; n];
    let mut stream = vec![0; n];
    let mut start = vec![0.0; n];
    for ops in submodels(c, o.sortinghat_doms) {
        let placed = if ops.len() <= o.sortinghat_milp_ops {
            let sub = Sub {
                ops: ops.clone(),
                fixed: &fixed,
                free: free.clone(),
                comm_factor: &factor,
                hints: &[],
                solver: o.milp_solver,
            };
            solve(c, &sub, o.milp_time_limit_s / 10.0, true)
                .ok()
                .map(|r| r.0)
        } else {
            None
        };
        let placed = placed.unwrap_or_else(|| list(c, &ops, &fixed, &free, &mach, &factor));
        for (v, m, s) in placed {
            let mi = mach.iter().position(|&x| x == m).unwrap_or(0);
            let f = s + c.time[v][m.0];
            fixed[v] = Some((m.0, f));
            free[mi] = f64::max(free[mi], f);
            device[v] = m.0;
            stream[v] = m.1;
            start[v] = s;
        }
    }
    let mut pos = vec![0; n];
    for (i, &v) in c.dag.topo.iter().enumerate() {
        pos[v] = i;
    }
    let mut seq = c.dag.topo.clone();
    seq.sort_by(|&a, &b| start[a].total_cmp(&start[b]).then(pos[a].cmp(&pos[b])));
    Ok(Schedule::from_sequence(
        "sortinghat",
        &device,
        &stream,
        &seq,
    ))
}

type Placed = Vec<(usize, (usize, usize), f64)>;

fn list(
    c: &Ctx,
    ops: &[usize],
    fixed: &[Option<(usize, f64)>],
    free: &[f64],
    mach: &[(usize, usize)],
    factor: &dyn Fn(usize, usize) -> f64,
) -> Placed {
    let mut free = free.to_vec();
    let mut fin: Vec<Option<(usize, f64)>> = fixed.to_vec();
    let mut out = Vec::with_capacity(ops.len());
    for &v in ops {
        let mut best = (f64::INFINITY, 0, 0.0);
        for (m, &(d, _)) in mach.iter().enumerate() {
            if !c.time[v][d].is_finite() {
                continue;
            }
            let mut ready = free[m];
            for &(u, e) in &c.dag.preds[v] {
                if let Some((du, fu)) = fin[u] {
                    ready = ready.max(
                        fu + if du == d {
                            0.0
                        } else {
                            c.comm(e, du, d) * factor(du, d)
                        },
                    );
                }
            }
            if ready + c.time[v][d] < best.0 {
                best = (ready + c.time[v][d], m, ready);
            }
        }
        free[best.1] = best.0;
        fin[v] = Some((mach[best.1].0, best.0));
        out.push((v, mach[best.1], best.2));
    }
    out
}
