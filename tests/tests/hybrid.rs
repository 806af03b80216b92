//! Splitting a graph between the host and a device (what a CUDA session does with a detection
//! model), checked without a GPU: the graph is specialized to its input shapes, the nodes with
//! data-dependent shapes stay on the host, and the segments, device ones run by the host
//! stand-in, compute on another input of those shapes what a CPU session computes.

use spillway::graph::Graph;
use spillway::graph::passes::{Level, optimize};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use spillway::hybrid::{
    FixedValues, HostSegment, SegmentCompiler, SegmentWork, ShapeStats, Side, compile_split,
    host_stand_in, input_shapes, partition, shapes_follow_input_shapes, specialize,
};
use spillway::{Error, OptimizationLevel, Session, Tensor, Value};
use spillway_tests::fixtures::count_model;
use spillway_tests::fixtures::split_model as model;
use spillway_tests::{relative_l2, seeded_f32, workspace_root};

fn inputs(seed: u64, idx: [i64; 2]) -> Vec<Value> {
    vec![
        Value::Tensor(seeded_f32(&[1, 4, 6, 6], seed)),
        Value::Tensor(Tensor::from_shape_vec(&[2], idx.to_vec()).unwrap()),
    ]
}

fn loaded(bytes: &[u8]) -> Graph {
    let mut graph = spillway::onnx::load_bytes(bytes::Bytes::copy_from_slice(bytes), None).unwrap();
    optimize(&mut graph, Level::Basic).unwrap();
    graph
}

fn cpu_outputs(bytes: &[u8], names: &[&str], inputs: &[Value]) -> Vec<Tensor> {
    let session = Session::builder()
        .with_optimization(OptimizationLevel::Basic)
        .commit_from_memory(bytes)
        .unwrap();
    let outputs = session
        .run_values(
            names
                .iter()
                .map(|n| n.to_string())
                .zip(inputs.iter().cloned()),
        )
        .unwrap();
    (0..outputs.len()).map(|i| outputs[i].clone()).collect()
}

/// Every node with fixed shapes on the device, the rest on the host.
fn fixed_on_device(graph: &Graph, fixed: &FixedValues) -> Vec<Side> {
    graph
        .nodes
        .iter()
        .map(|n| {
            if fixed.node_has_fixed_shapes(n) {
                Side::Device
            } else {
                Side::Host
            }
        })
        .collect()
}

/// What a CUDA session's GPU first does: every node on the device whose shapes are fixed or
/// follow from its input shapes, except NonZero (no device kernel) and shape arithmetic.
fn gpu_first(graph: &Graph, fixed: &FixedValues) -> Vec<Side> {
    graph
        .nodes
        .iter()
        .map(|n| {
            let device = n.op_type != "NonZero"
                && !fixed.computes_shape_arithmetic(n)
                && (fixed.node_has_fixed_shapes(n) || shapes_follow_input_shapes(graph, fixed, n));
            if device { Side::Device } else { Side::Host }
        })
        .collect()
}

/// The op types of the nodes `sides` puts on the host, in graph order.
fn host_ops<'g>(graph: &'g Graph, sides: &[Side]) -> Vec<&'g str> {
    graph
        .nodes
        .iter()
        .zip(sides)
        .filter(|(_, s)| **s == Side::Host)
        .map(|(n, _)| n.op_type.as_str())
        .collect()
}

fn tensors(values: &[Value]) -> Vec<&Tensor> {
    values.iter().map(|v| v.as_tensor().unwrap()).collect()
}

#[test]
fn shape_arithmetic_folds_and_only_what_follows_nonzero_is_left_to_the_host() {
    let mut graph = loaded(&model());
    let (_, fixed) = specialize(&mut graph, &inputs(1, [0, 5])).unwrap();
    let ops: Vec<(&str, bool)> = graph
        .nodes
        .iter()
        .map(|n| (n.op_type.as_str(), fixed.node_has_fixed_shapes(n)))
        .collect();
    assert_eq!(
        ops,
        [
            ("Conv", true),
            ("Relu", true),
            ("Reshape", true),
            ("Gather", true),
            ("Greater", true),
            ("NonZero", false),
            ("Transpose", false),
            ("Cast", false),
            ("ReduceSum", false),
            ("Add", false),
            ("Relu", true),
            ("Mul", true),
        ]
    );
    assert_eq!(FixedValues::of(&graph), fixed);
}

