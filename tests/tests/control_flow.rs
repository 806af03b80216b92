//! `If` and `Loop` with subgraphs that capture outer-scope values, loop-carried dependencies
//! and scan outputs, compared with ONNX Runtime.

use spillway::Session;
use spillway_kernels::Tensor;
use spillway_tests::assert_close;
use spillway_tests::build::ModelBuilder;
use spillway_tests::oracle::{Oracle, OrtConfig};

const FLOAT: i32 = 1;
const INT64: i32 = 7;
const BOOL: i32 = 9;

/// y = Loop(M, cond=true, acc=x): body acc' = acc * w + i (w captured from the outer scope),
/// scan output acc' each step; then If(sum > 0) picks Relu(final) or Neg(final) with `bias`
/// captured by both branches.
fn loop_if_model() -> Vec<u8> {
    let mut body = ModelBuilder::new(2);
    body.scalar_input("i", INT64)
        .scalar_input("cond_in", BOOL)
        .typed_input("acc", FLOAT, &[2, 3])
        .node(
            "Cast",
            &["i"],
            &["i_f"],
            &[("to", spillway_tests::build::Attr::Int(1))],
        )
        .node("Mul", &["acc", "w"], &["scaled"], &[])
        .node("Add", &["scaled", "i_f"], &["acc_out"], &[])
        .node("Identity", &["cond_in"], &["cond_out"], &[])
        .node("Identity", &["acc_out"], &["scan"], &[])
        .typed_output("cond_out", BOOL, &[])
        .typed_output("acc_out", FLOAT, &[2, 3])
        .typed_output("scan", FLOAT, &[2, 3]);
    let mut then_b = ModelBuilder::new(3);
    then_b
        .node("Relu", &["final"], &["r"], &[])
        .node("Add", &["r", "bias"], &["out"], &[])
        .typed_output("out", FLOAT, &[2, 3]);
    let mut else_b = ModelBuilder::new(4);
    else_b
        .node("Neg", &["final"], &["n"], &[])
        .node("Sub", &["n", "bias"], &["out"], &[])
        .typed_output("out", FLOAT, &[2, 3]);

    let mut m = ModelBuilder::new(1);
    m.input("x", &[2, 3])
        .scalar_input("trips", INT64)
        .weight("w", &[2, 3], 1.0)
        .weight("bias", &[3], 0.5)
        .node("Constant", &[], &["true"], &[])
        .node_with_graphs(
            "Loop",
            &["trips", "true"],
            &["final", "scans"],
            vec![("body", body.graph())],
        )
        .node(
            "ReduceSum",
            &["final"],
            &["total"],
            &[("keepdims", spillway_tests::build::Attr::Int(0))],
        )
        .node("Constant", &[], &["zero"], &[])
        .node("Greater", &["total", "zero"], &["positive"], &[])
        .node_with_graphs(
            "If",
            &["positive"],
            &["y"],
            vec![
                ("then_branch", then_b.graph()),
                ("else_branch", else_b.graph()),
            ],
        )
        .output("y")
        .output("scans");
    let mut bytes_model = m.graph();
    // Constants: `true` (bool) and `zero` (float), set as tensor attributes.
    use spillway::onnx::proto::{AttributeProto, TensorProto, attribute_proto::AttributeType};
    let constant = |t: TensorProto| {
        let mut a = AttributeProto {
            name: Some("value".into()),
            t: Some(t),
            ..Default::default()
        };
        a.set_type(AttributeType::Tensor);
        a
    };
    bytes_model.node[0].attribute.push(constant(TensorProto {
        data_type: Some(BOOL),
        int32_data: vec![1],
        ..Default::default()
    }));
    bytes_model.node[3].attribute.push(constant(TensorProto {
        data_type: Some(FLOAT),
        float_data: vec![0.0],
        ..Default::default()
    }));
    // The loop carries x: its inputs are (trips, true, x).
    bytes_model.node[1].input.push("x".into());
    use prost::Message;
    spillway::onnx::proto::ModelProto {
        ir_version: Some(8),
        opset_import: vec![spillway::onnx::proto::OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        }],
        graph: Some(bytes_model),
        ..Default::default()
    }
    .encode_to_vec()
}

