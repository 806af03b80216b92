//! `Milp`: the optimal placement of SIR+ §5 (seed 003) through a real MILP solver (microlp via
//! good_lp, pure Rust), with a time limit; returns the incumbent and its gap.

use std::time::Instant;

use good_lp::solvers::{SolutionStatus, WithInitialSolution, WithTimeLimit};
use good_lp::{
    Expression, ProblemVariables, Solution, SolverModel, Variable, constraint, microlp, variable,
};

use crate::error::{PlacementError, Result};
use crate::graph::{SlowdownModel, reaches};
use crate::policy::Options;
use crate::policy::common::Ctx;
use crate::schedule::Schedule;

/// What the MILP returns.
#[derive(Debug, Clone, PartialEq)]
pub struct MilpResult {
    /// The incumbent as a schedule.
    pub schedule: Schedule,
    /// Its objective (the model's makespan: copies are not serialized in the model).
    pub objective: f64,
    /// Relative gap to the best proven bound (`Some(0.0)` when optimal; `None` if unknown).
    pub gap: Option<f64>,
    /// Whether optimality was proven.
    pub optimal: bool,
    /// Solve time, seconds.
    pub seconds: f64,
}

/// A (sub)problem: which operators to place, with everything outside it fixed.
pub(crate) struct Sub<'a> {
    /// Operators to place (a set closed under nothing in particular: outside preds are fixed).
    pub ops: Vec<usize>,
    /// For operators outside `ops`: fixed (device, finish time).
    pub fixed: &'a [Option<(usize, f64)>],
    /// Time each machine becomes free.
    pub free: Vec<f64>,
    /// Multiplies every copy time (SortingHat §3.4 contention factors).
    pub comm_factor: &'a dyn Fn(usize, usize) -> f64,
}

/// Machines of the model: every (device, stream) lane when streams do not slow each other
/// down, else one lane per device.
pub(crate) fn machines(c: &Ctx) -> Vec<(usize, usize)> {
    let lanes = c.g.concurrency.model == SlowdownModel::None && c.g.concurrency.table.is_empty();
    (0..c.d())
        .flat_map(|d| (0..if lanes { c.t.devices[d].streams } else { 1 }).map(move |s| (d, s)))
        .collect()
}

/// SIR+ §5: binary placement `D_i^m`, start `ST_i`, finish `FT_i = ST_i + Σ_m D_i^m μ_i^m`;
/// objective `min ET ≥ FT_i`; precedence `ST_j ≥ FT_i + Data_ij / Rate_ml · (D_i^m + D_j^l − 1)`
/// for every pair of machines on different devices (and `ST_j ≥ FT_i`); exclusion with big-M
/// disjunctions and an order binary per independent pair. Warm-started from HEFT.
///
/// Refuses graphs over `milp_max_ops` operators ([`PlacementError::TooLarge`]).
pub fn milp(c: &Ctx, o: &Options) -> Result<MilpResult> {
    let n = c.n();
    if n > o.milp_max_ops {
        return Err(PlacementError::TooLarge {
            policy: "milp",
            n,
            limit: o.milp_max_ops,
        });
    }
    let fixed = vec![None; n];
    let one = |_: usize, _: usize| 1.0;
    let sub = Sub {
        ops: c.dag.topo.clone(),
        fixed: &fixed,
        free: vec![0.0; machines(c).len()],
        comm_factor: &one,
    };
    let (placed, objective, gap, optimal, seconds) = solve(c, &sub, o.milp_time_limit_s, true)?;
    let mut device = vec![0; n];
    let mut stream = vec![0; n];
    let mut start = vec![0.0; n];
    for (v, m, s) in placed {
        device[v] = m.0;
        stream[v] = m.1;
        start[v] = s;
    }
    let pos: Vec<usize> = {
        let mut p = vec![0; n];
        for (i, &v) in c.dag.topo.iter().enumerate() {
            p[v] = i;
        }
        p
    };
    let mut seq = c.dag.topo.clone();
    seq.sort_by(|&a, &b| start[a].total_cmp(&start[b]).then(pos[a].cmp(&pos[b])));
    Ok(MilpResult {
        schedule: Schedule::from_sequence("milp", &device, &stream, &seq),
        objective,
        gap,
        optimal,
        seconds,
    })
}

