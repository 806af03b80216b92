//! Invalid models and inputs that once gave a wrong answer, a panic or an abort (issue 80):
//! each now gets a typed error at load or at run time, and the session stays usable.

use spillway::{Error, OptimizationLevel, RunLimits, Session, Tensor};
use spillway_kernels::KernelError;
use spillway_tests::build::{Attr, ModelBuilder};

const LEVELS: [OptimizationLevel; 3] = [
    OptimizationLevel::Disabled,
    OptimizationLevel::Basic,
    OptimizationLevel::All,
];

fn load(bytes: &[u8], level: OptimizationLevel) -> Result<Session, Error> {
    Session::builder()
        .with_optimization(level)
        .commit_from_memory(bytes)
}

/// The model `build` makes on a fresh builder (weights seeded 1), at `opset`.
fn model(opset: i64, build: impl FnOnce(&mut ModelBuilder)) -> Vec<u8> {
    let mut m = ModelBuilder::new(1);
    build(&mut m);
    m.to_bytes(opset)
}

/// A session of `bytes` (every optimization) under `limits`.
fn limited(bytes: &[u8], limits: RunLimits) -> Session {
    Session::builder()
        .with_run_limits(limits)
        .commit_from_memory(bytes)
        .unwrap()
}

/// Loading `bytes` at `level` fails with `InvalidNode` whose rule says `expected`.
fn assert_rule(bytes: &[u8], level: OptimizationLevel, expected: &str) {
    match load(bytes, level) {
        Err(Error::InvalidNode { rule, .. }) => {
            assert!(rule.contains(expected), "'{rule}' should say '{expected}'")
        }
        other => panic!("{level:?}: expected InvalidNode ({expected}), got {other:?}"),
    }
}

fn f32_tensor(shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_shape_vec(shape, (0..n).map(|i| (i % 7) as f32 * 0.25).collect()).unwrap()
}

/// An error of any kind but a caught panic (a bug that would have crossed the API).
fn assert_typed<T: std::fmt::Debug>(result: Result<T, Error>, what: &str) -> Error {
    match result {
        Err(Error::Panic { context, message }) => panic!("{what}: {context} panicked: {message}"),
        Err(e) => e,
        Ok(v) => panic!("{what}: expected an error, got {v:?}"),
    }
}

#[test]
fn conv_whose_image_and_weights_disagree_on_channels_is_rejected_at_every_level() {
    // 16 channels in, weights for 8: the blocked layout used to read the first 8 and answer.
    let mut m = ModelBuilder::new(3);
    m.input("x", &[1, 16, 8, 8])
        .weight("w", &[32, 8, 3, 3], 0.1)
        .node(
            "Conv",
            &["x", "w"],
            &["y"],
            &[("pads", Attr::Ints(vec![1; 4]))],
        )
        .output("y");
    for level in LEVELS {
        match load(&m.to_bytes(17), level) {
            Err(Error::InvalidNode {
                node,
                op_type,
                rule,
            }) => {
                assert_eq!((node.as_str(), op_type.as_str()), ("Conv_0", "Conv"));
                assert!(rule.contains("16 channels"), "{rule}");
            }
            other => panic!("{level:?}: expected InvalidNode, got {other:?}"),
        }
    }
}

#[test]
fn grouped_conv_channels_are_checked_too() {
    let mut m = ModelBuilder::new(3);
    m.input("x", &[1, 12, 8, 8])
        .weight("w", &[8, 4, 3, 3], 0.1)
        .node("Conv", &["x", "w"], &["y"], &[("group", Attr::Int(2))])
        .output("y");
    assert_rule(
        &m.to_bytes(17),
        OptimizationLevel::All,
        "X has 12 channels, W expects 8 (4 per group × 2 groups)",
    );
}