#[test]
fn loop_and_if_with_captures_match_onnx_runtime() {
    let bytes = loop_if_model();
    let session = Session::builder().commit_from_memory(&bytes).unwrap();
    let mut oracle = Oracle::load_bytes(&bytes, OrtConfig::default()).unwrap();
    for (trips, sign) in [(3i64, 1.0f32), (2, -1.0), (1, 1.0)] {
        let x = Tensor::from_shape_vec(
            &[2, 3],
            vec![0.5 * sign, -0.25, 1.0, 0.75, -1.5 * sign, 0.1],
        )
        .unwrap();
        let inputs = vec![
            ("x".to_string(), x),
            ("trips".to_string(), Tensor::scalar(trips)),
        ];
        let ours = session.run(inputs.clone()).unwrap();
        let theirs = oracle.run(&inputs).unwrap();
        assert_eq!(
            ours[1].shape(),
            &[trips as usize, 2, 3],
            "scan outputs stack one slice per iteration"
        );
        for i in 0..2 {
            assert_close(&theirs[i], &ours[i], 1e-5, 1e-6)
                .unwrap_or_else(|e| panic!("trips {trips}, output {i}: {e}"));
        }
    }
}

/// all = Loop(trips, go, x): body `part = Tile(y + i, reps)`, `acc' = Concat(acc, part)` (the
/// appending pattern that Spillway runs by keeping the parts and concatenating once), with
/// `part` also a scan output.
fn appending_loop_model() -> Vec<u8> {
    use spillway_tests::build::Attr;
    let mut body = ModelBuilder::new(5);
    body.scalar_input("i", INT64)
        .scalar_input("cond_in", BOOL)
        .typed_input("acc", FLOAT, &[-1, 3])
        .node("Cast", &["i"], &["i_f"], &[("to", Attr::Int(1))])
        .node("Add", &["y", "i_f"], &["shifted"], &[])
        .node("Tile", &["shifted", "reps"], &["part"], &[])
        .node(
            "Concat",
            &["acc", "part"],
            &["acc_out"],
            &[("axis", Attr::Int(0))],
        )
        .node("Identity", &["cond_in"], &["cond_out"], &[])
        .node("Identity", &["part"], &["scan"], &[])
        .typed_output("cond_out", BOOL, &[])
        .typed_output("acc_out", FLOAT, &[-1, 3])
        .typed_output("scan", FLOAT, &[1, 3]);
    let mut m = ModelBuilder::new(6);
    m.input("x", &[1, 3])
        .input("y", &[1, 3])
        .typed_input("reps", INT64, &[2])
        .scalar_input("trips", INT64)
        .scalar_input("go", BOOL)
        .node_with_graphs(
            "Loop",
            &["trips", "go", "x"],
            &["all", "scans"],
            vec![("body", body.graph())],
        )
        .output("all")
        .output("scans");
    m.to_bytes(13)
}

#[test]
fn appending_loop_matches_onnx_runtime_and_reports_a_bad_part() {
    let bytes = appending_loop_model();
    let session = Session::builder().commit_from_memory(&bytes).unwrap();
    let mut oracle = Oracle::load_bytes(&bytes, OrtConfig::default()).unwrap();
    let inputs = |trips: i64, reps: [i64; 2]| {
        vec![
            (
                "x".to_string(),
                Tensor::from_shape_vec(&[1, 3], vec![1.0f32, 2.0, 3.0]).unwrap(),
            ),
            (
                "y".to_string(),
                Tensor::from_shape_vec(&[1, 3], vec![-0.5f32, 0.25, 4.0]).unwrap(),
            ),
            (
                "reps".to_string(),
                Tensor::from_shape_vec(&[2], reps.to_vec()).unwrap(),
            ),
            ("trips".to_string(), Tensor::scalar(trips)),
            ("go".to_string(), Tensor::scalar(true)),
        ]
    };
    for trips in [0i64, 1, 5] {
        let ours = session.run(inputs(trips, [1, 1])).unwrap();
        let theirs = oracle.run(&inputs(trips, [1, 1])).unwrap();
        assert_eq!(ours[0].shape(), &[1 + trips as usize, 3]);
        assert_close(&theirs[0], &ours[0], 0.0, 0.0)
            .unwrap_or_else(|e| panic!("trips {trips}, appended output: {e}"));
        if trips > 0 {
            assert_close(&theirs[1], &ours[1], 0.0, 0.0)
                .unwrap_or_else(|e| panic!("trips {trips}, scan output: {e}"));
        }
    }
    // Parts of width 6 cannot join a width-3 accumulator: the error names the body's Concat,
    // and the session still runs afterwards.
    let err = session.run(inputs(2, [1, 2])).unwrap_err().to_string();
    assert!(err.contains("Concat"), "{err}");
    assert_eq!(session.run(inputs(3, [1, 1])).unwrap()[0].shape(), &[4, 3]);
}