type Solved = (
    Vec<(usize, (usize, usize), f64)>,
    f64,
    Option<f64>,
    bool,
    f64,
);

/// Solves a subproblem; returns (op, machine, start) per placed op, objective, gap, optimal, s.
pub(crate) fn solve(c: &Ctx, sub: &Sub, time_limit_s: f64, warm: bool) -> Result<Solved> {
    let t0 = Instant::now();
    let mach = machines(c);
    let nm = mach.len();
    let k = sub.ops.len();
    let mut idx = vec![usize::MAX; c.n()];
    for (i, &v) in sub.ops.iter().enumerate() {
        idx[v] = i;
    }
    let mu = |v: usize, m: usize| c.time[v][mach[m].0];
    let comm = |e: usize, a: usize, b: usize| {
        if a == b {
            0.0
        } else {
            c.comm(e, a, b) * (sub.comm_factor)(a, b)
        }
    };
    // Any optimum finishes by the warm start's makespan, which is therefore a valid big-M.
    let ws = warm_start(c, sub, &mach);
    let big = ws.makespan.max(1e-6) * 1.000_001;
    let mut vars = ProblemVariables::new();
    let et = vars.add(variable().min(0.0));
    let st: Vec<Variable> = (0..k)
        .map(|_| vars.add(variable().min(0.0).max(big)))
        .collect();
    let x: Vec<Vec<Option<Variable>>> = sub
        .ops
        .iter()
        .map(|&v| {
            (0..nm)
                .map(|m| mu(v, m).is_finite().then(|| vars.add(variable().binary())))
                .collect()
        })
        .collect();
    let reach = c.dag.reachability();
    let mut pairs = Vec::new();
    for a in 0..k {
        for b in a + 1..k {
            let (u, v) = (sub.ops[a], sub.ops[b]);
            if !reaches(&reach[u], v) && !reaches(&reach[v], u) {
                pairs.push((a, b, vars.add(variable().binary())));
            }
        }
    }
    let dur = |a: usize| -> Expression {
        let v = sub.ops[a];
        (0..nm)
            .filter_map(|m| x[a][m].map(|xv| mu(v, m) * xv))
            .sum()
    };
    let fin = |a: usize| -> Expression { st[a] + dur(a) };
    let mut p = vars.minimise(et).using(microlp);
    add_cuts(c, sub, &mach, &x, &st, et, &mut p);
    for a in 0..k {
        let placed: Expression = x[a].iter().flatten().copied().map(Expression::from).sum();
        p.add_constraint(constraint!(placed == 1.0));
        p.add_constraint(constraint!(et >= fin(a)));
        for m in 0..nm {
            if let Some(xv) = x[a][m]
                && sub.free[m] > 0.0
            {
                p.add_constraint(constraint!(st[a] >= sub.free[m] - big * (1.0 - xv)));
            }
        }
        let v = sub.ops[a];
        for &(u, e) in &c.dag.preds[v] {
            if idx[u] != usize::MAX {
                let b = idx[u];
                p.add_constraint(constraint!(st[a] >= fin(b)));
                for mu_ in 0..nm {
                    for ml in 0..nm {
                        let (Some(xu), Some(xv)) = (x[b][mu_], x[a][ml]) else {
                            continue;
                        };
                        let cm = comm(e, mach[mu_].0, mach[ml].0);
                        if cm > 0.0 && cm.is_finite() {
                            p.add_constraint(constraint!(st[a] >= fin(b) + cm * (xu + xv - 1.0)));
                        } else if !cm.is_finite() {
                            p.add_constraint(constraint!(xu + xv <= 1.0));
                        }
                    }
                }
            } else if let Some((du, f)) = sub.fixed[u] {
                for ml in 0..nm {
                    if let Some(xv) = x[a][ml] {
                        let cm = comm(e, du, mach[ml].0);
                        if cm.is_finite() {
                            p.add_constraint(constraint!(st[a] >= (f + cm) * xv));
                        } else {
                            p.add_constraint(constraint!(xv <= 0.0));
                        }
                    }
                }
            }
        }
    }
    for &(a, b, y) in &pairs {
        for m in 0..nm {
            let (Some(xa), Some(xb)) = (x[a][m], x[b][m]) else {
                continue;
            };
            p.add_constraint(constraint!(
                st[b] >= fin(a) - big * (1.0 - y) - big * (2.0 - xa - xb)
            ));
            p.add_constraint(constraint!(
                st[a] >= fin(b) - big * y - big * (2.0 - xa - xb)
            ));
        }
    }
    let mut p = p.with_time_limit(time_limit_s.max(0.0));
    if warm {
        p = p.with_initial_solution(ws.values(&x, &st, &pairs, et));
    }
    let sol = p
        .solve()
        .map_err(|e| PlacementError::Solver(e.to_string()))?;
    let seconds = t0.elapsed().as_secs_f64();
    let mut out = Vec::with_capacity(k);
    for a in 0..k {
        let m = (0..nm)
            .find(|&m| x[a][m].is_some_and(|xv| sol.value(xv) > 0.5))
            .unwrap_or(0);
        out.push((sub.ops[a], mach[m], sol.value(st[a])));
    }
    let objective = sol.value(et);
    let optimal = matches!(sol.status(), SolutionStatus::Optimal);
    let gap = sol.into_inner().gap();
    Ok((
        out,
        objective,
        if optimal { Some(0.0) } else { gap },
        optimal,
        seconds,
    ))
}