#[test]
fn transpose_with_a_repeated_axis_is_an_error_not_a_panic() {
    let bytes = model(13, |m| {
        m.input("x", &[3, 3])
            .weight("c", &[3, 3], 1.0)
            .node(
                "Transpose",
                &["c"],
                &["t"],
                &[("perm", Attr::Ints(vec![0, 0]))],
            )
            .node("Add", &["t", "x"], &["y"], &[])
            .output("y");
    });
    for level in LEVELS {
        let outcome = load(&bytes, level).and_then(|s| s.run([("x", f32_tensor(&[3, 3]))]));
        assert_typed(outcome, "Transpose perm [0, 0]");
    }
}

#[test]
fn pad_whose_pads_do_not_match_the_rank_is_an_error_not_a_panic() {
    let bytes = model(13, |m| {
        m.input("x", &[1, 1, 4, 4])
            .ints("p", &[0, 0, 1])
            .weight("w", &[1, 1, 3, 3], 1.0)
            .node("Pad", &["x", "p"], &["xp"], &[])
            .node("Conv", &["xp", "w"], &["y"], &[])
            .output("y");
    });
    for level in LEVELS {
        let outcome = load(&bytes, level).and_then(|s| s.run([("x", f32_tensor(&[1, 1, 4, 4]))]));
        assert_typed(outcome, "Pad of 3 pads on rank 4");
    }
}

#[test]
fn a_shape_input_that_is_not_a_list_is_rejected_at_load_at_every_level() {
    // Found by the differential fuzzer: a scalar shape for Reshape, which ORT refuses at run
    // time, ran at the optimizing levels once the node's result was found unused.
    let bytes = model(13, |m| {
        m.scalar_input("s", 7)
            .node("Abs", &["s"], &["a"], &[])
            .node("Reshape", &["a", "a"], &["r"], &[])
            .node("Identity", &["r"], &["y"], &[])
            .output("y");
    });
    for level in LEVELS {
        match load(&bytes, level) {
            Err(Error::InvalidNode { op_type, rule, .. }) => {
                assert_eq!(op_type, "Reshape");
                assert!(rule.contains("input 1 must be 1-D"), "{rule}");
            }
            other => panic!("{level:?}: expected InvalidNode, got {other:?}"),
        }
    }
}

#[test]
fn int64_min_divided_by_minus_one_wraps_instead_of_panicking() {
    let bytes = model(13, |m| {
        m.typed_input("x", 7, &[1])
            .ints("a", &[i64::MIN])
            .ints("b", &[-1])
            .node("Div", &["a", "b"], &["q"], &[])
            .node("Add", &["q", "x"], &["y"], &[])
            .typed_output("y", 7, &[1]);
    });
    for level in LEVELS {
        let session = load(&bytes, level).unwrap();
        let x = Tensor::from_shape_vec(&[1], vec![0i64]).unwrap();
        let y = session.run([("x", x)]).unwrap();
        // Two's complement, as the kernel's integer division wraps (C++ would trap).
        assert_eq!(y[0].to_i64_vec().unwrap(), vec![i64::MIN], "{level:?}");
    }
}

#[test]
fn a_graph_output_no_node_produces_is_rejected_at_load() {
    let bytes = model(13, |m| {
        m.input("x", &[2])
            .node("Relu", &["x"], &["y"], &[])
            .output("y")
            .output("z");
    });
    match load(&bytes, OptimizationLevel::All) {
        Err(Error::InvalidModel(msg)) => assert!(msg.contains("'z'"), "{msg}"),
        other => panic!("expected InvalidModel, got {other:?}"),
    }
}

