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
