//! One inference across several devices: every placement policy, on the CPU plus three Virtual
//! devices (CPU-backed, own memory, simulated copy cost), computes what the sequential CPU
//! engine computes; concurrent runs agree; failures name the node and leave the session usable.

use std::time::Duration;

use spillway::{CopyCost, Devices, Placement, RunOptions, Session, Tensor};
use spillway_tests::{onnx_test_data, seeded_f32, workspace_root};

/// Policies whose schedules the executor must honour. `Ios` and `Milp` are exponential/slow
/// and refuse big graphs; they are exercised on the small model only.
const POLICIES: &[Placement] = &[
    Placement::Sequential,
    Placement::Greedy,
    Placement::Heft,
    Placement::Lios,
    Placement::Opara,
    Placement::HiosLp,
    Placement::HiosMr,
    Placement::Qd,
    Placement::Sd,
    Placement::CommSd,
    Placement::Nimble,
    Placement::SortingHat,
    Placement::Auto,
];

fn devices() -> Devices {
    let link = CopyCost {
        latency: Duration::from_micros(20),
        bandwidth_bytes_per_s: 4e9,
    };
    Devices::cpu()
        .with_cpu_lanes(1)
        .with_virtual(2, link)
        .with_virtual(1, link)
        .with_virtual(1, link)
        .with_speed(2.0)
}

fn node_names(session: &Session) -> Vec<String> {
    session
        .graph()
        .nodes
        .iter()
        .map(|n| n.name.clone())
        .collect()
}

fn inputs(session: &Session, seed: u64) -> Vec<(String, Tensor)> {
    session
        .inputs()
        .iter()
        .map(|i| {
            let shape: Vec<usize> = i
                .shape
                .as_ref()
                .unwrap()
                .iter()
                .map(|d| d.fixed().unwrap_or(1))
                .collect();
            (i.name.clone(), seeded_f32(&shape, seed))
        })
        .collect()
}

fn models() -> Vec<std::path::PathBuf> {
    let mut v = vec![workspace_root().join("models/small/inception_block.onnx")];
    for name in [
        "light_squeezenet",
        "light_inception_v1",
        "light_shufflenet",
        "light_densenet121",
    ] {
        v.push(onnx_test_data().join(format!("light/{name}.onnx")));
    }
    v
}

#[test]
fn every_policy_matches_the_sequential_cpu_engine() {
    for model in models() {
        let reference = Session::builder().commit_from_file(&model).unwrap();
        let input = inputs(&reference, 7);
        let expected = reference.run(input.clone()).unwrap();
        for &policy in POLICIES {
            let session = Session::builder()
                .with_devices(devices())
                .with_placement(policy)
                .commit_from_file(&model)
                .unwrap_or_else(|e| panic!("{}: {policy:?}: {e}", model.display()));
            let plan = session.execution_plan().expect("a multi-device plan");
            let report = session.placement_report().unwrap();
            let got = session
                .run(input.clone())
                .unwrap_or_else(|e| panic!("{}: {policy:?}: {e}", model.display()));
            for i in 0..expected.len() {
                // Kernels are deterministic and see the same inputs on every device: bitwise equal.
                assert_eq!(
                    got[i],
                    expected[i],
                    "{}: {policy:?}: output {i}",
                    model.display()
                );
            }
            assert!(report.predicted_makespan_us > 0.0);
            let devices_used: std::collections::BTreeSet<&str> =
                report.nodes.iter().map(|n| n.2.as_str()).collect();
            if devices_used.len() > 1 {
                assert!(
                    plan.copy_count() > 0,
                    "{policy:?} spans devices, so values must be copied"
                );
            }
        }
    }
}

#[test]
fn concurrent_runs_on_one_session_agree_with_the_single_thread_run() {
    let model = workspace_root().join("models/small/inception_block.onnx");
    let session = Session::builder()
        .with_devices(devices())
        .with_placement(Placement::Greedy)
        .commit_from_file(&model)
        .unwrap();
    let inputs: Vec<_> = (0..4).map(|s| inputs(&session, s + 1)).collect();
    let expected: Vec<Tensor> = inputs
        .iter()
        .map(|i| session.run(i.clone()).unwrap()[0].clone())
        .collect();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let (session, inputs, expected) = (&session, &inputs, &expected);
            scope.spawn(move || {
                for r in 0..200 {
                    let k = (t + r) % 4;
                    let got = session.run(inputs[k].clone()).unwrap();
                    assert_eq!(got[0], expected[k], "thread {t}, run {r}");
                }
            });
        }
    });
}

#[test]
fn injected_failures_name_the_node_and_the_next_run_succeeds() {
    let model = workspace_root().join("models/small/inception_block.onnx");
    let session = Session::builder()
        .with_devices(devices())
        .with_placement(Placement::Heft)
        .commit_from_file(&model)
        .unwrap();
    let input = inputs(&session, 3);
    let expected = session.run(input.clone()).unwrap()[0].clone();
    let nodes = node_names(&session);
    let mut state = 99u64;
    for _ in 0..1000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let victim = (state % nodes.len() as u64) as usize;
        let options = RunOptions::default().with_injected_failure_at(Some(victim));
        match session.run_with_options(input.clone(), &options) {
            Err(spillway::Error::Kernel { node, .. }) => assert_eq!(node, nodes[victim]),
            other => panic!(
                "expected the injected failure at {}, got {other:?}",
                nodes[victim]
            ),
        }
    }
    assert_eq!(session.run(input).unwrap()[0], expected);
}