#[test]
fn specializing_gives_every_value_a_node_touches_constants_included() {
    // A device kernel is built from the type and shape of every value its node reads and
    // writes: the weights as much as the activations.
    let path = workspace_root().join("models/small/inception_block.onnx");
    let mut graph = loaded(&std::fs::read(path).unwrap());
    let input = vec![Value::Tensor(seeded_f32(&[1, 3, 64, 64], 1))];
    let (values, fixed) = specialize(&mut graph, &input).unwrap();
    for node in &graph.nodes {
        assert!(fixed.node_has_fixed_shapes(node), "{}", node.name);
        for v in node.present_inputs().chain(node.present_outputs()) {
            assert!(
                matches!(values[v.index()], Some(Value::Tensor(_))),
                "{}: value '{}' is missing",
                node.name,
                graph.name(v)
            );
        }
    }
    assert!(graph.nodes.iter().any(|n| n.op_type == "Conv"));
}

#[test]
fn segments_on_both_sides_compute_what_the_cpu_computes_on_other_data() {
    let bytes = model();
    let mut graph = loaded(&bytes);
    let (_, fixed) = specialize(&mut graph, &inputs(1, [0, 5])).unwrap();
    let gpu_first = fixed_on_device(&graph, &fixed);
    // Also a split with fixed-shape nodes overflowed to the host: more segments, both ways.
    let overflow: Vec<Side> = gpu_first
        .iter()
        .enumerate()
        .map(|(i, &s)| if i % 3 == 1 { Side::Host } else { s })
        .collect();
    for sides in [gpu_first, overflow] {
        let segments = partition(&graph, &sides);
        assert!(segments.iter().any(|s| s.side == Side::Device));
        assert!(segments.iter().any(|s| s.side == Side::Host));
        let plan = host_stand_in(&graph, &sides, input_shapes(&inputs(1, [0, 5])))
            .unwrap()
            .plan;
        for (seed, idx) in [(2, [3, 7]), (3, [287, 0]), (4, [1, 1])] {
            let x = inputs(seed, idx);
            let want = cpu_outputs(&bytes, &["x", "idx"], &x);
            let got = plan.run(x).unwrap();
            for (w, g) in want.iter().zip(tensors(&got)) {
                assert_eq!(w.shape(), g.shape());
                let err = relative_l2(w, g).unwrap();
                assert!(err <= 1e-6, "relative L2 error {err}");
            }
        }
    }
}

#[test]
fn a_wrong_shape_and_a_failing_segment_are_errors_and_the_plan_keeps_working() {
    let bytes = model();
    let mut graph = loaded(&bytes);
    let (_, fixed) = specialize(&mut graph, &inputs(1, [0, 5])).unwrap();
    let sides = fixed_on_device(&graph, &fixed);
    let plan = host_stand_in(&graph, &sides, input_shapes(&inputs(1, [0, 5])))
        .unwrap()
        .plan;
    let wrong = vec![
        Value::Tensor(seeded_f32(&[1, 4, 7, 7], 5)),
        Value::Tensor(Tensor::from_shape_vec(&[2], vec![0i64, 1]).unwrap()),
    ];
    match plan.run(wrong) {
        Err(Error::InputShape { name, got, .. }) => {
            assert_eq!(name, "x");
            assert_eq!(got, [1, 4, 7, 7]);
        }
        other => panic!("expected an input shape error, got {other:?}"),
    }
    // Index 288 is past the 288 values of `flat`: the Gather fails inside a segment.
    match plan.run(inputs(6, [0, 288])) {
        Err(Error::Kernel { op_type, .. }) => assert_eq!(op_type, "Gather"),
        other => panic!("expected a Gather failure, got {other:?}"),
    }
    let x = inputs(7, [10, 20]);
    let want = cpu_outputs(&bytes, &["x", "idx"], &x);
    let got = plan.run(x).unwrap();
    for (w, g) in want.iter().zip(tensors(&got)) {
        assert!(relative_l2(w, g).unwrap() <= 1e-6);
    }
}

