//! `Lios`: latency-based inter-operator scheduling (LIOS, IEEE TSC 2024, seed 001, Alg. 1).

use crate::error::Result;
use crate::policy::common::Ctx;
use crate::schedule::Schedule;

/// One step of Alg. 1, as in the paper's Table III.
#[derive(Debug, Clone, PartialEq)]
pub struct LiosStep {
    /// The wait list when the step began (ascending ids).
    pub wait: Vec<usize>,
    /// The selected operator.
    pub op: usize,
    /// EST on each stream.
    pub est: Vec<f64>,
    /// EFT on each stream.
    pub eft: Vec<f64>,
    /// The chosen stream.
    pub stream: usize,
}

/// Alg. 1 on one device with its streams: the ready operator of highest `Rank = weight` (ties:
/// lowest id) goes to the stream with the smallest EFT (ties: lowest stream), where
/// `EST = max(free(stream), max FT(pred))` and streams are appended to, never inserted into.
/// Returns the schedule and every step.
///
/// Choice: LIOS schedules one GPU; here the device is the single best device (a GPU when one
/// runs everything), and streams do not slow each other (the paper's latency model).
pub fn lios_trace(c: &Ctx) -> Result<(Schedule, Vec<LiosStep>)> {
    let d = c.best_single_device(true)?;
    let n = c.n();
    let lanes = c.t.devices[d].streams;
    let w: Vec<f64> = (0..n).map(|v| c.time[v][d]).collect();
    let mut indeg: Vec<usize> = c.dag.preds.iter().map(Vec::len).collect();
    let mut wait: Vec<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    let mut free = vec![0.0; lanes];
    let mut ft = vec![0.0; n];
    let mut stream = vec![0; n];
    let mut seq = Vec::with_capacity(n);
    let mut steps = Vec::with_capacity(n);
    while !wait.is_empty() {
        wait.sort_unstable();
        let (i, &v) = wait
            .iter()
            .enumerate()
            .max_by(|a, b| w[*a.1].total_cmp(&w[*b.1]).then(b.1.cmp(a.1)))
            .unwrap_or((0, &0));
        let snapshot = wait.clone();
        wait.remove(i);
        let pred_ft = c.dag.preds[v]
            .iter()
            .map(|&(u, _)| ft[u])
            .fold(0.0, f64::max);
        let est: Vec<f64> = free.iter().map(|&f: &f64| f.max(pred_ft)).collect();
        let eft: Vec<f64> = est.iter().map(|e| e + w[v]).collect();
        let s = (0..lanes)
            .min_by(|&a, &b| eft[a].total_cmp(&eft[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        ft[v] = eft[s];
        free[s] = eft[s];
        stream[v] = s;
        seq.push(v);
        steps.push(LiosStep {
            wait: snapshot,
            op: v,
            est,
            eft,
            stream: s,
        });
        for &(x, _) in &c.dag.succs[v] {
            indeg[x] -= 1;
            if indeg[x] == 0 {
                wait.push(x);
            }
        }
    }
    Ok((
        Schedule::from_sequence("lios", &vec![d; n], &stream, &seq),
        steps,
    ))
}

/// [`lios_trace`] without the trace.
pub fn lios(c: &Ctx) -> Result<Schedule> {
    Ok(lios_trace(c)?.0)
}