/// A feasible point of the model: the operators in topological order, each on the machine
/// where it finishes first (estimates match the model: no copy serialization).
struct Warm {
    chosen: Vec<usize>,
    start: Vec<f64>,
    makespan: f64,
}

impl Warm {
    fn values(
        &self,
        x: &[Vec<Option<Variable>>],
        st: &[Variable],
        pairs: &[(usize, usize, Variable)],
        et: Variable,
    ) -> Vec<(Variable, f64)> {
        let mut out = Vec::new();
        for (a, row) in x.iter().enumerate() {
            for (m, xv) in row.iter().enumerate() {
                if let Some(xv) = xv {
                    out.push((*xv, if m == self.chosen[a] { 1.0 } else { 0.0 }));
                }
            }
            out.push((st[a], self.start[a]));
        }
        for &(a, b, y) in pairs {
            out.push((
                y,
                if self.start[a] <= self.start[b] {
                    1.0
                } else {
                    0.0
                },
            ));
        }
        out.push((et, self.makespan));
        out
    }
}

fn warm_start(c: &Ctx, sub: &Sub, mach: &[(usize, usize)]) -> Warm {
    let k = sub.ops.len();
    let mut free = sub.free.clone();
    let mut fin = vec![0.0; c.n()];
    let mut dev = vec![0; c.n()];
    let mut start = vec![0.0; k];
    let mut chosen = vec![0; k];
    let mut inside = vec![false; c.n()];
    for &v in &sub.ops {
        inside[v] = true;
    }
    let mut pos = vec![usize::MAX; c.n()];
    for (i, &v) in sub.ops.iter().enumerate() {
        pos[v] = i;
    }
    let mut makespan = 0.0f64;
    for &v in &c.dag.topo {
        if !inside[v] {
            continue;
        }
        let a = pos[v];
        let mut best = (f64::INFINITY, 0, 0.0);
        for (m, &(d, _)) in mach.iter().enumerate() {
            if !c.time[v][d].is_finite() {
                continue;
            }
            let mut ready = free[m];
            for &(u, e) in &c.dag.preds[v] {
                let (du, fu) = match sub.fixed[u] {
                    Some(f) if !inside[u] => f,
                    _ => (dev[u], fin[u]),
                };
                let cm = if du == d {
                    0.0
                } else {
                    c.comm(e, du, d) * (sub.comm_factor)(du, d)
                };
                ready = ready.max(fu + cm);
            }
            let f = ready + c.time[v][d];
            if f < best.0 {
                best = (f, m, ready);
            }
        }
        chosen[a] = best.1;
        start[a] = best.2;
        fin[v] = best.0;
        dev[v] = mach[best.1].0;
        free[best.1] = best.0;
        makespan = makespan.max(best.0);
    }
    Warm {
        chosen,
        start,
        makespan,
    }
}

