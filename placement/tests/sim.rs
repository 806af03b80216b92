//! Simulator semantics on hand-computed cases.

use spillway_placement::*;

fn g_of(times: &[f64], edges: &[(usize, usize, f64)]) -> CostGraph {
    CostGraph {
        ops: times
            .iter()
            .enumerate()
            .map(|(i, &t)| Op::gpu(format!("o{i}"), t))
            .collect(),
        edges: edges
            .iter()
            .map(|&(src, dst, bytes)| Edge { src, dst, bytes })
            .collect(),
        concurrency: Concurrency::default(),
    }
}

fn sched(place: &[(usize, usize)], seq: &[usize]) -> Schedule {
    let d: Vec<usize> = place.iter().map(|p| p.0).collect();
    let s: Vec<usize> = place.iter().map(|p| p.1).collect();
    Schedule::from_sequence("test", &d, &s, seq)
}

#[test]
fn copy_is_latency_plus_bytes_over_bandwidth() {
    let g = g_of(&[10., 5.], &[(0, 1, 4.)]);
    let t = Topology::full_mesh(vec![Device::gpu("a", 1), Device::gpu("b", 1)], 2.0, 1.0);
    let r = simulate(&g, &t, &sched(&[(0, 0), (1, 0)], &[0, 1])).unwrap();
    assert_eq!(r.copies.len(), 1);
    assert_eq!((r.copies[0].start, r.copies[0].finish), (10., 13.));
    assert_eq!(
        (r.ops[1].ready, r.ops[1].start, r.ops[1].finish),
        (13., 13., 18.)
    );
    assert_eq!(r.makespan, 18.);
    assert_eq!(r.devices[1].copy_in_us, 3.);
}

#[test]
fn copies_on_one_link_direction_are_serialized() {
    let g = g_of(&[10., 10., 1.], &[(0, 2, 5.), (1, 2, 5.)]);
    let t = Topology::gpus(2, 2);
    let r = simulate(&g, &t, &sched(&[(0, 0), (0, 1), (1, 0)], &[0, 1, 2])).unwrap();
    let spans: Vec<(f64, f64)> = r.copies.iter().map(|c| (c.start, c.finish)).collect();
    assert_eq!(spans, vec![(10., 15.), (15., 20.)]);
    assert_eq!(r.ops[2].start, 20.);
    assert_eq!(r.makespan, 21.);
}

#[test]
fn one_copy_per_producer_and_destination() {
    let g = g_of(&[1., 1., 1.], &[(0, 1, 3.), (0, 2, 5.)]);
    let t = Topology::gpus(2, 2);
    let r = simulate(&g, &t, &sched(&[(0, 0), (1, 0), (1, 1)], &[0, 1, 2])).unwrap();
    assert_eq!(r.copies.len(), 1);
    assert_eq!(r.copies[0].bytes, 5.);
    assert_eq!((r.ops[1].start, r.ops[2].start), (6., 6.));
}

#[test]
fn links_on_a_shared_bus_share_one_queue() {
    let g = g_of(&[4., 4., 1.], &[(0, 2, 2.), (1, 2, 2.)]);
    let mut t = Topology::gpus(3, 1);
    t.buses.push(Bus {
        name: "pcie".into(),
    });
    for l in &mut t.links {
        l.bus = Some(0);
    }
    let r = simulate(&g, &t, &sched(&[(0, 0), (1, 0), (2, 0)], &[0, 1, 2])).unwrap();
    let spans: Vec<(f64, f64)> = r.copies.iter().map(|c| (c.start, c.finish)).collect();
    assert_eq!(spans, vec![(4., 6.), (6., 8.)]);
    // Without the bus the two links copy in parallel.
    let t2 = Topology::gpus(3, 1);
    let r2 = simulate(&g, &t2, &sched(&[(0, 0), (1, 0), (2, 0)], &[0, 1, 2])).unwrap();
    assert_eq!(r2.ops[2].start, 6.);
}

