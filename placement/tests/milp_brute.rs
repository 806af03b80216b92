//! `Milp` against exhaustive enumeration on tiny graphs.
//!
//! The expected optimum comes from enumerating every machine assignment and every topological
//! launch sequence, each timed earliest-start (an operator starts when its machine is free and
//! every producer's result has arrived: producer finish plus `latency + bytes / bandwidth` of
//! the link when the devices differ). Every schedule of the SIR+ §5 model is matched or beaten
//! by the one of this family that has the same machines and launches in order of start time,
//! so the minimum over the family is the model's optimum.

mod common;

use common::topo_orders;
use spillway_placement::generate::{LayeredParams, TransferRule, hios_layered};
use spillway_placement::policy::common::Ctx;
use spillway_placement::policy::milp;
use spillway_placement::policy::milp_solver::MilpSolver;
use spillway_placement::*;

/// A HIOS random layered DAG of `n` operators with streams that do not slow each other down
/// (so each (GPU, stream) is one machine of the model).
fn tiny(n: usize, seed: u64) -> CostGraph {
    let p = LayeredParams {
        ops: n,
        layers: (n / 2).max(2),
        edges: n + 1,
        p: 0.8,
        rule: TransferRule::Max,
    };
    let mut g = hios_layered(&p, seed);
    g.concurrency = Concurrency::default();
    g
}

/// Exhaustive optimum over machines (device, stream) = every GPU's single stream.
fn brute_force(g: &CostGraph, t: &Topology) -> f64 {
    let n = g.ops.len();
    let d = t.devices.len();
    let time = |v: usize| g.ops[v].cost_us[&DeviceKind::Gpu];
    let copy = |bytes: f64, a: usize, b: usize| {
        if a == b {
            return 0.0;
        }
        let l = t.links.iter().find(|l| l.src == a && l.dst == b).unwrap();
        l.latency_us + bytes / l.bandwidth
    };
    let mut best = f64::INFINITY;
    let mut seqs = Vec::new();
    topo_orders(g, &mut vec![], &mut vec![false; n], &mut seqs);
    assert!(!seqs.is_empty());
    for code in 0..d.pow(n as u32) {
        let dev: Vec<usize> = (0..n).map(|v| code / d.pow(v as u32) % d).collect();
        for seq in &seqs {
            let mut free = vec![0.0f64; d];
            let mut fin = vec![0.0f64; n];
            for &v in seq {
                let mut s = free[dev[v]];
                for e in g.edges.iter().filter(|e| e.dst == v) {
                    s = s.max(fin[e.src] + copy(e.bytes, dev[e.src], dev[v]));
                }
                fin[v] = s + time(v);
                free[dev[v]] = fin[v];
            }
            best = best.min(fin.iter().copied().fold(0.0, f64::max));
        }
    }
    best
}

fn check(n: usize, gpus: usize, seed: u64) {
    let g = tiny(n, seed);
    let t = Topology::gpus(gpus, 1);
    let expected = brute_force(&g, &t);
    let c = Ctx::new(&g, &t).unwrap();
    for solver in [MilpSolver::Microlp, MilpSolver::Highs] {
        if !solver.available() {
            continue;
        }
        let o = Options {
            milp_solver: solver,
            ..Options::default()
        };
        let r = milp::milp(&c, &o).unwrap();
        let name = solver.name();
        assert!(
            r.optimal,
            "{name} n={n} gpus={gpus} seed={seed}: not proven"
        );
        assert!(
            (r.objective - expected).abs() <= 1e-6 * expected.max(1.0),
            "{name} n={n} gpus={gpus} seed={seed}: milp {} vs enumeration {expected}",
            r.objective
        );
    }
}

#[test]
fn milp_matches_enumeration_on_four_ops() {
    for seed in 1..=3 {
        check(4, 2, seed);
    }
}

#[test]
fn milp_matches_enumeration_on_five_ops_three_gpus() {
    for seed in 1..=2 {
        check(5, 3, seed);
    }
}

#[test]
fn milp_matches_enumeration_on_six_ops() {
    for seed in 1..=2 {
        check(6, 2, seed);
    }
}