/// A stand-in for a device compiler: compiles a host segment, after checking that it was given
/// the type and shape of every value the segment's nodes touch (what a device plan is built
/// from). Counts its compilations; refuses every shape met during runs when `refuse` is set.
#[derive(Debug)]
struct StandInCompiler {
    compiles: Arc<AtomicUsize>,
    refuse: bool,
}

impl SegmentCompiler for StandInCompiler {
    fn compile(
        &self,
        graph: &Graph,
        _inputs: &[Value],
        values: &[Option<Value>],
        measure: bool,
    ) -> spillway::Result<Box<dyn SegmentWork>> {
        for node in &graph.nodes {
            for v in node.present_inputs().chain(node.present_outputs()) {
                let known = graph.constants.contains_key(&v)
                    || matches!(values.get(v.index()), Some(Some(Value::Tensor(_))));
                if !known {
                    return Err(Error::Internal(format!("no shape for '{}'", graph.name(v))));
                }
            }
        }
        if self.refuse && !measure {
            return Err(Error::Internal("refused".into()));
        }
        self.compiles.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(HostSegment::compile(graph)?))
    }
}

#[test]
fn segments_after_a_data_dependent_shape_run_on_the_device_once_their_shape_comes_back() {
    let bytes = model();
    let mut graph = loaded(&bytes);
    let first = inputs(1, [0, 5]);
    let (values, fixed) = specialize(&mut graph, &first).unwrap();
    let sides = gpu_first(&graph, &fixed);
    // Everything but NonZero: Transpose, Cast, ReduceSum and Add follow its shape.
    let on_host = host_ops(&graph, &sides);
    assert_eq!(on_host, ["NonZero"]);
    for refuse in [false, true] {
        let compiles = Arc::new(AtomicUsize::new(0));
        let compiler = || -> Box<dyn SegmentCompiler> {
            Box::new(StandInCompiler {
                compiles: compiles.clone(),
                refuse,
            })
        };
        let plan = compile_split(&graph, &sides, &first, &values, &compiler).unwrap();
        let device_segments = plan
            .segments()
            .iter()
            .filter(|s| s.side == Side::Device)
            .count();
        assert_eq!(device_segments, 2);
        assert_eq!(compiles.load(Ordering::SeqCst), device_segments);
        // Other data of the same input shapes: NonZero finds another count of elements.
        let other = inputs(2, [3, 7]);
        let want = cpu_outputs(&bytes, &["x", "idx"], &other);
        for _ in 0..3 {
            let got = plan.run(other.clone()).unwrap();
            for (w, g) in want.iter().zip(tensors(&got)) {
                assert_eq!(w.shape(), g.shape());
                assert!(relative_l2(w, g).unwrap() <= 1e-6);
            }
        }
        let stats = plan.shape_stats();
        let want_stats = if refuse {
            // Seen once, refused on its return, then on the host for good.
            ShapeStats {
                device_runs: 3,
                host_runs: 3,
                compiled: 0,
                refused: 1,
            }
        } else {
            // The fixed segment 3 times; the one after NonZero: host, host and compile, device.
            ShapeStats {
                device_runs: 4,
                host_runs: 2,
                compiled: 1,
                refused: 0,
            }
        };
        assert_eq!(stats, want_stats, "refuse: {refuse}");
        let compiled_in_runs = usize::from(!refuse);
        assert_eq!(
            compiles.load(Ordering::SeqCst),
            device_segments + compiled_in_runs
        );
        // The specializing shapes still run on their plan.
        let want = cpu_outputs(&bytes, &["x", "idx"], &first);
        let got = plan.run(first.clone()).unwrap();
        for (w, g) in want.iter().zip(tensors(&got)) {
            assert!(relative_l2(w, g).unwrap() <= 1e-6);
        }
        assert_eq!(plan.shape_stats().device_runs, want_stats.device_runs + 2);
    }
}

