//! `Peft`: Predict Earliest Finish Time (Arabnejad, Barbosa, IEEE TPDS 2014).

use crate::policy::common::Ctx;
use crate::policy::eft::list_schedule;
use crate::schedule::Schedule;

/// The optimistic cost table: `oct[v][d]` = `max over successors s of min over devices d' of
/// oct[s][d'] + time(s, d') + (mean copy of (v, s) if d' ≠ d)`; 0 at exits.
pub fn optimistic_costs(c: &Ctx) -> Vec<Vec<f64>> {
    let (n, nd) = (c.n(), c.d());
    let mut oct = vec![vec![0.0; nd]; n];
    for &v in c.dag.topo.iter().rev() {
        for d in 0..nd {
            oct[v][d] = c.dag.succs[v]
                .iter()
                .map(|&(s, e)| {
                    let cm = c.mean_comm(e);
                    (0..nd)
                        .map(|x| oct[s][x] + c.time[s][x] + if x == d { 0.0 } else { cm })
                        .fold(f64::INFINITY, f64::min)
                })
                .fold(0.0, f64::max);
        }
    }
    oct
}

/// PEFT. Priority = the mean of an operator's optimistic costs over the devices that can run
/// it; each operator goes to the device that minimises its insertion-based earliest finish
/// plus its optimistic cost there, which looks one step past the operator's own finish.
pub fn peft(c: &Ctx) -> Schedule {
    let oct = optimistic_costs(c);
    let prio: Vec<f64> = (0..c.n())
        .map(|v| {
            let f: Vec<f64> = (0..c.d())
                .filter(|&d| c.time[v][d].is_finite())
                .map(|d| oct[v][d])
                .collect();
            f.iter().sum::<f64>() / f.len().max(1) as f64
        })
        .collect();
    let e = list_schedule(c, &prio, |e, v, placed| {
        let mut best = (f64::INFINITY, 0, 0.0, 0.0);
        for d in 0..c.d() {
            let (s, f) = e.slot(v, d, placed);
            if f + oct[v][d] < best.0 {
                best = (f + oct[v][d], d, s, f);
            }
        }
        e.place(v, best.1, best.2, best.3);
    });
    e.schedule("peft")
}