/// Valid inequalities that tighten the relaxation: the makespan is at least each operator's
/// finish plus the fastest chain after it, and at least the total work over the machines;
/// interchangeable machines are used in order (symmetry breaking).
fn add_cuts(
    c: &Ctx,
    sub: &Sub,
    mach: &[(usize, usize)],
    x: &[Vec<Option<Variable>>],
    st: &[Variable],
    et: Variable,
    p: &mut impl SolverModel,
) {
    let k = sub.ops.len();
    let nm = mach.len();
    let mut inside = vec![usize::MAX; c.n()];
    for (a, &v) in sub.ops.iter().enumerate() {
        inside[v] = a;
    }
    let fastest = |v: usize| {
        mach.iter()
            .map(|&(d, _)| c.time[v][d])
            .fold(f64::INFINITY, f64::min)
    };
    let mut tail = vec![0.0f64; c.n()];
    for &v in c.dag.topo.iter().rev() {
        if inside[v] == usize::MAX {
            continue;
        }
        tail[v] = c.dag.succs[v]
            .iter()
            .filter(|&&(s, _)| inside[s] != usize::MAX)
            .map(|&(s, _)| fastest(s) + tail[s])
            .fold(0.0, f64::max);
    }
    let dur = |a: usize| -> Expression {
        let v = sub.ops[a];
        (0..nm)
            .filter_map(|m| x[a][m].map(|xv| c.time[v][mach[m].0] * xv))
            .sum()
    };
    let mut work: Expression = Expression::from(sub.free.iter().sum::<f64>());
    for a in 0..k {
        let v = sub.ops[a];
        p.add_constraint(constraint!(et >= st[a] + dur(a) + tail[v]));
        work += dur(a);
    }
    p.add_constraint(constraint!(nm as f64 * et >= work));
    let uniform_links = c.t.buses.is_empty()
        && c.t
            .links
            .windows(2)
            .all(|w| w[0].bandwidth == w[1].bandwidth && w[0].latency_us == w[1].latency_us);
    let same_devices = c.t.devices.windows(2).all(|w| w[0] == w[1]) || c.d() == 1;
    let one_lane = mach.iter().all(|&(_, s)| s == 0) || c.d() == 1;
    let no_fixed = sub.fixed.iter().all(Option::is_none) && sub.free.iter().all(|&f| f == 0.0);
    if uniform_links && same_devices && one_lane && no_fixed {
        let mut order: Vec<usize> = (0..k).collect();
        let mut tpos = vec![0; c.n()];
        for (i, &v) in c.dag.topo.iter().enumerate() {
            tpos[v] = i;
        }
        order.sort_by_key(|&a| tpos[sub.ops[a]]);
        for (i, &a) in order.iter().enumerate() {
            for m in 1..nm {
                let Some(xv) = x[a][m] else { continue };
                let before: Expression = order[..i]
                    .iter()
                    .filter_map(|&b| x[b][m - 1])
                    .map(Expression::from)
                    .sum();
                p.add_constraint(constraint!(xv <= before));
            }
        }
    }
}
