//! `Opara`: stream allocation and launch order (Opara, IEEE TC 2024, seed 002).

use crate::error::Result;
use crate::graph::{Boundness, CostGraph, Dag};
use crate::policy::common::Ctx;
use crate::schedule::Schedule;

/// Alg. 1: in topological order, an operator joins the stream of its first predecessor whose
/// SYNC flag is still false (and sets it), else it opens a new stream. Returns unbounded
/// stream ids and the number of streams opened.
pub fn allocate_streams(dag: &Dag) -> (Vec<usize>, usize) {
    let mut flag = vec![false; dag.n];
    let mut stream = vec![usize::MAX; dag.n];
    let mut opened = 0;
    for &v in &dag.topo {
        for &(p, _) in &dag.preds[v] {
            if !flag[p] {
                stream[v] = stream[p];
                flag[p] = true;
                break;
            }
        }
        if stream[v] == usize::MAX {
            stream[v] = opened;
            opened += 1;
        }
    }
    (stream, opened)
}

/// Alg. 2: alternately take the memory-bound and the compute-bound ready list (starting with
/// memory-bound; a list that is empty is skipped), and launch the operator of least resource
/// demand in it (ties: lowest id).
pub fn launch_order(g: &CostGraph, dag: &Dag) -> Vec<usize> {
    let mut indeg: Vec<usize> = dag.preds.iter().map(Vec::len).collect();
    let mut lists: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    let which = |v: usize| usize::from(g.ops[v].bound == Boundness::Compute);
    for v in 0..dag.n {
        if indeg[v] == 0 {
            lists[which(v)].push(v);
        }
    }
    let mut q = Vec::with_capacity(dag.n);
    let mut turn = 0;
    while !lists[0].is_empty() || !lists[1].is_empty() {
        if lists[turn].is_empty() {
            turn = 1 - turn;
        }
        let l = &mut lists[turn];
        let (i, _) = l
            .iter()
            .enumerate()
            .min_by(|a, b| {
                g.ops[*a.1]
                    .resource
                    .total_cmp(&g.ops[*b.1].resource)
                    .then(a.1.cmp(b.1))
            })
            .unwrap_or((0, &0));
        let v = l.swap_remove(i);
        q.push(v);
        turn = 1 - turn;
        for &(s, _) in &dag.succs[v] {
            indeg[s] -= 1;
            if indeg[s] == 0 {
                lists[which(s)].push(s);
            }
        }
    }
    q
}

/// Alg. 1 + Alg. 2 on the single best device. Choice: Opara opens as many streams as Alg. 1
/// asks; a device with fewer streams gets stream `k mod streams`.
pub fn opara(c: &Ctx) -> Result<Schedule> {
    let d = c.best_single_device(true)?;
    let n = c.n();
    let lanes = c.t.devices[d].streams;
    let (s, _) = allocate_streams(&c.dag);
    let stream: Vec<usize> = s.iter().map(|k| k % lanes).collect();
    Ok(Schedule::from_sequence(
        "opara",
        &vec![d; n],
        &stream,
        &launch_order(c.g, &c.dag),
    ))
}
