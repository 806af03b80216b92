//! Sequence and optional values: the operators, the `run_values` API and its typed errors, the
//! parallel executor carrying sequences between devices, and constant folding leaving them
//! alone. Expected values are worked by hand (and agree with onnx's ReferenceEvaluator and
//! ONNX Runtime 1.31 on the same models).

use std::time::Duration;

use spillway::graph::ValueKind;
use spillway::{CopyCost, Devices, Error, Placement, Sequence, Session, Tensor, Value};
use spillway_kernels::KernelError;
use spillway_tests::build::{ModelBuilder, optional_type, sequence_type, tensor_type};

const FLOAT: i32 = 1;
const INT32: i32 = 6;
const INT64: i32 = 7;

fn f32s(shape: &[usize], data: &[f32]) -> Tensor {
    Tensor::from_shape_vec(shape, data.to_vec()).unwrap()
}

fn seq_f32(parts: &[(&[usize], &[f32])]) -> Value {
    let tensors = parts.iter().map(|(s, d)| f32s(s, d)).collect();
    Value::Sequence(Sequence::new(spillway::DType::F32, tensors).unwrap())
}

/// x [3, 2] → SplitToSequence, SequenceLength/At/Erase/Insert, ConcatFromSequence (concat and
/// stack), SequenceEmpty + Insert, SequenceConstruct, SplitToSequence with a scalar split.
fn pipeline() -> Vec<u8> {
    let mut b = ModelBuilder::new(0);
    b.typed_input("x", FLOAT, &[3, 2])
        .scalar_int("m1", -1, INT64)
        .scalar_int("zero", 0, INT32)
        .scalar_int("two", 2, INT64)
        .node(
            "SplitToSequence",
            &["x"],
            &["s"],
            &[("keepdims", spillway_tests::build::Attr::Int(0))],
        )
        .node("SequenceLength", &["s"], &["n"], &[])
        .node("SequenceAt", &["s", "m1"], &["last"], &[])
        .node("SequenceErase", &["s", "zero"], &["e"], &[])
        .node("SequenceInsert", &["e", "last", "zero"], &["ins"], &[])
        .node(
            "ConcatFromSequence",
            &["ins"],
            &["stacked"],
            &[
                ("axis", spillway_tests::build::Attr::Int(-1)),
                ("new_axis", spillway_tests::build::Attr::Int(1)),
            ],
        )
        .node(
            "ConcatFromSequence",
            &["e"],
            &["flat"],
            &[("axis", spillway_tests::build::Attr::Int(0))],
        )
        .node(
            "SequenceEmpty",
            &[],
            &["empty"],
            &[("dtype", spillway_tests::build::Attr::Int(INT64.into()))],
        )
        .node("SequenceInsert", &["empty", "n"], &["ci"], &[])
        .node("SequenceConstruct", &["last", "last"], &["pair"], &[])
        .node("SplitToSequence", &["x", "two"], &["chunks"], &[])
        .output("n")
        .output("last")
        .output("stacked")
        .output("flat")
        .output_of_type("ci", sequence_type(tensor_type(INT64)))
        .output_of_type("pair", sequence_type(tensor_type(FLOAT)))
        .output_of_type("chunks", sequence_type(tensor_type(FLOAT)));
    b.to_bytes(18)
}

