//! `Nimble`: stream assignment from a maximum bipartite matching on the minimum equivalent
//! graph (Kwon et al., NeurIPS 2020), as the Opara and LIOS papers describe it.

use crate::error::Result;
use crate::graph::reaches;
use crate::policy::common::Ctx;
use crate::schedule::Schedule;

/// The minimum equivalent graph of a DAG is its transitive reduction: edge `u → v` stays when
/// no other successor of `u` reaches `v`. A maximum matching in the bipartite graph
/// (out-copies × in-copies) of that reduction gives a minimum chain cover; each chain is one
/// stream (matched `u → v` puts `v` right after `u`). Chains are mapped onto the device's streams
/// as `chain mod streams` (Nimble opens as many as needed); launch order is topological.
#[allow(clippy::needless_range_loop)]
pub fn nimble(c: &Ctx) -> Result<Schedule> {
    let d = c.best_single_device(true)?;
    let n = c.n();
    let reach = c.dag.reachability();
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
    for u in 0..n {
        let succ: Vec<usize> = c.dag.succs[u].iter().map(|x| x.0).collect();
        for &v in &succ {
            if !succ.iter().any(|&w| w != v && reaches(&reach[w], v)) && !adj[u].contains(&v) {
                adj[u].push(v);
            }
        }
    }
    let mut match_r = vec![usize::MAX; n];
    let mut match_l = vec![usize::MAX; n];
    for u in 0..n {
        let mut seen = vec![false; n];
        augment(u, &adj, &mut match_l, &mut match_r, &mut seen);
    }
    let mut chain = vec![usize::MAX; n];
    let mut k = 0;
    for &v in &c.dag.topo {
        if chain[v] == usize::MAX {
            let mut x = v;
            loop {
                chain[x] = k;
                if match_l[x] == usize::MAX {
                    break;
                }
                x = match_l[x];
            }
            k += 1;
        }
    }
    let lanes = c.t.devices[d].streams;
    let stream: Vec<usize> = chain.iter().map(|&ch| ch % lanes).collect();
    Ok(Schedule::from_sequence(
        "nimble",
        &vec![d; n],
        &stream,
        &c.dag.topo,
    ))
}

fn augment(
    u: usize,
    adj: &[Vec<usize>],
    ml: &mut [usize],
    mr: &mut [usize],
    seen: &mut [bool],
) -> bool {
    for &v in &adj[u] {
        if seen[v] {
            continue;
        }
        seen[v] = true;
        if mr[v] == usize::MAX || augment(mr[v], adj, ml, mr, seen) {
            mr[v] = u;
            ml[u] = v;
            return true;
        }
    }
    false
}
