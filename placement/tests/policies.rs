//! Every policy on generated graphs: valid schedules, makespans above the lower bound.

use spillway_placement::generate::*;
use spillway_placement::policy::common::Ctx;
use spillway_placement::policy::{auto, ios, milp, opara, sir, sortinghat};
use spillway_placement::*;

fn cases() -> Vec<(CostGraph, Topology)> {
    let small = LayeredParams {
        ops: 30,
        layers: 6,
        edges: 50,
        ..LayeredParams::default()
    };
    vec![
        (hios_layered(&small, 3), hios_topology(3, 2)),
        (inception(2, 4), cpu_gpu_topology(4, 2, 2, 12.0, 50.0)),
        (nasnet(1, 5), cpu_gpu_topology(2, 1, 4, 12.0, 50.0)),
        (
            series_parallel(25, 6),
            cpu_gpu_topology(2, 1, 2, 12.0, 50.0),
        ),
    ]
}

fn check(g: &CostGraph, t: &Topology, s: &Schedule) -> SimResult {
    let r = simulate(g, t, s).unwrap();
    assert!(
        r.makespan >= r.lower_bound * (1.0 - 1e-9),
        "{}: {} < {}",
        s.policy,
        r.makespan,
        r.lower_bound
    );
    for e in &g.edges {
        let (u, v) = (&r.ops[e.src], &r.ops[e.dst]);
        assert!(
            v.start >= u.finish - 1e-9,
            "{}: {} starts before {} ends",
            s.policy,
            e.dst,
            e.src
        );
        if u.device != v.device {
            assert!(
                r.copies.iter().any(|c| c.producer == e.src
                    && c.dst == v.device
                    && c.finish <= v.start + 1e-9)
            );
        }
    }
    r
}

#[test]
fn every_policy_gives_a_valid_schedule() {
    let o = Options {
        auto_budget_ms: 50,
        milp_time_limit_s: 1.0,
        ..Options::default()
    };
    for (g, t) in cases() {
        // Only two refusals are legitimate: IOS and the MILP over their size caps, and the
        // CPU-overflow policies on a topology without a CPU. Any other policy must place.
        let has_cpu = t.devices.iter().any(|d| d.kind == DeviceKind::Cpu);
        for p in Policy::ALL {
            match place(p, &g, &t, &o) {
                Ok(s) => {
                    check(&g, &t, &s);
                }
                Err(PlacementError::TooLarge { n, limit, .. })
                    if matches!(p, Policy::Ios | Policy::Milp) =>
                {
                    assert!(
                        n > limit,
                        "{}: refused {n} ops under its limit {limit}",
                        p.name()
                    )
                }
                Err(PlacementError::NotApplicable { .. })
                    if matches!(p, Policy::Qd | Policy::Sd | Policy::CommSd) && !has_cpu => {}
                Err(e) => panic!("{} must place this graph: {e}", p.name()),
            }
        }
    }
}

#[test]
fn auto_is_no_worse_than_any_candidate() {
    let o = Options {
        auto_budget_ms: 100,
        ..Options::default()
    };
    for (g, t) in cases() {
        let c = Ctx::new(&g, &t).unwrap();
        let rep = auto::auto(&c, &o).unwrap();
        let m = check(&g, &t, &rep.schedule).makespan;
        assert_eq!(m, rep.makespan);
        for row in &rep.table {
            if let Ok(x) = row.makespan {
                assert!(m <= x + 1e-9, "{:?} {x} beat auto {m}", row.policy);
            }
        }
    }
}

#[test]
fn exponential_policies_refuse_big_graphs() {
    let g = hios_layered(&LayeredParams::default(), 1);
    let t = hios_topology(2, 2);
    let o = Options::default();
    assert!(matches!(
        place(Policy::Ios, &g, &t, &o),
        Err(PlacementError::TooLarge {
            policy: "ios",
            n: 200,
            ..
        })
    ));
    assert!(matches!(
        place(Policy::Milp, &g, &t, &o),
        Err(PlacementError::TooLarge { policy: "milp", .. })
    ));
}

/// Two independent 10 µs operators and a 1 µs join on two GPUs with 1 µs copies: the optimum
/// runs them on both GPUs (10), copies one result (1) and joins (1): 12.
#[test]
fn milp_proves_a_small_optimum() {
    let g = CostGraph {
        ops: vec![Op::gpu("a", 10.), Op::gpu("b", 10.), Op::gpu("j", 1.)],
        edges: vec![
            Edge {
                src: 0,
                dst: 2,
                bytes: 1.,
            },
            Edge {
                src: 1,
                dst: 2,
                bytes: 1.,
            },
        ],
        concurrency: Concurrency::default(),
    };
    let t = Topology::gpus(2, 1);
    let c = Ctx::new(&g, &t).unwrap();
    let r = milp::milp(&c, &Options::default()).unwrap();
    assert!(r.optimal);
    assert!((r.objective - 12.0).abs() < 1e-6);
    assert_eq!(r.gap, Some(0.0));
    assert_eq!(simulate(&g, &t, &r.schedule).unwrap().makespan, 12.0);
}