#[test]
fn a_directory_or_an_empty_file_is_named_as_such() {
    let dir = std::env::temp_dir().join(format!("spillway-invalid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    match Session::builder().commit_from_file(&dir) {
        Err(Error::InvalidModel(msg)) => assert!(msg.contains("not a file"), "{msg}"),
        other => panic!("a directory: expected InvalidModel, got {other:?}"),
    }
    let empty = dir.join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    match Session::builder().commit_from_file(&empty) {
        Err(Error::InvalidModel(msg)) => assert!(msg.contains("empty"), "{msg}"),
        other => panic!("an empty file: expected InvalidModel, got {other:?}"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shape_rules_found_by_the_differential_fuzzer_are_checked_at_load() {
    // Each is a model ORT refuses at load and Spillway ran (`diff_fuzz` seeds in brackets).
    let case = |opset: i64, build: &dyn Fn(&mut ModelBuilder), expected: &'static str| {
        (model(opset, build), expected)
    };
    let cases = [
        // Opset 18: `num_outputs` or the `split` input must say how to split (620, 1609).
        case(
            18,
            &|m| {
                m.input("x", &[4, 2])
                    .node("Split", &["x"], &["a", "b"], &[])
                    .output("a")
                    .output("b");
            },
            "neither the 'split' input nor the 'num_outputs'",
        ),
        // Before it, the axis must divide evenly into the outputs (612, 1119).
        case(
            13,
            &|m| {
                m.input("x", &[5, 2])
                    .node("Split", &["x"], &["a", "b"], &[])
                    .output("a")
                    .output("b");
            },
            "does not split evenly into 2 outputs",
        ),
        // ArgMin's axis out of range, even when its result is unused (862).
        case(
            13,
            &|m| {
                m.input("x", &[2, 3])
                    .node("ArgMin", &["x"], &["unused"], &[("axis", Attr::Int(2))])
                    .node("Abs", &["x"], &["y"], &[])
                    .output("y");
            },
            "axis 2 is out of range for rank 2",
        ),
        // TopK's K is a 1-element list (531).
        case(
            13,
            &|m| {
                m.input("x", &[2, 3])
                    .ints("k", &[1, 1])
                    .node("TopK", &["x", "k"], &["v", "i"], &[])
                    .output("v");
            },
            "K must be a 1-D tensor of one value",
        ),
        // Dropout's ratio is a scalar (443, 795, 2246).
        case(
            13,
            &|m| {
                m.input("x", &[2, 3])
                    .floats("r", &[2], &[0.1, 0.2])
                    .node("Dropout", &["x", "r"], &["y"], &[])
                    .output("y");
            },
            "input 1 must be a scalar",
        ),
        // Mod of floats must be fmod (C's remainder).
        case(
            13,
            &|m| {
                m.input("x", &[2])
                    .node("Mod", &["x", "x"], &["y"], &[])
                    .output("y");
            },
            "fmod must be 1",
        ),
        // InstanceNormalization's scale and bias are one value per channel.
        case(
            13,
            &|m| {
                m.input("x", &[1, 2, 3])
                    .floats("s", &[1, 2], &[1.0, 1.0])
                    .floats("b", &[2], &[0.0, 0.0])
                    .node("InstanceNormalization", &["x", "s", "b"], &["y"], &[])
                    .output("y");
            },
            "scale must be 1-D",
        ),
        // Global pooling needs N, C and at least one spatial axis.
        case(
            13,
            &|m| {
                m.input("x", &[2, 3])
                    .node("GlobalMaxPool", &["x"], &["y"], &[])
                    .output("y");
            },
            "rank 3 or more",
        ),
    ];
    for (bytes, expected) in cases {
        for level in LEVELS {
            assert_rule(&bytes, level, expected);
        }
    }
}

#[test]
fn data_the_kernels_cannot_define_is_an_error_at_run_time() {
    // Integer division by zero (ORT refuses it too: diff_fuzz seeds 550, 808, 1264), a
    // Dropout ratio outside [0, 1) (343, 1447), global pooling of an empty image (2284).
    let div = model(13, |m| {
        m.typed_input("a", 7, &[2])
            .typed_input("b", 7, &[2])
            .node("Div", &["a", "b"], &["y"], &[])
            .output("y");
    });
    let ints = |v: [i64; 2]| Tensor::from_shape_vec(&[2], v.to_vec()).unwrap();
    let session = load(&div, OptimizationLevel::All).unwrap();
    let err = assert_typed(
        session.run(vec![("a", ints([7, 8])), ("b", ints([2, 0]))]),
        "Div by 0",
    );
    assert!(err.to_string().contains("division by zero"), "{err}");
    let ok = session.run(vec![("a", ints([7, 8])), ("b", ints([2, -3]))]);
    let y = ok.unwrap().try_into_tensors().unwrap();
    assert_eq!(
        y[0].view::<i64>()
            .unwrap()
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        [3, -2]
    );

    let dropout = model(13, |m| {
        m.input("x", &[2])
            .scalar_input("r", 1)
            .node("Dropout", &["x", "r"], &["y"], &[])
            .output("y");
    });
    let session = load(&dropout, OptimizationLevel::All).unwrap();
    let ratio = |r: f32| Tensor::from_shape_vec(&[], vec![r]).unwrap();
    let err = assert_typed(
        session.run(vec![("x", f32_tensor(&[2])), ("r", ratio(1.5))]),
        "ratio 1.5",
    );
    assert!(err.to_string().contains("ratio must be in [0, 1)"), "{err}");
    assert!(
        session
            .run(vec![("x", f32_tensor(&[2])), ("r", ratio(0.25))])
            .is_ok()
    );

    let pool = model(13, |m| {
        m.input_with_dim_values("x", 1, &[-1, 2, -1])
            .node("GlobalMaxPool", &["x"], &["y"], &[])
            .output("y");
    });
    let session = load(&pool, OptimizationLevel::All).unwrap();
    let err = assert_typed(
        session.run(vec![("x", f32_tensor(&[2, 2, 0]))]),
        "empty image",
    );
    assert!(err.to_string().contains("empty image"), "{err}");
}

#[test]
fn intermediates_too_large_to_plan_are_left_to_run_time() {
    // Found by the graph_gen fuzzer: the memory planners multiplied declared sizes without
    // overflow checks. A tensor of 2^93 elements loads (the planners leave it to run time)
    // and a run of a smaller input still works.
    let bytes = model(13, |m| {
        m.input_with_dim_values("x", 1, &[-1, -1])
            .ints("shape", &[1 << 31, 1 << 31, 1 << 31])
            .node("Relu", &["x"], &["r"], &[])
            .node("Expand", &["r", "shape"], &["e"], &[])
            .node("Relu", &["e"], &["y"], &[])
            .output("y");
    });
    for level in LEVELS {
        let session = assert_ok_or_typed(load(&bytes, level));
        if let Some(session) = session {
            assert_typed(
                session.run(vec![("x", f32_tensor(&[1, 1]))]),
                "2^93 elements",
            );
        }
    }
}

/// The session when `result` is one, `None` for any error but a caught panic.
fn assert_ok_or_typed<T>(result: Result<T, Error>) -> Option<T> {
    match result {
        Err(Error::Panic { context, message }) => panic!("{context} panicked: {message}"),
        Err(_) => None,
        Ok(v) => Some(v),
    }
}

#[test]
fn schema_rules_name_the_node() {
    // Too few inputs, a required attribute missing, an attribute of the wrong type, an op
    // used before its opset.
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            model(13, |m| {
                m.input("x", &[2])
                    .node("Add", &["x"], &["y"], &[])
                    .output("y");
            }),
            "has 1 inputs",
        ),
        (
            model(13, |m| {
                m.input("x", &[2, 2])
                    .node("Flatten", &["x"], &["y"], &[("axis", Attr::Float(1.0))])
                    .output("y");
            }),
            "attribute 'axis'",
        ),
        (
            model(13, |m| {
                m.input("x", &[1, 1, 4, 4])
                    .node("MaxPool", &["x"], &["y"], &[])
                    .output("y");
            }),
            "required attribute 'kernel_shape'",
        ),
        (
            model(13, |m| {
                m.input("x", &[2])
                    .node("Gelu", &["x"], &["y"], &[])
                    .output("y");
            }),
            "does not exist in opset 13",
        ),
    ];
    for (bytes, expected) in cases {
        assert_rule(&bytes, OptimizationLevel::All, expected);
    }
}

#[test]
fn huge_constant_of_shape_is_a_resource_error_at_load() {
    let bytes = model(13, |m| {
        m.ints("s", &[1 << 20, 1 << 20, 1 << 10])
            .node("ConstantOfShape", &["s"], &["y"], &[])
            .output("y");
    });
    for level in LEVELS {
        let outcome = load(&bytes, level).and_then(|s| s.run(Vec::<(&str, Tensor)>::new()));
        match assert_typed(outcome, "ConstantOfShape 2^50") {
            Error::Kernel {
                cause: KernelError::ResourceLimit(_),
                ..
            } => {}
            other => panic!("{level:?}: expected a resource limit, got {other:?}"),
        }
    }
}

#[test]
fn range_sized_by_an_input_fails_past_the_limit_and_the_session_stays_usable() {
    let bytes = model(13, |m| {
        m.scalar_input("n", 7)
            .scalar_int("zero", 0, 7)
            .scalar_int("one", 1, 7)
            .node("Range", &["zero", "n", "one"], &["y"], &[])
            .output("y");
    });
    let session = limited(
        &bytes,
        RunLimits::default().with_max_tensor_bytes(Some(1 << 20)),
    );
    let n = |v: i64| [("n", Tensor::scalar(v))];
    for huge in [1 << 18, i64::MAX] {
        match session.run(n(huge)) {
            Err(Error::Kernel {
                op_type,
                cause: KernelError::ResourceLimit(_),
                ..
            }) => assert_eq!(op_type, "Range"),
            other => panic!("Range(0, {huge}): expected a resource limit, got {other:?}"),
        }
    }
    assert_eq!(
        session.run(n(5)).unwrap()[0].to_i64_vec().unwrap(),
        vec![0, 1, 2, 3, 4]
    );
}

#[test]
fn conv_pads_and_resize_scales_past_the_limit_are_errors() {
    let pads = model(13, |m| {
        m.input("x", &[1, 1, 4, 4])
            .weight("w", &[1, 1, 3, 3], 1.0)
            .node(
                "Conv",
                &["x", "w"],
                &["y"],
                &[("pads", Attr::Ints(vec![1 << 30; 4]))],
            )
            .output("y");
    });
    let resize = model(13, |m| {
        m.input("x", &[1, 1, 4, 4])
            .floats("sc", &[4], &[1.0, 1.0, 1e6, 1e6])
            .node("Resize", &["x", "", "sc"], &["y"], &[])
            .output("y");
    });
    for (name, bytes) in [("Conv pads 2^30", &pads), ("Resize 1e6", &resize)] {
        for level in LEVELS {
            let outcome =
                load(bytes, level).and_then(|s| s.run([("x", f32_tensor(&[1, 1, 4, 4]))]));
            match assert_typed(outcome, name) {
                Error::Kernel {
                    cause: KernelError::ResourceLimit(_),
                    ..
                } => {}
                other => panic!("{name} at {level:?}: expected a resource limit, got {other:?}"),
            }
        }
    }
}

/// `Loop(m, cond) { v + 1 }` from `v0`: with `cond` true, runs `m` times.
fn counting_loop() -> ModelBuilder {
    let mut body = ModelBuilder::new(1);
    body.scalar_input("i", 7)
        .scalar_input("c", 9)
        .typed_input("v", 1, &[1])
        .scalar_float("one", 1.0)
        .node("Identity", &["c"], &["c_out"], &[])
        .node("Add", &["v", "one"], &["v_out"], &[])
        .typed_output("c_out", 9, &[])
        .typed_output("v_out", 1, &[1]);
    let mut m = ModelBuilder::new(1);
    m.scalar_input("m", 7)
        .scalar_input("cond", 9)
        .typed_input("v0", 1, &[1])
        .node_with_graphs(
            "Loop",
            &["m", "cond", "v0"],
            &["v"],
            vec![("body", body.graph())],
        )
        .typed_output("v", 1, &[1]);
    m
}

/// The inputs of [`counting_loop`]: `trips` iterations from 0.
fn loop_inputs(trips: i64) -> [(&'static str, Tensor); 3] {
    [
        ("m", Tensor::scalar(trips)),
        ("cond", Tensor::scalar(true)),
        ("v0", Tensor::from_shape_vec(&[1], vec![0f32]).unwrap()),
    ]
}

#[test]
fn a_loop_past_its_iteration_limit_fails_and_the_session_stays_usable() {
    let session = limited(
        &counting_loop().to_bytes(13),
        RunLimits::default().with_max_loop_iterations(Some(1000)),
    );
    match session.run(loop_inputs(i64::MAX)) {
        Err(Error::Kernel {
            op_type,
            cause: KernelError::ResourceLimit(_),
            ..
        }) => assert_eq!(op_type, "Loop"),
        other => panic!("expected the Loop's limit, got {other:?}"),
    }
    let v = session.run(loop_inputs(1000)).unwrap();
    assert_eq!(v[0].to_f64_vec().unwrap(), vec![1000.0]);
}

#[test]
fn a_run_past_its_time_limit_fails() {
    let session = limited(
        &counting_loop().to_bytes(13),
        RunLimits::default().with_timeout(Some(std::time::Duration::from_millis(50))),
    );
    let outcome = session.run(loop_inputs(i64::MAX));
    // The Loop notices the limit between iterations, or the executor between nodes: which
    // one comes first depends on the machine's speed.
    match outcome {
        Err(Error::Kernel {
            cause: KernelError::ResourceLimit(msg),
            ..
        })
        | Err(Error::ResourceLimit(msg)) => assert!(msg.contains("time limit"), "{msg}"),
        other => panic!("expected the time limit, got {other:?}"),
    }
}

/// A 3×3 `Conv` (4 output channels, padded) whose input declares `dims` (integers as
/// `dim_value`s, names as `dim_param`s).
fn padded_conv(dims: &[&str]) -> Vec<u8> {
    let mut m = ModelBuilder::new(2);
    m.input_with_dim_names("x", 1, dims)
        .weight("w", &[4, 3, 3, 3], 0.5)
        .node(
            "Conv",
            &["x", "w"],
            &["y"],
            &[("pads", Attr::Ints(vec![1; 4]))],
        )
        .output("y");
    m.to_bytes(13)
}

#[test]
fn a_dim_param_of_question_mark_is_unknown_not_one_symbol() {
    // Paddle's exporters name every unknown dim `?` (PaddleOCR's direction classifier declares
    // [-1, 3, ?, ?]): two `?` dims may differ, as in ONNX Runtime.
    let model = padded_conv(&["-1", "3", "?", "?"]);
    for level in LEVELS {
        let session = load(&model, level).unwrap();
        let y = session.run([("x", f32_tensor(&[1, 3, 48, 192]))]).unwrap();
        assert_eq!(y[0].shape(), &[1, 4, 48, 192], "{level:?}");
    }
    // Named symbols still bind: two dims named `n` must agree.
    let mut m = ModelBuilder::new(2);
    m.input_with_dim_names("x", 1, &["n", "n"])
        .node("Relu", &["x"], &["y"], &[])
        .output("y");
    let session = load(&m.to_bytes(13), OptimizationLevel::All).unwrap();
    assert!(matches!(
        session.run([("x", f32_tensor(&[2, 3]))]),
        Err(Error::InputShape { .. })
    ));
}

#[test]
fn a_dim_value_of_minus_one_is_dynamic() {
    // Paddle's exporters write dynamic dims as dim_value -1.
    let model = padded_conv(&["-1", "3", "-1", "-1"]);
    for level in LEVELS {
        let session = load(&model, level).unwrap();
        for shape in [[1, 3, 48, 192], [2, 3, 8, 8]] {
            let y = session.run([("x", f32_tensor(&shape))]).unwrap();
            assert_eq!(
                y[0].shape(),
                &[shape[0], 4, shape[2], shape[3]],
                "{level:?}"
            );
        }
    }
}