#[test]
fn one_lane_sessions_trace_every_node_and_name_injected_failures() {
    let model = workspace_root().join("models/small/inception_block.onnx");
    let session = Session::builder().commit_from_file(&model).unwrap();
    assert!(session.execution_plan().is_none(), "a one-lane CPU session");
    let input = inputs(&session, 4);
    let nodes = node_names(&session);
    let (outputs, report) = session
        .run_with_options(input.clone(), &RunOptions::default().with_trace(true))
        .unwrap();
    let traced: Vec<String> = report.trace.unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(traced, nodes, "one event per node, in the order they ran");
    let expected = outputs[0].clone();
    for (victim, name) in nodes.iter().enumerate() {
        let options = RunOptions::default().with_injected_failure_at(Some(victim));
        match session.run_with_options(input.clone(), &options) {
            Err(spillway::Error::Kernel { node, .. }) => assert_eq!(&node, name),
            other => panic!("expected the injected failure at {name}, got {other:?}"),
        }
        assert_eq!(session.run(input.clone()).unwrap()[0], expected);
    }
}

#[test]
fn traces_record_every_task_and_the_arena_plan_is_proven() {
    let model = workspace_root().join("models/small/inception_block.onnx");
    let session = Session::builder()
        .with_devices(devices())
        .with_placement(Placement::Heft)
        .commit_from_file(&model)
        .unwrap();
    let (_, report) = session
        .run_with_options(inputs(&session, 5), &RunOptions::default().with_trace(true))
        .unwrap();
    let trace = report.trace.unwrap();
    let plan = session.execution_plan().unwrap();
    assert_eq!(trace.len(), plan.tasks.len(), "one trace event per task");
    let names: Vec<String> = session
        .devices()
        .specs()
        .iter()
        .map(|s| s.device.to_string())
        .collect();
    let json = spillway::exec::chrome_trace_json(&trace, &names);
    assert!(json.contains("\"traceEvents\""));

    // Bind the symbolic batch to 1 so every intermediate has a size.
    let mut graph = session.graph().clone();
    let input = graph.inputs[0];
    graph.values[input.index()].shape = Some(
        [1, 3, 64, 64]
            .iter()
            .map(|&d| spillway::graph::Dim::Fixed(d))
            .collect(),
    );
    spillway::graph::shape_inference::infer(&mut graph);
    let size = |slot: usize| {
        let info = graph.value(plan.slots[slot].value);
        Some(info.fixed_shape()?.iter().product::<usize>() * info.dtype?.size_of())
    };
    let arenas = spillway::plan::hb_memory::plan(plan, names.len(), size);
    spillway::plan::hb_memory::verify(plan, &arenas).unwrap();
    let planned: usize = arenas.iter().map(|a| a.peak_bytes).sum();
    let naive: usize = arenas.iter().map(|a| a.naive_bytes).sum();
    assert!(planned > 0 && planned <= naive);
}

#[test]
fn unavailable_devices_fail_unless_fallback_is_allowed() {
    let model = workspace_root().join("models/small/inception_block.onnx");
    let err = Session::builder()
        .with_devices(Devices::cpu().with_cuda(0, 4))
        .commit_from_file(&model)
        .unwrap_err();
    assert!(
        matches!(err, spillway::Error::DeviceUnavailable { .. }),
        "{err}"
    );
    let session = Session::builder()
        .with_devices(Devices::cpu().with_cuda(0, 4).allow_fallback(true))
        .commit_from_file(&model)
        .unwrap();
    assert_eq!(session.devices().specs().len(), 1);
}

/// `Auto` on CPU lanes alone weighs the lanes against one lane with every core (a timing
/// decision, so the test checks what follows from either outcome): the report names the
/// choice and matches the engine that runs, and the outputs are the one-lane session's.
#[test]
fn auto_on_cpu_lanes_reports_the_engine_it_chose() {
    let model = workspace_root().join("models/small/inception_block.onnx");
    let reference = Session::builder().commit_from_file(&model).unwrap();
    let session = Session::builder()
        .with_devices(Devices::cpu().with_cpu_lanes(2))
        .with_placement(Placement::Auto)
        .with_profile_cache(false)
        .commit_from_file(&model)
        .unwrap();
    let report = session.placement_report().expect("Auto reports its choice");
    let lanes_used: std::collections::BTreeSet<usize> = report.nodes.iter().map(|n| n.3).collect();
    eprintln!("Auto chose: {}", report.policy);
    if report.policy.starts_with("Auto: one lane") {
        assert!(session.execution_plan().is_none(), "{}", report.policy);
        assert_eq!(lanes_used.len(), 1, "one lane runs every node");
        assert!(report.policy.contains("2 lanes"), "{}", report.policy);
    } else {
        assert!(session.execution_plan().is_some(), "{}", report.policy);
    }
    assert_eq!(report.nodes.len(), session.graph().nodes.len());
    assert!(report.predicted_makespan_us >= report.lower_bound_us - 1e-6);
    let input = inputs(&reference, 9);
    assert_eq!(
        session.run(input.clone()).unwrap()[0],
        reference.run(input).unwrap()[0]
    );
}