fn check_pipeline(session: &Session) {
    let x = f32s(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let out = session.run([("x", x)]).unwrap();
    assert_eq!(out["n"], Tensor::scalar(3i64));
    assert_eq!(out["last"], f32s(&[2], &[5., 6.]));
    assert_eq!(out["stacked"], f32s(&[2, 3], &[5., 3., 5., 6., 4., 6.]));
    assert_eq!(out["flat"], f32s(&[4], &[3., 4., 5., 6.]));
    assert_eq!(
        out.value("ci").unwrap(),
        &Value::Sequence(Sequence::new(spillway::DType::I64, vec![Tensor::scalar(3i64)]).unwrap())
    );
    assert_eq!(
        out.value("pair").unwrap(),
        &seq_f32(&[(&[2], &[5., 6.]), (&[2], &[5., 6.])])
    );
    assert_eq!(
        out.value("chunks").unwrap(),
        &seq_f32(&[(&[2, 2], &[1., 2., 3., 4.]), (&[1, 2], &[5., 6.])])
    );
}

#[test]
fn sequence_operators_compute_the_spec_results() {
    let session = Session::builder().commit_from_memory(&pipeline()).unwrap();
    check_pipeline(&session);
}

#[test]
fn the_parallel_executor_carries_sequences_across_devices() {
    let link = CopyCost {
        latency: Duration::from_micros(5),
        bandwidth_bytes_per_s: 4e9,
    };
    for policy in [Placement::Greedy, Placement::Sequential, Placement::Lios] {
        let session = Session::builder()
            .with_devices(Devices::cpu().with_cpu_lanes(2).with_virtual(2, link))
            .with_placement(policy)
            .commit_from_memory(&pipeline())
            .unwrap();
        check_pipeline(&session);
    }
}

#[test]
fn sequence_values_in_and_out_and_kind_errors() {
    let mut b = ModelBuilder::new(0);
    b.input_of_type("s", sequence_type(tensor_type(FLOAT)))
        .typed_input("t", FLOAT, &[2])
        .node("SequenceInsert", &["s", "t"], &["out"], &[])
        .output_of_type("out", sequence_type(tensor_type(FLOAT)));
    let session = Session::builder()
        .commit_from_memory(&b.to_bytes(18))
        .unwrap();
    assert!(matches!(session.inputs()[0].kind, ValueKind::Sequence(_)));

    let s = seq_f32(&[(&[1], &[1.])]);
    let t = f32s(&[2], &[2., 3.]);
    let out = session
        .run_values([("s", s.clone()), ("t", Value::Tensor(t.clone()))])
        .unwrap();
    assert_eq!(
        out.values()[0],
        seq_f32(&[(&[1], &[1.]), (&[2], &[2., 3.])])
    );
    // A sequence output asked for as a tensor.
    assert!(matches!(out.tensor("out"), Err(Error::OutputKind { .. })));
    assert!(out.get("out").is_none());
    assert!(matches!(
        out.try_into_tensors(),
        Err(Error::OutputKind { .. })
    ));

    // A tensor where a sequence is declared, and the other way round.
    let e = session
        .run([("s", t.clone()), ("t", t.clone())])
        .unwrap_err();
    assert!(
        matches!(&e, Error::InputKind { name, .. } if name == "s"),
        "{e}"
    );
    let e = session
        .run_values([("s", s.clone()), ("t", s.clone())])
        .unwrap_err();
    assert!(
        matches!(&e, Error::InputKind { name, .. } if name == "t"),
        "{e}"
    );
    // An optional where a sequence is declared.
    let e = session
        .run_values([
            ("s", Value::some(s.clone())),
            ("t", Value::Tensor(t.clone())),
        ])
        .unwrap_err();
    assert!(matches!(e, Error::InputKind { .. }), "{e}");
    // A sequence of the wrong element type.
    let ints =
        Value::Sequence(Sequence::new(spillway::DType::I64, vec![Tensor::scalar(1i64)]).unwrap());
    let e = session
        .run_values([("s", ints), ("t", Value::Tensor(t))])
        .unwrap_err();
    assert!(matches!(e, Error::InputDType { .. }), "{e}");
}

#[test]
fn optional_values_and_operators() {
    let mut b = ModelBuilder::new(0);
    b.input_of_type("o", optional_type(tensor_type(FLOAT)))
        .node("OptionalHasElement", &["o"], &["has"], &[])
        .node("OptionalGetElement", &["o"], &["got"], &[])
        .output("has")
        .output("got");
    let session = Session::builder()
        .commit_from_memory(&b.to_bytes(18))
        .unwrap();
    let t = f32s(&[2], &[1., -1.]);
    let out = session.run_values([("o", Value::some(t.clone()))]).unwrap();
    assert_eq!(out["has"], Tensor::scalar(true));
    assert_eq!(out["got"], t);
    // The element of an empty optional is a typed error naming the node.
    let e = session.run_values([("o", Value::none())]).unwrap_err();
    match e {
        Error::Kernel {
            node,
            op_type,
            cause,
        } => {
            assert_eq!(op_type, "OptionalGetElement");
            assert_eq!(node, "OptionalGetElement_1");
            assert!(matches!(cause, KernelError::InvalidValue(_)));
        }
        other => panic!("{other}"),
    }
    // A bare tensor where an optional is declared.
    let e = session.run([("o", t)]).unwrap_err();
    assert!(matches!(e, Error::InputKind { .. }), "{e}");

    // Optional: wrap a tensor, or make an empty one from the type attribute.
    let mut b = ModelBuilder::new(0);
    b.typed_input("x", FLOAT, &[1])
        .node("Optional", &["x"], &["full"], &[])
        .node("Optional", &[], &["empty"], &[])
        .type_attr("type", tensor_type(FLOAT))
        .node("OptionalHasElement", &["empty"], &["has_empty"], &[])
        .output_of_type("full", optional_type(tensor_type(FLOAT)))
        .output("has_empty");
    let session = Session::builder()
        .commit_from_memory(&b.to_bytes(18))
        .unwrap();
    let x = f32s(&[1], &[7.]);
    let out = session.run([("x", x.clone())]).unwrap();
    assert_eq!(out.value("full").unwrap(), &Value::some(x));
    assert_eq!(out["has_empty"], Tensor::scalar(false));
}

#[test]
fn bad_positions_and_types_are_typed_errors() {
    let run = |op: &str, pos: i64, extra: &[&str]| {
        let mut b = ModelBuilder::new(0);
        b.typed_input("x", FLOAT, &[3, 2])
            .scalar_int("p", pos, INT64);
        b.node("SplitToSequence", &["x"], &["s"], &[]);
        let mut inputs = vec!["s"];
        inputs.extend_from_slice(extra);
        inputs.push("p");
        b.node(op, &inputs, &["y"], &[]).output("y");
        let session = Session::builder()
            .commit_from_memory(&b.to_bytes(18))
            .unwrap();
        session.run([("x", f32s(&[3, 2], &[0.; 6]))])
    };
    for (op, pos, extra) in [
        ("SequenceAt", 3, &[][..]),
        ("SequenceAt", -4, &[]),
        ("SequenceErase", 3, &[]),
        ("SequenceInsert", 4, &["x"]),
        ("SequenceInsert", -4, &["x"]),
    ] {
        match run(op, pos, extra) {
            Err(Error::Kernel { op_type, cause, .. }) => {
                assert_eq!(op_type, op);
                assert!(
                    matches!(cause, KernelError::InvalidValue(_)),
                    "{op} {pos}: {cause}"
                );
            }
            other => panic!("{op} at {pos}: {other:?}"),
        }
    }
    // The edges of the ranges are fine: -n for At, n for Insert.
    assert!(run("SequenceAt", -3, &[]).is_ok());
    assert!(run("SequenceInsert", 3, &["x"]).is_ok());

    // Inserting an int64 tensor into a float sequence.
    let mut b = ModelBuilder::new(0);
    b.typed_input("x", FLOAT, &[2])
        .typed_input("i", INT64, &[1])
        .node("SequenceConstruct", &["x"], &["s"], &[])
        .node("SequenceInsert", &["s", "i"], &["y"], &[])
        .output_of_type("y", sequence_type(tensor_type(FLOAT)));
    let session = Session::builder()
        .commit_from_memory(&b.to_bytes(18))
        .unwrap();
    let e = session
        .run([
            ("x", f32s(&[2], &[0., 1.])),
            ("i", Tensor::from_shape_vec(&[1], vec![1i64]).unwrap()),
        ])
        .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Kernel {
                cause: KernelError::DTypeMismatch(_),
                ..
            }
        ),
        "{e}"
    );

    // ConcatFromSequence of an empty sequence.
    let mut b = ModelBuilder::new(0);
    b.typed_input("x", FLOAT, &[1])
        .node("SequenceEmpty", &[], &["s"], &[])
        .node(
            "ConcatFromSequence",
            &["s"],
            &["y"],
            &[("axis", spillway_tests::build::Attr::Int(0))],
        )
        .node("Add", &["y", "x"], &["z"], &[])
        .output("z");
    let session = Session::builder()
        .commit_from_memory(&b.to_bytes(18))
        .unwrap();
    let e = session.run([("x", f32s(&[1], &[0.]))]).unwrap_err();
    assert!(
        matches!(&e, Error::Kernel { op_type, .. } if op_type == "ConcatFromSequence"),
        "{e}"
    );
}

