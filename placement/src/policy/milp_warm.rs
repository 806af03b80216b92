//! `Milp`'s warm start: the best feasible point of its model among the EFT list schedule and
//! the heuristics' schedules, timed as the model times them (no copy serialization). Its
//! makespan is the incumbent that bounds the model.

use good_lp::Variable;

use crate::policy::common::Ctx;
use crate::policy::milp::{Sub, symmetric};

/// A feasible point of the model: the operators in topological order, each on the machine
/// where it finishes first (estimates match the model: no copy serialization).
pub(crate) struct Warm {
    chosen: Vec<usize>,
    start: Vec<f64>,
    /// The makespan in the model's timing (`+∞` when no machine can run some operator).
    pub(crate) makespan: f64,
}

impl Warm {
    pub(crate) fn values(
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

/// The operators of `sub` timed as the model times them: in the topological sequence `seq`,
/// each on `pick(v)` when given, else on the machine where it finishes first.
fn timed(
    c: &Ctx,
    sub: &Sub,
    mach: &[(usize, usize)],
    seq: &[usize],
    pick: &dyn Fn(usize) -> Option<usize>,
) -> Option<Warm> {
    let k = sub.ops.len();
    let mut free = sub.free.clone();
    let mut fin = vec![0.0; c.n()];
    let mut dev = vec![0; c.n()];
    let mut start = vec![0.0; k];
    let mut chosen = vec![0; k];
    let mut pos = vec![usize::MAX; c.n()];
    for (i, &v) in sub.ops.iter().enumerate() {
        pos[v] = i;
    }
    let mut makespan = 0.0f64;
    for &v in seq {
        let a = pos[v];
        let mut best = (f64::INFINITY, usize::MAX, 0.0);
        for (m, &(d, _)) in mach.iter().enumerate() {
            if !c.time[v][d].is_finite() || pick(v).is_some_and(|pm| pm != m) {
                continue;
            }
            let mut ready = free[m];
            for &(u, e) in &c.dag.preds[v] {
                let (du, fu) = match sub.fixed[u] {
                    Some(f) if pos[u] == usize::MAX => f,
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
        if best.1 == usize::MAX || !best.0.is_finite() {
            return None;
        }
        chosen[a] = best.1;
        start[a] = best.2;
        fin[v] = best.0;
        dev[v] = mach[best.1].0;
        free[best.1] = best.0;
        makespan = makespan.max(best.0);
    }
    Some(Warm {
        chosen,
        start,
        makespan,
    })
}

/// The best feasible point of the model among the EFT list schedule and the hints (each hint
/// keeps its machines and its launch order, restricted to a topological sequence), with the
/// machines renamed by first use when they are interchangeable (so that it satisfies the
/// symmetry-breaking cuts).
pub(crate) fn best_warm(c: &Ctx, sub: &Sub, mach: &[(usize, usize)]) -> Warm {
    let inside: Vec<bool> = {
        let mut b = vec![false; c.n()];
        for &v in &sub.ops {
            b[v] = true;
        }
        b
    };
    let topo: Vec<usize> = c.dag.topo.iter().copied().filter(|&v| inside[v]).collect();
    let none = |_: usize| None;
    let mut best = timed(c, sub, mach, &topo, &none);
    for h in sub.hints {
        if h.ops.len() != c.n() {
            continue;
        }
        let lanes = mach.iter().any(|&(_, s)| s > 0);
        let m_of: Vec<Option<usize>> = h
            .ops
            .iter()
            .map(|o| {
                let s = if lanes { o.stream } else { 0 };
                mach.iter().position(|&x| x == (o.device, s))
            })
            .collect();
        if sub.ops.iter().any(|&v| m_of[v].is_none()) {
            continue;
        }
        let seq = ready_sequence(c, &inside, &|v| h.ops[v].order);
        let pick = |v: usize| m_of[v];
        if let Some(w) = timed(c, sub, mach, &seq, &pick)
            && best.as_ref().is_none_or(|b| w.makespan < b.makespan)
        {
            best = Some(w);
        }
    }
    let mut w = best.unwrap_or(Warm {
        chosen: vec![0; sub.ops.len()],
        start: vec![0.0; sub.ops.len()],
        makespan: f64::INFINITY,
    });
    if symmetric(c, sub, mach) {
        let mut pos = vec![usize::MAX; c.n()];
        for (i, &v) in sub.ops.iter().enumerate() {
            pos[v] = i;
        }
        let mut rename = vec![usize::MAX; mach.len()];
        let mut next = 0;
        for &v in &topo {
            let m = w.chosen[pos[v]];
            if rename[m] == usize::MAX {
                rename[m] = next;
                next += 1;
            }
        }
        for m in &mut w.chosen {
            *m = rename[*m];
        }
    }
    w
}

/// A topological sequence of the operators in `inside`: Kahn's algorithm taking the ready
/// operator of least `key`.
fn ready_sequence(c: &Ctx, inside: &[bool], key: &dyn Fn(usize) -> usize) -> Vec<usize> {
    let mut indeg: Vec<usize> = (0..c.n())
        .map(|v| c.dag.preds[v].iter().filter(|&&(u, _)| inside[u]).count())
        .collect();
    let mut ready: Vec<usize> = (0..c.n()).filter(|&v| inside[v] && indeg[v] == 0).collect();
    let mut seq = Vec::new();
    while let Some(i) = (0..ready.len()).min_by_key(|&i| (key(ready[i]), ready[i])) {
        let v = ready.swap_remove(i);
        seq.push(v);
        for &(s, _) in &c.dag.succs[v] {
            if inside[s] {
                indeg[s] -= 1;
                if indeg[s] == 0 {
                    ready.push(s);
                }
            }
        }
    }
    seq
}
