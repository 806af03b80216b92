//! `Milp`: the optimal placement of SIR+ §5 (seed 003) through a real MILP solver (HiGHS when
//! built with the `highs` feature, else microlp; see [`milp_solver`](super::milp_solver)), with
//! a time limit; returns the incumbent and its gap.

use std::time::Instant;

use good_lp::{Expression, Variable, constraint, variable};

use crate::error::{PlacementError, Result};
use crate::graph::{SlowdownModel, reaches};
use crate::policy::Options;
use crate::policy::common::Ctx;
use crate::policy::milp_solver::{MilpSolver, Model, minimise};
use crate::policy::milp_warm::best_warm;
use crate::policy::{auto, heft, hios_lp};
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
    /// Heuristic schedules of the whole graph, turned into warm starts (the best one, in the
    /// model's own timing, is the incumbent and gives every big-M).
    pub hints: &'a [Schedule],
    /// The solver.
    pub solver: MilpSolver,
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
/// disjunctions and an order binary per independent pair (pairs ordered by the DAG's transitive
/// reachability get none).
///
/// Tightening (all valid for every schedule no longer than the incumbent): the incumbent is the
/// best of the EFT list schedule, HEFT, HIOS-LP and Auto (without exact candidates, ≤ a tenth
/// of the time limit), timed as the model times it; its makespan `ub` bounds `ET`, each start
/// lies in `[head, ub − fastest duration − tail]` (head/tail: fastest chains before/after),
/// and each disjunction's big-M is `ub − tail_a − head_b` instead of `ub`. The copy delay is one
/// row per producer machine (`ST_j ≥ FT_i + Σ_l c_ml·D_j^l − max_l c_ml·(1 − D_i^m)`), which
/// the SIR+ pairwise rows only reach as `max`. Cuts: `ET ≥` finish + tail, `ET ≥` each
/// machine's load, `ET ≥` work / machines; interchangeable machines are used in order.
/// `seconds` counts the heuristics and the solve; the solver gets what is left of the limit.
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
    let t0 = Instant::now();
    let hints = hints(c, o);
    let sub = Sub {
        ops: c.dag.topo.clone(),
        fixed: &fixed,
        free: vec![0.0; machines(c).len()],
        comm_factor: &one,
        hints: &hints,
        solver: o.milp_solver,
    };
    let left = (o.milp_time_limit_s - t0.elapsed().as_secs_f64()).max(0.0);
    let (placed, objective, gap, optimal, _) = solve(c, &sub, left, true)?;
    let seconds = t0.elapsed().as_secs_f64();
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

