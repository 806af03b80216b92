//! The lower bound is a true lower bound: below every policy's makespan on many seeds of every
//! graph family, and below the exhaustive optimum on graphs small enough to enumerate.

mod common;

use common::topo_orders;
use spillway_placement::generate::*;
use spillway_placement::*;

/// Every policy's schedule on `g`, `t` (those that apply) is at least the bound.
fn check_policies(g: &CostGraph, t: &Topology, what: &str) -> usize {
    let o = Options {
        auto_max_evals: 200,
        milp_time_limit_s: 0.5,
        ..Options::default()
    };
    let dag = g.dag().unwrap();
    let lb = lower_bound(g, &dag, t);
    assert!(lb.is_finite() && lb > 0.0, "{what}: bound {lb}");
    let mut checked = 0;
    for p in Policy::ALL {
        if matches!(p, Policy::Ios | Policy::Milp) {
            continue;
        }
        let Ok(s) = place(p, g, t, &o) else { continue };
        let m = simulate(g, t, &s).unwrap().makespan;
        assert!(
            m >= lb * (1.0 - 1e-9),
            "{what}, {}: makespan {m} below the bound {lb}",
            p.name()
        );
        checked += 1;
    }
    checked
}

#[test]
fn bound_is_below_every_policy_on_every_family() {
    for f in Family::ALL {
        for streams in [1, 2] {
            let t = f.topology(4, streams);
            for seed in 0..6 {
                let what = format!("{} seed {seed}, {streams} streams", f.name());
                assert!(check_policies(&f.graph(seed), &t, &what) >= 8, "{what}");
            }
        }
    }
}

#[test]
fn bound_is_below_every_policy_with_a_cpu() {
    for seed in 0..6 {
        let t = cpu_gpu_topology(4, 2, 2, 12.0, 50.0);
        check_policies(&inception(2, seed), &t, &format!("inception seed {seed}"));
        check_policies(&sized(60, 100, seed), &t, &format!("sized seed {seed}"));
        let t = cpu_gpu_topology(2, 1, 1, 12.0, 50.0);
        check_policies(
            &series_parallel(40, seed),
            &t,
            &format!("series_parallel seed {seed}"),
        );
    }
}

/// The simulator's optimum over every unstaged schedule: each operator on each (device,
/// stream) it can run on, every topological launch sequence (each stream runs its operators in
/// that order as early as they can start, which is how an optimal schedule of this model can
/// always be written).
fn optimum(g: &CostGraph, t: &Topology) -> f64 {
    let n = g.ops.len();
    let slots: Vec<(usize, usize)> = t
        .devices
        .iter()
        .enumerate()
        .flat_map(|(d, dev)| (0..dev.streams).map(move |s| (d, s)))
        .collect();
    let mut seqs = Vec::new();
    topo_orders(g, &mut Vec::new(), &mut vec![false; n], &mut seqs);
    let mut best = f64::INFINITY;
    let k = slots.len();
    'codes: for code in 0..k.pow(n as u32) {
        let mut device = vec![0; n];
        let mut stream = vec![0; n];
        for v in 0..n {
            let (d, s) = slots[code / k.pow(v as u32) % k];
            if !g.ops[v].cost_us.contains_key(&t.devices[d].kind) {
                continue 'codes;
            }
            (device[v], stream[v]) = (d, s);
        }
        for seq in &seqs {
            let s = Schedule::from_sequence("enum", &device, &stream, seq);
            best = best.min(simulate(g, t, &s).unwrap().makespan);
        }
    }
    best
}

fn check_optimum(g: &CostGraph, t: &Topology, what: &str) {
    let lb = lower_bound(g, &g.dag().unwrap(), t);
    let opt = optimum(g, t);
    assert!(opt.is_finite(), "{what}");
    assert!(
        lb <= opt * (1.0 + 1e-9),
        "{what}: bound {lb} above the optimum {opt}"
    );
}

#[test]
fn bound_is_below_the_optimum_of_tiny_graphs() {
    for seed in 0..4 {
        let hc = HiosCodeParams {
            ops: 5,
            layers: 3,
            edges: 6,
            p: 0.8,
        };
        check_optimum(&hios_code(&hc, seed), &hios_topology(2, 1), "hios_code 2×1");
        check_optimum(&hios_code(&hc, seed), &hios_topology(2, 2), "hios_code 2×2");
        let fj = ForkJoinParams {
            ops: 5,
            max_width: 3,
            max_depth: 2,
        };
        check_optimum(
            &fork_join(&fj, seed),
            &nvlink_topology(3, 1),
            "fork_join 3×1",
        );
        check_optimum(
            &fork_join(&fj, seed),
            &nvlink_topology(2, 2),
            "fork_join 2×2",
        );
        check_optimum(
            &series_parallel(5, seed),
            &nvlink_topology(2, 1),
            "series_parallel",
        );
        let small = LayeredParams {
            ops: 5,
            layers: 3,
            edges: 6,
            ..LayeredParams::default()
        };
        check_optimum(
            &hios_layered(&small, seed),
            &hios_topology(2, 2),
            "layered 2×2",
        );
        // Copies as long as the operators: where counting them lifts the bound most.
        let mut g = fork_join(&fj, seed);
        g.edges.iter_mut().for_each(|e| e.bytes *= 40.0);
        check_optimum(&g, &nvlink_topology(3, 1), "fork_join, heavy copies");
        check_optimum(
            &sized(5, 6, seed),
            &cpu_gpu_topology(2, 1, 1, 12.0, 50.0),
            "sized, CPU + GPU",
        );
    }
}
