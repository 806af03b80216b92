//! Auto's constructive starts and search: valid schedules, the critical path on one device for
//! CPOP, determinism for a seed, the early stop at the lower bound, the ablation switches.

use spillway_placement::generate::*;
use spillway_placement::policy::auto::{Ingredients, auto};
use spillway_placement::policy::common::Ctx;
use spillway_placement::policy::{cpop, lookahead, peft};
use spillway_placement::*;

fn cases() -> Vec<(CostGraph, Topology)> {
    let small = LayeredParams {
        ops: 30,
        layers: 6,
        edges: 50,
        ..LayeredParams::default()
    };
    let fj = ForkJoinParams {
        ops: 30,
        ..ForkJoinParams::default()
    };
    vec![
        (hios_layered(&small, 3), hios_topology(3, 2)),
        (fork_join(&fj, 1), nvlink_topology(4, 1)),
        (inception(2, 4), cpu_gpu_topology(4, 2, 2, 12.0, 50.0)),
        (
            series_parallel(25, 6),
            cpu_gpu_topology(2, 1, 2, 12.0, 50.0),
        ),
    ]
}

/// Auto with a budget that only the simulator-call count ends (so it is deterministic even
/// in a slow debug build).
fn opts(evals: usize) -> Options {
    Options {
        auto_max_evals: evals,
        auto_budget_ms: 600_000,
        ..Options::default()
    }
}

#[test]
fn every_start_gives_a_valid_schedule_above_the_bound() {
    for (g, t) in cases() {
        let c = Ctx::new(&g, &t).unwrap();
        let lb = lower_bound(&g, &c.dag, &t);
        for s in [cpop::cpop(&c), peft::peft(&c), lookahead::lookahead(&c)] {
            s.validate(&g, &c.dag, &t).unwrap();
            let m = simulate(&g, &t, &s).unwrap().makespan;
            assert!(m >= lb * (1.0 - 1e-9), "{}: {m} < {lb}", s.policy);
        }
    }
}

/// A chain of GPU operators with heavy copies, beside one independent operator.
fn chain_and_one() -> CostGraph {
    let mut ops: Vec<Op> = (0..6).map(|i| Op::gpu(format!("c{i}"), 100.0)).collect();
    ops.push(Op::gpu("lone", 50.0));
    let edges = (0..5)
        .map(|i| Edge {
            src: i,
            dst: i + 1,
            bytes: 1000.0,
        })
        .collect();
    CostGraph {
        ops,
        edges,
        concurrency: Concurrency::default(),
    }
}

#[test]
fn cpop_keeps_the_critical_path_on_one_device() {
    let g = chain_and_one();
    let t = hios_topology(3, 1);
    let c = Ctx::new(&g, &t).unwrap();
    let s = cpop::cpop(&c);
    let d0 = s.ops[0].device;
    assert!((0..6).all(|v| s.ops[v].device == d0), "{:?}", s.ops);
    // The lone operator goes where it finishes first: not behind the chain.
    assert_ne!(s.ops[6].device, d0);
    assert_eq!(simulate(&g, &t, &s).unwrap().makespan, 600.0);
}

#[test]
fn auto_stops_at_the_lower_bound() {
    let g = chain_and_one();
    let t = hios_topology(2, 1);
    let c = Ctx::new(&g, &t).unwrap();
    let r = auto(&c, &opts(4000)).unwrap();
    assert_eq!(r.lower_bound, 600.0);
    assert_eq!(r.makespan, 600.0);
    // Only the table and the starts ran: the search saw the bound reached at once.
    assert!(r.evals < 100, "{} simulator calls", r.evals);
}

#[test]
fn auto_is_deterministic_for_a_seed() {
    for (g, t) in cases() {
        let c = Ctx::new(&g, &t).unwrap();
        let a = auto(&c, &opts(400)).unwrap();
        let b = auto(&c, &opts(400)).unwrap();
        assert_eq!(a.schedule, b.schedule);
        assert_eq!(a.makespan, b.makespan);
        assert_eq!(a.evals, b.evals);
        assert!(a.evals <= 400);
    }
}

#[test]
fn every_ingredient_set_is_no_worse_than_the_best_policy() {
    let names = [
        "policies",
        "starts",
        "random",
        "reorder",
        "critical",
        "chains",
        "swaps",
        "full",
        "no-starts",
        "no-random",
        "no-reorder",
        "no-critical",
        "no-chains",
        "no-swaps",
        "no-multi-start",
        "late-acceptance",
    ];
    assert!(Ingredients::named("nothing").is_none());
    assert_eq!(Ingredients::named("full"), Some(Ingredients::default()));
    let (g, t) = &cases()[1];
    let c = Ctx::new(g, t).unwrap();
    for name in names {
        let o = Options {
            auto_ingredients: Ingredients::named(name).unwrap(),
            ..opts(300)
        };
        let r = auto(&c, &o).unwrap();
        let best_policy = r
            .table
            .iter()
            .filter_map(|x| x.makespan.as_ref().ok())
            .fold(f64::INFINITY, |a, &b| a.min(b));
        assert!(r.makespan <= best_policy, "{name}");
        assert_eq!(simulate(g, t, &r.schedule).unwrap().makespan, r.makespan);
        if name == "policies" {
            assert_eq!(r.makespan, best_policy);
        }
    }
}