fn two_parallel(model: SlowdownModel, resource: f64) -> f64 {
    let mut g = g_of(&[10., 10.], &[]);
    g.concurrency.model = model;
    for o in &mut g.ops {
        o.resource = resource;
    }
    let t = Topology::gpus(1, 2);
    simulate(&g, &t, &sched(&[(0, 0), (0, 1)], &[0, 1]))
        .unwrap()
        .makespan
}

#[test]
fn slowdown_models() {
    assert_eq!(two_parallel(SlowdownModel::None, 1.0), 10.);
    assert_eq!(two_parallel(SlowdownModel::Resource, 1.0), 20.);
    assert_eq!(two_parallel(SlowdownModel::Resource, 0.5), 10.);
    assert_eq!(two_parallel(SlowdownModel::Resource, 0.75), 15.);
    assert_eq!(
        two_parallel(SlowdownModel::Linear { per_extra: 0.5 }, 1.0),
        15.
    );
}

/// a (10) on stream 0; x (2) then b (10) on stream 1; all resource 1. x shares the GPU with a
/// from 0 and ends at 4 (a has done 2); a and b then share: a ends at 4 + 2·8 = 20, b has done
/// 8 and finishes alone at 22.
#[test]
fn processor_sharing_rates_change_with_the_running_set() {
    let mut g = g_of(&[10., 2., 10.], &[(1, 2, 0.)]);
    g.concurrency.model = SlowdownModel::Resource;
    let t = Topology::gpus(1, 2);
    let r = simulate(&g, &t, &sched(&[(0, 0), (0, 1), (0, 1)], &[0, 1, 2])).unwrap();
    assert_eq!(r.ops[1].finish, 4.);
    assert_eq!(r.ops[0].finish, 20.);
    assert_eq!(r.ops[2].finish, 22.);
    assert_eq!(r.devices[0].busy_us, 22.);
    assert_eq!(r.devices[0].utilization, 1.);
}

#[test]
fn stages_release_together_after_t_of_s() {
    let mut g = g_of(&[10., 8., 1.], &[(1, 2, 0.)]);
    g.concurrency.table = vec![ConcurrentSet {
        ops: vec![0, 1],
        time_us: 15.,
    }];
    let t = Topology::gpus(1, 2);
    let mut s = sched(&[(0, 0), (0, 0), (0, 0)], &[0, 1, 2]);
    for (v, st) in [(0, 0), (1, 0), (2, 1)] {
        s.ops[v].stage = Some(st);
    }
    let r = simulate(&g, &t, &s).unwrap();
    assert_eq!((r.ops[0].finish, r.ops[1].finish), (15., 15.));
    assert_eq!((r.ops[2].start, r.makespan), (15., 16.));
}

#[test]
fn queueing_time_is_start_minus_ready() {
    let g = g_of(&[5., 5.], &[]);
    let t = Topology::gpus(1, 1);
    let r = simulate(&g, &t, &sched(&[(0, 0), (0, 0)], &[0, 1])).unwrap();
    assert_eq!(r.ops[1].ready, 0.);
    assert_eq!(r.devices[0].queueing_us, 5.);
}

#[test]
fn a_stage_waiting_on_itself_is_a_deadlock() {
    let g = g_of(&[1., 1., 1.], &[(0, 1, 0.), (1, 2, 0.)]);
    let t = Topology::gpus(2, 2);
    let mut s = sched(&[(0, 0), (1, 0), (0, 0)], &[0, 1, 2]);
    s.ops[0].stage = Some(0);
    s.ops[2].stage = Some(0);
    s.ops[1].stage = Some(0);
    assert!(matches!(
        simulate(&g, &t, &s),
        Err(PlacementError::Deadlock(_))
    ));
}