/// A stand-in for the GPU compiler, which builds `ConstantOfShape` and `Expand` only for a
/// shape it is given as a constant: refuses a segment where one reads a computed shape.
#[derive(Debug)]
struct ConstantShapeCompiler {
    compiles: Arc<AtomicUsize>,
}

impl SegmentCompiler for ConstantShapeCompiler {
    fn compile(
        &self,
        graph: &Graph,
        _inputs: &[Value],
        _values: &[Option<Value>],
        _measure: bool,
    ) -> spillway::Result<Box<dyn SegmentWork>> {
        for node in &graph.nodes {
            let shape = match node.op_type.as_str() {
                "ConstantOfShape" => node.inputs[0],
                "Expand" => node.inputs[1],
                _ => continue,
            };
            if !shape.is_some_and(|v| graph.constants.contains_key(&v)) {
                return Err(Error::Internal(format!("{}: a computed shape", node.name)));
            }
        }
        self.compiles.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(HostSegment::compile(graph)?))
    }
}

#[test]
fn shape_arithmetic_after_a_data_dependent_count_runs_on_the_host_and_keys_device_plans() {
    let bytes = count_model();
    let mut graph = loaded(&bytes);
    let x = |seed: u64| vec![Value::Tensor(seeded_f32(&[6, 3], seed))];
    let first = x(1);
    let (values, fixed) = specialize(&mut graph, &first).unwrap();
    let sides = gpu_first(&graph, &fixed);
    // The count's shape arithmetic stays on the host; ConstantOfShape and Expand, whose
    // shape it gives, go to the device with the gathers and the arithmetic on the data.
    let on_host = host_ops(&graph, &sides);
    assert_eq!(
        on_host,
        ["NonZero", "Shape", "Gather", "Unsqueeze", "Concat"]
    );
    let compiles = Arc::new(AtomicUsize::new(0));
    let compiler = || -> Box<dyn SegmentCompiler> {
        Box::new(ConstantShapeCompiler {
            compiles: compiles.clone(),
        })
    };
    let plan = compile_split(&graph, &sides, &first, &values, &compiler).unwrap();
    let built = compiles.load(Ordering::SeqCst);
    assert!(built >= 1);
    let counts: Vec<usize> = (2..5u64)
        .map(|seed| {
            let input = x(seed);
            let want = cpu_outputs(&bytes, &["x"], &input);
            // First sight on the host, compiled on its return, then on the device.
            for _ in 0..3 {
                let got = plan.run(input.clone()).unwrap();
                assert_eq!(want[0].shape(), tensors(&got)[0].shape());
                assert!(relative_l2(&want[0], tensors(&got)[0]).unwrap() <= 1e-6);
            }
            want[0].shape()[0]
        })
        .collect();
    let mut distinct = counts.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() >= 2, "the seeds keep {counts:?} elements");
    let stats = plan.shape_stats();
    assert_eq!(stats.refused, 0, "{stats:?}");
    assert!(stats.compiled >= 1 && stats.device_runs >= 3, "{stats:?}");
    assert_eq!(compiles.load(Ordering::SeqCst), built + stats.compiled);
}