/// IOS on one GPU with independent streams: three independent ops of 3, 2, 2 µs and 2 streams.
/// Stages {3,2} then {2}: 3 + 2 = 5 is optimal.
#[test]
fn ios_finds_the_best_stages() {
    let g = CostGraph {
        ops: vec![Op::gpu("a", 3.), Op::gpu("b", 2.), Op::gpu("c", 2.)],
        edges: vec![],
        concurrency: Concurrency::default(),
    };
    let t = Topology::gpus(1, 2);
    let c = Ctx::new(&g, &t).unwrap();
    let s = ios::ios(&c, 24, 4, 8).unwrap();
    assert_eq!(simulate(&g, &t, &s).unwrap().makespan, 5.0);
}

/// Opara Alg. 1 on a diamond a→{b,c}→d: b joins a's stream, c opens a new one, d joins b's.
#[test]
fn opara_stream_allocation_follows_alg_1() {
    let g = CostGraph {
        ops: (0..4).map(|i| Op::gpu(format!("{i}"), 1.)).collect(),
        edges: [(0, 1), (0, 2), (1, 3), (2, 3)]
            .iter()
            .map(|&(src, dst)| Edge {
                src,
                dst,
                bytes: 0.,
            })
            .collect(),
        concurrency: Concurrency::default(),
    };
    let (s, k) = opara::allocate_streams(&g.dag().unwrap());
    assert_eq!((s, k), (vec![0, 0, 1, 0], 2));
}

/// Opara Alg. 2: memory-bound and compute-bound lists alternate, least resource first.
#[test]
fn opara_launch_order_alternates_lists() {
    let mut ops: Vec<Op> = (0..4).map(|i| Op::gpu(format!("{i}"), 1.)).collect();
    let spec = [
        (Boundness::Compute, 0.2),
        (Boundness::Compute, 0.1),
        (Boundness::Memory, 0.9),
        (Boundness::Memory, 0.5),
    ];
    for (o, (b, r)) in ops.iter_mut().zip(spec) {
        o.bound = b;
        o.resource = r;
    }
    let g = CostGraph {
        ops,
        edges: vec![],
        concurrency: Concurrency::default(),
    };
    assert_eq!(opara::launch_order(&g, &g.dag().unwrap()), vec![3, 1, 2, 0]);
}

/// SIR+ §4: with α = 100 µs, a task 50 µs slower on the CPU moves there (SD) unless its copies
/// make it worse than the GPU by more than α (Comm+SD moves it back).
#[test]
fn sd_and_comm_sd() {
    let mk = |gpu: f64, cpu: f64| Op::new("t", &[(DeviceKind::Gpu, gpu), (DeviceKind::Cpu, cpu)]);
    let g = CostGraph {
        ops: vec![mk(500., 5000.), mk(10., 60.), mk(500., 5000.)],
        edges: vec![
            Edge {
                src: 0,
                dst: 1,
                bytes: 1000.,
            },
            Edge {
                src: 1,
                dst: 2,
                bytes: 10.,
            },
        ],
        concurrency: Concurrency::default(),
    };
    let t = cpu_gpu_topology(1, 1, 1, 10.0, 10.0);
    let c = Ctx::new(&g, &t).unwrap();
    let sd = sir::sd(&c, 100.).unwrap();
    assert_eq!(
        sd.ops.iter().map(|p| p.device).collect::<Vec<_>>(),
        vec![1, 0, 1]
    );
    // Copies: 10 + 1000/10 = 110 in, 10 + 1 = 11 out; 60 + 121 > 10 + 100 → back to the GPU.
    let (cs, iters) = sir::comm_sd(&c, 100., 10).unwrap();
    assert_eq!(
        cs.ops.iter().map(|p| p.device).collect::<Vec<_>>(),
        vec![1, 1, 1]
    );
    assert_eq!(iters, 2);
}

#[test]
fn sortinghat_partitions_at_dominators() {
    let g = inception(2, 1);
    let t = cpu_gpu_topology(2, 2, 1, 12., 50.);
    let c = Ctx::new(&g, &t).unwrap();
    // stem conv, concat of cell 1, concat of cell 2.
    assert_eq!(sortinghat::partition_nodes(&c), vec![0, 9, 18]);
    let subs = sortinghat::submodels(&c, 1);
    assert_eq!(subs.iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 9, 9]);
}

#[test]
fn gantt_draws_every_op_and_copy() {
    let (g, t) = &cases()[1];
    let s = place(Policy::Heft, g, t, &Options::default()).unwrap();
    let r = simulate(g, t, &s).unwrap();
    let svg = gantt::gantt_svg(g, t, &r);
    assert!(svg.starts_with("<svg"));
    assert_eq!(svg.matches(r#"<rect class="op""#).count(), g.ops.len());
    assert_eq!(svg.matches(r#"<rect class="copy""#).count(), r.copies.len());
}