#[test]
fn invalid_inputs_are_typed_errors() {
    let cyc = g_of(&[1., 1.], &[(0, 1, 0.), (1, 0, 0.)]);
    assert!(matches!(cyc.dag(), Err(PlacementError::Cycle { .. })));
    let dangling = g_of(&[1.], &[(0, 3, 0.)]);
    assert!(matches!(
        dangling.dag(),
        Err(PlacementError::DanglingEdge {
            edge: 0,
            op: 3,
            n: 1
        })
    ));
    let neg = g_of(&[-1.], &[]);
    assert!(matches!(neg.dag(), Err(PlacementError::InvalidValue(_))));
    let g = g_of(&[1., 1.], &[(0, 1, 0.)]);
    let t = Topology::gpus(1, 1);
    assert!(matches!(
        simulate(&g, &t, &sched(&[(0, 0), (3, 0)], &[0, 1])),
        Err(PlacementError::DeviceOutOfRange { device: 3, n: 1 })
    ));
    assert!(matches!(
        simulate(&g, &t, &sched(&[(0, 0), (0, 1)], &[0, 1])),
        Err(PlacementError::InvalidSchedule(_))
    ));
    assert!(matches!(
        simulate(&g, &t, &sched(&[(0, 0), (0, 0)], &[1, 0])),
        Err(PlacementError::InvalidSchedule(_))
    ));
    let cpu_only = Topology {
        devices: vec![Device::cpu("c", 1)],
        ..Topology::default()
    };
    assert!(matches!(
        simulate(&g, &cpu_only, &sched(&[(0, 0), (0, 0)], &[0, 1])),
        Err(PlacementError::Unsupported {
            op: 0,
            device: 0,
            kind: DeviceKind::Cpu
        })
    ));
    let mut no_link = Topology::gpus(2, 1);
    no_link.links.clear();
    assert!(matches!(
        simulate(&g, &no_link, &sched(&[(0, 0), (1, 0)], &[0, 1])),
        Err(PlacementError::NoLink { src: 0, dst: 1 })
    ));
    assert!(matches!(
        Topology::default().view(),
        Err(PlacementError::InvalidTopology(_))
    ));
}

