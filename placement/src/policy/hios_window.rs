//! HIOS Alg. 2: intra-GPU inter-operator parallelization with a sliding window.

use crate::error::Result;
use crate::graph::reaches;
use crate::policy::common::Ctx;
use crate::policy::hios_lp::{hios_priority, hios_weights};
use crate::schedule::{OpPlacement, Schedule};

type Stages = Vec<Vec<Vec<usize>>>;

/// Alg. 2. Operators keep their devices; each device starts as one stage per operator in
/// decreasing priority. Along that order, for an operator not yet grouped, windows of 2..=w
/// operators (it and the next ones on its device, none of them grouped) are tried: if they are
/// pairwise independent and merging them into one stage leaves the stage graph (data edges plus
/// each device's stage order) acyclic, the candidate is simulated. The best candidate is kept if
/// it lowers the latency (choice: the paper merges before knowing; we keep a grouping only when
/// it helps, which its text "update Q if the candidate performs better" implies).
///
/// Latencies come from the crate's simulator with HIOS stage semantics, not from the HIOS
/// authors' evaluator.
pub fn parallelize(c: &Ctx, policy: &str, device: &[usize], w: usize) -> Result<Schedule> {
    let n = c.n();
    let (vw, ew) = hios_weights(c);
    let prio = hios_priority(c, &vw, &ew);
    let order = c.priority_order(&prio);
    let mut stages: Vec<Vec<Vec<usize>>> = vec![Vec::new(); c.d()];
    for &v in &order {
        stages[device[v]].push(vec![v]);
    }
    let mut best_s = build(c, policy, device, &stages)?;
    let mut best = c.makespan(&best_s)?;
    if w < 2 {
        return Ok(best_s);
    }
    let reach = c.dag.reachability();
    for &v in &order {
        let d = device[v];
        let Some(pos) = stages[d].iter().position(|s| s.contains(&v)) else {
            continue;
        };
        if stages[d][pos].len() > 1 {
            continue;
        }
        let mut cand_best: Option<(f64, Stages, Schedule)> = None;
        for p in 1..w.min(c.t.devices[d].streams) {
            let end = pos + p;
            if end >= stages[d].len() || stages[d][pos..=end].iter().any(|s| s.len() > 1) {
                break;
            }
            let win: Vec<usize> = stages[d][pos..=end].iter().map(|s| s[0]).collect();
            let indep = win.iter().all(|&a| {
                win.iter()
                    .all(|&b| a == b || (!reaches(&reach[a], b) && !reaches(&reach[b], a)))
            });
            if !indep {
                continue;
            }
            let mut cand = stages.clone();
            cand[d].splice(pos..=end, [win.clone()]);
            let Ok(s) = build(c, policy, device, &cand) else {
                continue;
            };
            let Ok(l) = c.makespan(&s) else { continue };
            if cand_best.as_ref().is_none_or(|x| l < x.0) {
                cand_best = Some((l, cand, s));
            }
        }
        if let Some((l, cand, s)) = cand_best
            && l < best
        {
            best = l;
            stages = cand;
            best_s = s;
        }
    }
    let _ = n;
    Ok(best_s)
}

/// Staged schedule from per-device stage lists; errors when the stage graph has a cycle.
pub(crate) fn build(
    c: &Ctx,
    policy: &str,
    device: &[usize],
    stages: &[Vec<Vec<usize>>],
) -> Result<Schedule> {
    let n = c.n();
    let mut sid = vec![0usize; n];
    let mut spos = vec![0usize; n];
    let mut members: Vec<&Vec<usize>> = Vec::new();
    for dev in stages {
        for (i, s) in dev.iter().enumerate() {
            for &v in s {
                sid[v] = members.len();
                spos[v] = i;
            }
            members.push(s);
        }
    }
    let k = members.len();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); k];
    let mut indeg = vec![0usize; k];
    let mut base = 0;
    for dev in stages {
        for i in 1..dev.len() {
            succ[base + i - 1].push(base + i);
            indeg[base + i] += 1;
        }
        base += dev.len();
    }
    for (u, list) in c.dag.succs.iter().enumerate() {
        for &(v, _) in list {
            if sid[u] != sid[v] {
                succ[sid[u]].push(sid[v]);
                indeg[sid[v]] += 1;
            }
        }
    }
    let mut ready: Vec<usize> = (0..k).filter(|&s| indeg[s] == 0).collect();
    let mut seq = Vec::with_capacity(n);
    while let Some(s) = ready.pop() {
        let mut m = members[s].clone();
        m.sort_unstable();
        seq.extend(m);
        for &x in &succ[s] {
            indeg[x] -= 1;
            if indeg[x] == 0 {
                ready.push(x);
            }
        }
    }
    if seq.len() < n {
        return Err(crate::PlacementError::Deadlock(
            "stage grouping makes a cycle".into(),
        ));
    }
    let mut ops = vec![
        OpPlacement {
            device: 0,
            stream: 0,
            order: 0,
            stage: None
        };
        n
    ];
    for (i, &v) in seq.iter().enumerate() {
        ops[v] = OpPlacement {
            device: device[v],
            stream: 0,
            order: i,
            stage: Some(spos[v]),
        };
    }
    Ok(Schedule {
        policy: policy.to_string(),
        ops,
    })
}