#[test]
fn a_tensor_kernel_given_a_sequence_is_a_typed_error_naming_the_node() {
    let mut b = ModelBuilder::new(0);
    b.typed_input("x", FLOAT, &[2])
        .node("SequenceConstruct", &["x"], &["s"], &[])
        .node("Relu", &["s"], &["y"], &[])
        .output("y");
    let session = Session::builder()
        .commit_from_memory(&b.to_bytes(18))
        .unwrap();
    let e = session.run([("x", f32s(&[2], &[1., 2.]))]).unwrap_err();
    match e {
        Error::Kernel {
            node,
            op_type,
            cause,
        } => {
            assert_eq!((node.as_str(), op_type.as_str()), ("Relu_1", "Relu"));
            assert!(
                matches!(&cause, KernelError::ValueKind { index: 0, got, .. } if got == "seq(tensor(float32))"),
                "{cause}"
            );
        }
        other => panic!("{other}"),
    }
}

#[test]
fn constant_folding_leaves_sequences_alone() {
    // Every input of SequenceConstruct is a constant: it must stay a node, its output a sequence.
    let mut b = ModelBuilder::new(0);
    b.ints("a", &[1, 2])
        .ints("b", &[3])
        .node("SequenceConstruct", &["a", "b"], &["s"], &[])
        .node("SequenceLength", &["s"], &["n"], &[])
        .node(
            "ConcatFromSequence",
            &["s"],
            &["c"],
            &[("axis", spillway_tests::build::Attr::Int(0))],
        )
        .output_of_type("s", sequence_type(tensor_type(INT64)))
        .output("n")
        .output("c");
    let session = Session::builder()
        .commit_from_memory(&b.to_bytes(18))
        .unwrap();
    let graph = session.graph();
    assert!(graph.nodes.iter().any(|n| n.op_type == "SequenceConstruct"));
    let s_id = graph.outputs[0];
    assert!(!graph.constants.contains_key(&s_id));
    assert!(matches!(graph.value(s_id).kind, ValueKind::Sequence(_)));
    let out = session.run(Vec::<(String, Tensor)>::new()).unwrap();
    assert_eq!(out["n"], Tensor::scalar(2i64));
    assert_eq!(
        out["c"],
        Tensor::from_shape_vec(&[3], vec![1i64, 2, 3]).unwrap()
    );
}