/// The zoo's detectors (exported by `models/export.sh`, not committed): specialized to one
/// image size and split GPU-first, the host stand-in matches a CPU session on other images.
#[test]
#[ignore = "needs the exported detection models (models/export.sh), which are not committed"]
fn zoo_detectors_split_gpu_first_match_the_cpu() {
    for name in [
        "ssdlite320_mobilenet_v3_large",
        "fasterrcnn_mobilenet_v3_large_320_fpn",
    ] {
        let path = workspace_root().join(format!("models/zoo/{name}.onnx"));
        let bytes = std::fs::read(&path).unwrap();
        let mut graph = loaded(&bytes);
        let shape = [3, 240, 320];
        let image = |seed| vec![Value::Tensor(seeded_f32(&shape, seed))];
        let (_, fixed) = specialize(&mut graph, &image(1)).unwrap();
        let sides = fixed_on_device(&graph, &fixed);
        let segments = partition(&graph, &sides);
        let on = |side| segments.iter().filter(|s| s.side == side).count();
        let device_nodes = sides.iter().filter(|&&s| s == Side::Device).count();
        println!(
            "{name}: {} nodes, {device_nodes} fixed-shape, {} device and {} host segments",
            graph.nodes.len(),
            on(Side::Device),
            on(Side::Host)
        );
        let stand_in = host_stand_in(&graph, &sides, input_shapes(&image(1))).unwrap();
        let kept = stand_in.plan.kept_values();
        for seed in [2, 3] {
            let want = cpu_outputs(&bytes, &["image"], &image(seed));
            let got = stand_in.plan.run(image(seed)).unwrap();
            for (w, g) in want.iter().zip(tensors(&got)) {
                assert_eq!(w.shape(), g.shape(), "{name}");
                let err = relative_l2(w, g).unwrap();
                assert!(err <= 1e-5, "{name}: relative L2 error {err}");
            }
        }
        // The backbone's feature maps pass from device segment to device segment.
        assert!(kept > 0, "{name}: no value stays on the device");
        assert!(stand_in.read_on_device() >= 2 * kept, "{name}");
        assert_eq!(stand_in.fetched(), 0, "{name}");
    }
}

#[test]
fn values_only_device_segments_read_stay_on_the_device_under_concurrent_runs() {
    let bytes = model();
    let mut graph = loaded(&bytes);
    specialize(&mut graph, &inputs(1, [0, 5])).unwrap();
    // NonZero to ReduceSum on the host, the rest on the device: `picked` (Gather) passes
    // from the first device segment to the last, over the host segment.
    let sides: Vec<Side> = (graph.nodes.iter())
        .map(|n| match n.op_type.as_str() {
            "NonZero" | "Transpose" | "Cast" | "ReduceSum" => Side::Host,
            _ => Side::Device,
        })
        .collect();
    let stand_in = host_stand_in(&graph, &sides, input_shapes(&inputs(1, [0, 5]))).unwrap();
    let kept = stand_in.plan.kept_values();
    assert!(kept > 0, "the split passes no value from device to device");
    // Runs from 4 threads at once, each on its own data: a device segment's next run
    // overwrites what it kept, so a reader that copied it after another run's writer would
    // compute from the other run's data. Every fourth run fails in the first device segment
    // (an index past the end), which must give up its reads rather than block the next run.
    let runs = 12;
    let (sender, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let failures = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let (stand_in, bytes, failures) = (&stand_in, &bytes, &failures);
                scope.spawn(move || {
                    for run in 0..runs as u64 {
                        if run % 4 == 3 {
                            match stand_in.plan.run(inputs(run, [0, 288])) {
                                Err(Error::Kernel { op_type, .. }) => assert_eq!(op_type, "Gather"),
                                other => panic!("expected a Gather failure, got {other:?}"),
                            }
                            failures.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        let x = inputs(10 + thread * 100 + run, [(run % 7) as i64, 9]);
                        let want = cpu_outputs(bytes, &["x", "idx"], &x);
                        let got = stand_in.plan.run(x).unwrap();
                        for (w, g) in want.iter().zip(tensors(&got)) {
                            assert_eq!(w.shape(), g.shape());
                            let err = relative_l2(w, g).unwrap();
                            assert!(err <= 1e-6, "thread {thread} run {run}: relative L2 {err}");
                        }
                    }
                });
            }
        });
        let good = 4 * runs - failures.load(Ordering::Relaxed);
        let _ = sender.send((good, stand_in.read_on_device(), stand_in.fetched()));
    });
    // A hang (a run waiting for reads that a failed run never gives up) fails here.
    let (good, read_on_device, fetched) = finished
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the runs finished within 120 s without a failed assertion");
    assert_eq!(read_on_device, good * kept);
    assert_eq!(fetched, 0);
}