#[test]
fn json_round_trips() {
    let mut g = g_of(&[1., 2.], &[(0, 1, 3.)]);
    g.ops[0].cost_us.insert(DeviceKind::Cpu, 7.);
    g.concurrency.model = SlowdownModel::Linear { per_extra: 0.25 };
    let back = CostGraph::from_json(&g.to_json()).unwrap();
    assert_eq!(back, g);
    let t = spillway_placement::generate::cpu_gpu_topology(4, 2, 2, 10., 50.);
    let tj = serde_json::to_string(&t).unwrap();
    assert_eq!(serde_json::from_str::<Topology>(&tj).unwrap(), t);
    let s = sched(&[(0, 0), (1, 0)], &[0, 1]);
    assert_eq!(serde_json::from_str::<Schedule>(&s.to_json()).unwrap(), s);
    assert!(
        CostGraph::from_json(r#"{"ops":[{"cost_us":{"gpu":1}}],"edges":[{"src":0,"dst":0}]}"#)
            .is_err()
    );
}

#[test]
fn lower_bound_is_critical_path_or_spread_work() {
    let chain = g_of(&[3., 4., 5.], &[(0, 1, 9.), (1, 2, 9.)]);
    let t = Topology::gpus(2, 1);
    assert_eq!(lower_bound(&chain, &chain.dag().unwrap(), &t), 12.);
    let wide = g_of(&[4., 4., 4., 4.], &[]);
    assert_eq!(lower_bound(&wide, &wide.dag().unwrap(), &t), 8.);
    let mut fast = Topology::gpus(2, 1);
    fast.devices[1].speed = 3.0;
    assert_eq!(lower_bound(&wide, &wide.dag().unwrap(), &fast), 4.0);
}

/// Head–body–tail window, by hand: a(2) → {b, c, d}(4 each) → e(2) on 2 GPUs, free copies.
/// Critical path 2 + 4 + 2 = 8; work 16 / 2 = 8. The set {head ≥ 2} = {b, c, d, e} cannot start
/// before 2 and holds 14 µs of work: 2 + 0 + 14 / 2 = 9 (likewise {tail ≥ 2} = {a, b, c, d}:
/// 0 + 2 + 7 = 9). Heads that count ancestors' work do better: e cannot start before its
/// ancestors b, c, d (head 2, 12 µs of work) are done, 2 + 12 / 2 = 8, so 8 + 2 = 10. The
/// optimum is 12 (a; b ∥ c; d; e), so 10 is below it.
#[test]
fn lower_bound_uses_heads_and_tails() {
    let g = g_of(
        &[2., 4., 4., 4., 2.],
        &[
            (0, 1, 0.),
            (0, 2, 0.),
            (0, 3, 0.),
            (1, 4, 0.),
            (2, 4, 0.),
            (3, 4, 0.),
        ],
    );
    let t = Topology::gpus(2, 1);
    assert_eq!(lower_bound(&g, &g.dag().unwrap(), &t), 10.);
}

/// Three independent operators on one GPU with 2 streams, launch order a (10), b (1), c (1), no
/// slowdown: the dispatcher starts a and b at 0 and c on b's stream when b ends, 10 in all.
#[test]
fn dispatch_fills_the_stream_that_frees_first() {
    let g = g_of(&[10., 1., 1.], &[]);
    let t = Topology::gpus(1, 2);
    let c = policy::common::Ctx::new(&g, &t).unwrap();
    let (m, s) = c
        .dispatch_on_devices("test", &[0, 0, 0], &[0, 1, 2])
        .unwrap();
    assert_eq!(m, 10.);
    assert_ne!(s.ops[0].stream, s.ops[1].stream);
    assert_eq!(s.ops[1].stream, s.ops[2].stream);
    assert_eq!(s.sequence(), vec![0, 1, 2]);
}

/// The dispatcher starts the earliest launch position among the operators whose inputs have
/// arrived, not the next in line: with one stream and launch order b, x, a where b waits for
/// a copy, x and a run first.
#[test]
fn dispatch_skips_operators_whose_inputs_have_not_arrived() {
    // p (gpu 0) → b (gpu 1) over a 100 µs copy; x and a on gpu 1 are free to start.
    let g = g_of(&[1., 5., 5., 5.], &[(0, 1, 1e6)]);
    let mut t = Topology::gpus(2, 1);
    for l in &mut t.links {
        (l.bandwidth, l.latency_us) = (1e4, 0.);
    }
    let c = policy::common::Ctx::new(&g, &t).unwrap();
    let (m, s) = c
        .dispatch_on_devices("test", &[0, 1, 1, 1], &[0, 1, 2, 3])
        .unwrap();
    let r = simulate(&g, &t, &s).unwrap();
    assert_eq!(r.ops[2].start, 0.);
    assert_eq!(r.ops[3].start, 5.);
    assert_eq!(r.ops[1].start, 101.);
    assert_eq!(m, 106.);
    assert_eq!(r.makespan, m);
}

/// The schedule the dispatcher returns replays in the simulator to the makespan it reported,
/// on random HIOS graphs with slowdowns and copies, with random devices and launch orders.
#[test]
fn dispatched_schedules_replay_exactly() {
    use spillway_placement::generate::{LayeredParams, TransferRule, hios_layered, hios_topology};
    for seed in 0..6 {
        let rule = [TransferRule::Min, TransferRule::Max][seed as usize % 2];
        let g = hios_layered(
            &LayeredParams {
                ops: 60,
                layers: 8,
                edges: 120,
                rule,
                ..LayeredParams::default()
            },
            seed,
        );
        let t = hios_topology(3, 1 + seed as usize % 3);
        let c = policy::common::Ctx::new(&g, &t).unwrap();
        let mut rng = spillway_placement::rng::Rng::new(seed);
        let device: Vec<usize> = (0..g.ops.len()).map(|_| rng.below(3)).collect();
        let prio: Vec<f64> = (0..g.ops.len()).map(|_| rng.f64()).collect();
        let seq = c.priority_order(&prio);
        let (m, s) = c.dispatch_on_devices("test", &device, &seq).unwrap();
        let r = simulate(&g, &t, &s).unwrap();
        assert!(
            (r.makespan - m).abs() <= 1e-9 * m,
            "seed {seed}: {} vs {m}",
            r.makespan
        );
        assert!(r.makespan >= r.lower_bound);
    }
}
