//! `Cpop`: Critical Path On a Processor (Topcuoglu, Hariri, Wu, IEEE TPDS 2002).

use crate::policy::common::Ctx;
use crate::policy::eft::list_schedule;
use crate::schedule::Schedule;

/// CPOP. Priority = upward + downward rank (mean costs); the operators of the critical path
/// (entry to exit, each of priority equal to the entry's) all go to the one device that runs
/// them fastest in total, every other operator to its earliest-finish device with insertion.
/// Operators are taken by priority among the ready ones.
pub fn cpop(c: &Ctx) -> Schedule {
    let n = c.n();
    let up = c.upward_rank();
    let down = c.downward_rank();
    let prio: Vec<f64> = (0..n).map(|v| up[v] + down[v]).collect();
    let cp_len = prio.iter().copied().fold(0.0, f64::max);
    let tol = 1e-9 * cp_len.max(1.0);
    let mut on_cp = vec![false; n];
    // Walk from the highest-priority entry along successors of critical priority.
    let mut cur = c
        .dag
        .sources()
        .into_iter()
        .max_by(|&a, &b| prio[a].total_cmp(&prio[b]).then(b.cmp(&a)));
    while let Some(v) = cur {
        on_cp[v] = true;
        cur = c.dag.succs[v]
            .iter()
            .map(|&(s, _)| s)
            .filter(|&s| (prio[s] - cp_len).abs() <= tol)
            .min();
    }
    let cp_device = (0..c.d())
        .map(|d| {
            let t: f64 = (0..n).filter(|&v| on_cp[v]).map(|v| c.time[v][d]).sum();
            (d, t)
        })
        .filter(|x| x.1.is_finite())
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
        .map(|x| x.0);
    let e = list_schedule(c, &prio, |e, v, placed| {
        let (d, s, f) = match cp_device {
            Some(d) if on_cp[v] => {
                let (s, f) = e.slot(v, d, placed);
                (d, s, f)
            }
            _ => e.best(v, placed),
        };
        e.place(v, d, s, f);
    });
    e.schedule("cpop")
}
