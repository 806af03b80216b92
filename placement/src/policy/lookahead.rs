//! `Lookahead`: HEFT with one step of lookahead (Bittencourt, Sakellariou, Madeira, PDP 2010).

use crate::policy::common::Ctx;
use crate::policy::eft::list_schedule;
use crate::schedule::Schedule;

/// Lookahead HEFT. Operators in decreasing upward rank (among the ready ones); for each device
/// an operator could go to, it is placed there tentatively and then each of its successors
/// (in decreasing rank) at its own earliest-finish device, counting only producers already
/// placed; the operator goes where the latest of those successor finishes is earliest (ties:
/// its own earliest finish; an operator without successors goes to its earliest finish).
pub fn lookahead(c: &Ctx) -> Schedule {
    let rank = c.upward_rank();
    let e = list_schedule(c, &rank, |e, v, placed| {
        let mut kids: Vec<usize> = c.dag.succs[v].iter().map(|&(s, _)| s).collect();
        kids.sort_by(|&a, &b| rank[b].total_cmp(&rank[a]).then(a.cmp(&b)));
        kids.dedup();
        let mut best = (f64::INFINITY, f64::INFINITY, 0, 0.0, 0.0);
        let mut mark = placed.to_vec();
        for d in 0..c.d() {
            let (s, f) = e.slot(v, d, placed);
            if !f.is_finite() {
                continue;
            }
            let mut trial = e.clone();
            trial.place(v, d, s, f);
            mark[v] = true;
            let mut worst = f;
            for &k in &kids {
                let (kd, ks, kf) = trial.best(k, &mark);
                trial.place(k, kd, ks, kf);
                mark[k] = true;
                worst = worst.max(kf);
            }
            for &k in &kids {
                mark[k] = false;
            }
            mark[v] = false;
            if (worst, f) < (best.0, best.1) {
                best = (worst, f, d, s, f);
            }
        }
        e.place(v, best.2, best.3, best.4);
    });
    e.schedule("lookahead")
}