/// Incumbent candidates: HEFT, HIOS-LP and Auto (without exact candidates, a tenth of the
/// time limit at most), whichever apply.
fn hints(c: &Ctx, o: &Options) -> Vec<Schedule> {
    let mut out = Vec::new();
    out.extend(heft::heft(c).ok());
    out.extend(hios_lp::hios_lp(c, o.window).ok());
    let ao = Options {
        auto_exact_ops: 0,
        auto_budget_ms: o
            .auto_budget_ms
            .min((o.milp_time_limit_s * 100.0).max(0.0) as u64),
        ..o.clone()
    };
    out.extend(auto::auto(c, &ao).ok().map(|r| r.schedule));
    out
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
    // The best warm start (in the model's timing) is the incumbent: an optimum finishes by its
    // makespan `ub`, so every start lies in [head, ub − fastest duration − tail] and each
    // disjunction needs a big-M of only (ub − tail_a) − head_b.
    let ws = best_warm(c, sub, &mach);
    if !ws.makespan.is_finite() {
        return Err(PlacementError::Solver(
            "no machine can run some operator of the subproblem".into(),
        ));
    }
    let ub = ws.makespan.max(1e-6) * (1.0 + 1e-9) + 1e-6;
    let big = ub;
    let (head, tail, fastest) = heads_tails(c, sub, &mach);
    let mut model = Model::default();
    let et = model.add(variable().min(0.0).max(ub));
    let st: Vec<Variable> = (0..k)
        .map(|a| {
            let v = sub.ops[a];
            let hi = (ub - fastest[v] - tail[v]).max(head[v]);
            model.add(variable().min(head[v]).max(hi))
        })
        .collect();
    let x: Vec<Vec<Option<Variable>>> = sub
        .ops
        .iter()
        .map(|&v| {
            (0..nm)
                .map(|m| mu(v, m).is_finite().then(|| model.add(variable().binary())))
                .collect()
        })
        .collect();
    let reach = c.dag.reachability();
    let mut pairs = Vec::new();
    for a in 0..k {
        for b in a + 1..k {
            let (u, v) = (sub.ops[a], sub.ops[b]);
            if !reaches(&reach[u], v) && !reaches(&reach[v], u) {
                pairs.push((a, b, model.add(variable().binary())));
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
    add_cuts(c, sub, &mach, &x, &st, et, &mut model);
    for a in 0..k {
        let placed: Expression = x[a].iter().flatten().copied().map(Expression::from).sum();
        model.row(constraint!(placed == 1.0));
        model.row(constraint!(et >= fin(a)));
        for m in 0..nm {
            if let Some(xv) = x[a][m]
                && sub.free[m] > 0.0
            {
                model.row(constraint!(st[a] >= sub.free[m] - big * (1.0 - xv)));
            }
        }
        let v = sub.ops[a];
        for &(u, e) in &c.dag.preds[v] {
            if idx[u] != usize::MAX {
                let b = idx[u];
                model.row(constraint!(st[a] >= fin(b)));
                // Per machine m of the producer: st_a ≥ fin_b + Σ_l copy(m, l)·x_a^l −
                // max_l copy(m, l)·(1 − x_b^m). Exact when the producer is on m, implied by
                // st_a ≥ fin_b otherwise; one row per machine and stronger in the relaxation
                // than one row per pair of machines.
                for mu_ in 0..nm {
                    let Some(xu) = x[b][mu_] else { continue };
                    let mut copies = Expression::from(0.0);
                    let mut worst = 0.0f64;
                    for ml in 0..nm {
                        let Some(xv) = x[a][ml] else { continue };
                        let cm = comm(e, mach[mu_].0, mach[ml].0);
                        if !cm.is_finite() {
                            model.row(constraint!(xu + xv <= 1.0));
                        } else if cm > 0.0 {
                            copies += cm * xv;
                            worst = worst.max(cm);
                        }
                    }
                    if worst > 0.0 {
                        model.row(constraint!(st[a] >= fin(b) + copies - worst * (1.0 - xu)));
                    }
                }
            } else if let Some((du, f)) = sub.fixed[u] {
                for ml in 0..nm {
                    if let Some(xv) = x[a][ml] {
                        let cm = comm(e, du, mach[ml].0);
                        if cm.is_finite() {
                            model.row(constraint!(st[a] >= (f + cm) * xv));
                        } else {
                            model.row(constraint!(xv <= 0.0));
                        }
                    }
                }
            }
        }
    }
    for &(a, b, y) in &pairs {
        let (u, v) = (sub.ops[a], sub.ops[b]);
        // fin(a) − st(b) ≤ (ub − tail_a) − head_b, and symmetrically.
        let m_ab = (ub - tail[u] - head[v]).max(0.0) + 1e-6;
        let m_ba = (ub - tail[v] - head[u]).max(0.0) + 1e-6;
        for m in 0..nm {
            let (Some(xa), Some(xb)) = (x[a][m], x[b][m]) else {
                continue;
            };
            model.row(constraint!(
                st[b] >= fin(a) - m_ab * (1.0 - y) - m_ab * (2.0 - xa - xb)
            ));
            model.row(constraint!(
                st[a] >= fin(b) - m_ba * y - m_ba * (2.0 - xa - xb)
            ));
        }
    }
    let start = warm.then(|| ws.values(&x, &st, &pairs, et));
    let sol = minimise(sub.solver, model, et, time_limit_s, start)?;
    let seconds = t0.elapsed().as_secs_f64();
    let mut out = Vec::with_capacity(k);
    for a in 0..k {
        let m = (0..nm)
            .find(|&m| x[a][m].is_some_and(|xv| sol.value(xv) > 0.5))
            .unwrap_or(0);
        out.push((sub.ops[a], mach[m], sol.value(st[a])));
    }
    let objective = sol.value(et);
    Ok((out, objective, sol.gap, sol.optimal, seconds))
}

/// Per operator of `sub` (indexed by op id): the earliest start any schedule allows (`head`:
/// the fastest chain before it, ignoring copies, and fixed producers' finishes), the fastest
/// chain after it (`tail`), and its fastest duration.
fn heads_tails(c: &Ctx, sub: &Sub, mach: &[(usize, usize)]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = c.n();
    let mut inside = vec![false; n];
    for &v in &sub.ops {
        inside[v] = true;
    }
    let fastest: Vec<f64> = (0..n)
        .map(|v| {
            mach.iter()
                .map(|&(d, _)| c.time[v][d])
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let mut head = vec![0.0f64; n];
    let mut tail = vec![0.0f64; n];
    for &v in &c.dag.topo {
        if !inside[v] {
            continue;
        }
        let earliest_free = mach
            .iter()
            .enumerate()
            .filter(|&(_, &(d, _))| c.time[v][d].is_finite())
            .map(|(m, _)| sub.free[m])
            .fold(f64::INFINITY, f64::min);
        let mut h = if earliest_free.is_finite() {
            earliest_free
        } else {
            0.0
        };
        for &(u, _) in &c.dag.preds[v] {
            if inside[u] {
                h = h.max(head[u] + fastest[u]);
            } else if let Some((_, f)) = sub.fixed[u] {
                h = h.max(f);
            }
        }
        head[v] = h;
    }
    for &v in c.dag.topo.iter().rev() {
        if !inside[v] {
            continue;
        }
        tail[v] = c.dag.succs[v]
            .iter()
            .filter(|&&(s, _)| inside[s])
            .map(|&(s, _)| fastest[s] + tail[s])
            .fold(0.0, f64::max);
    }
    (head, tail, fastest)
}

/// Whether the machines are interchangeable: same devices, uniform links, one lane each,
/// nothing fixed.
pub(crate) fn symmetric(c: &Ctx, sub: &Sub, mach: &[(usize, usize)]) -> bool {
    let uniform_links = c.t.buses.is_empty()
        && c.t
            .links
            .windows(2)
            .all(|w| w[0].bandwidth == w[1].bandwidth && w[0].latency_us == w[1].latency_us);
    let same_devices = c.t.devices.windows(2).all(|w| w[0] == w[1]) || c.d() == 1;
    let one_lane = mach.iter().all(|&(_, s)| s == 0) || c.d() == 1;
    let no_fixed = sub.fixed.iter().all(Option::is_none) && sub.free.iter().all(|&f| f == 0.0);
    uniform_links && same_devices && one_lane && no_fixed
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
    p: &mut Model,
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
        p.row(constraint!(et >= st[a] + dur(a) + tail[v]));
        work += dur(a);
    }
    p.row(constraint!(nm as f64 * et >= work));
    // Each machine runs its operators one at a time.
    for m in 0..nm {
        let load: Expression = (0..k)
            .filter_map(|a| x[a][m].map(|xv| c.time[sub.ops[a]][mach[m].0] * xv))
            .sum();
        p.row(constraint!(et >= load + sub.free[m]));
    }
    if symmetric(c, sub, mach) {
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
                p.row(constraint!(xv <= before));
            }
        }
    }
}
