//! Bad input gets a typed error, never a panic, and the session stays usable.

use std::panic::{AssertUnwindSafe, catch_unwind};

use spillway::{Error, Session, Tensor};
use spillway_tests::build::{Attr, ModelBuilder};
use spillway_tests::workspace_root;

fn small_model() -> Vec<u8> {
    std::fs::read(workspace_root().join("models/small/inception_block.onnx")).unwrap()
}

fn f32_tensor(shape: &[usize]) -> Tensor {
    Tensor::from_shape_vec(shape, vec![0.5f32; shape.iter().product()]).unwrap()
}

/// Loading must return (Ok or a typed error) without panicking.
fn load_never_panics(bytes: &[u8]) -> Result<Session, Error> {
    catch_unwind(AssertUnwindSafe(|| {
        Session::builder().commit_from_memory(bytes)
    }))
    .unwrap_or_else(|_| panic!("loading panicked on {} bytes", bytes.len()))
}

#[test]
fn truncated_models_are_decode_errors() {
    let bytes = small_model();
    for len in [1, 7, 100, bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
        match load_never_panics(&bytes[..len]) {
            Err(Error::Decode(_) | Error::InvalidModel(_)) => {}
            Err(other) => panic!("truncated to {len}: unexpected error kind {other:?}"),
            Ok(_) => panic!("truncated to {len} bytes: loaded"),
        }
    }
}

#[test]
fn random_bytes_are_rejected() {
    let mut state = 0x1234_5678_9abc_def1u64;
    for len in [0usize, 1, 16, 1000, 10_000] {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        assert!(
            load_never_panics(&bytes).is_err(),
            "{len} random bytes loaded"
        );
    }
}

#[test]
fn bit_flipped_models_never_panic_on_load_or_run() {
    let bytes = small_model();
    let mut state = 0xdead_beef_u64;
    let mut rejected = 0;
    for _ in 0..300 {
        let mut copy = bytes.clone();
        for _ in 0..4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let pos = (state as usize) % copy.len();
            copy[pos] ^= 1 << (state >> 61);
        }
        match load_never_panics(&copy) {
            Err(Error::Panic { context, message }) => {
                panic!("loading a bit-flipped model panicked in {context}: {message}")
            }
            Err(_) => rejected += 1,
            Ok(session) => {
                // The executor catches a kernel's panic and returns it as `Error::Panic`:
                // that is a failure here as much as a panic across the API.
                let run = catch_unwind(AssertUnwindSafe(|| {
                    session.run([("input", f32_tensor(&[1, 3, 64, 64]))])
                }));
                match run {
                    Err(_) => panic!("running a bit-flipped model panicked across the API"),
                    Ok(Err(Error::Panic { context, message })) => {
                        panic!("running a bit-flipped model: {context} panicked: {message}")
                    }
                    Ok(_) => {}
                }
            }
        }
    }
    assert!(rejected > 0, "no bit-flipped model was rejected");
}

#[test]
fn wrong_inputs_are_typed_errors_and_the_session_stays_usable() {
    let session = Session::builder()
        .commit_from_memory(&small_model())
        .unwrap();
    let good = || [("input", f32_tensor(&[1, 3, 64, 64]))];
    assert!(matches!(
        session.run([("nope", f32_tensor(&[1, 3, 64, 64]))]),
        Err(Error::UnknownInput { .. })
    ));
    assert!(
        matches!(session.run(Vec::<(&str, Tensor)>::new()), Err(Error::MissingInput(name)) if name == "input")
    );
    let ints = Tensor::from_shape_vec(&[1, 3, 64, 64], vec![1i64; 3 * 64 * 64]).unwrap();
    assert!(matches!(
        session.run([("input", ints)]),
        Err(Error::InputDType { .. })
    ));
    assert!(matches!(
        session.run([("input", f32_tensor(&[1, 3, 32, 64]))]),
        Err(Error::InputShape { .. })
    ));
    assert!(matches!(
        session.run([("input", f32_tensor(&[3, 64, 64]))]),
        Err(Error::InputShape { .. })
    ));
    // Symbolic dims must agree with themselves; batch 2 is fine.
    assert_eq!(
        session
            .run([("input", f32_tensor(&[2, 3, 64, 64]))])
            .unwrap()[0]
            .shape(),
        &[2, 10]
    );
    assert_eq!(session.run(good()).unwrap()[0].shape(), &[1, 10]);
}

#[test]
fn unsupported_op_names_the_node() {
    let mut m = ModelBuilder::new(1);
    m.input("x", &[2])
        .node("Relu", &["x"], &["a"], &[])
        .node("FancyOp", &["a"], &["y"], &[])
        .output("y");
    match Session::builder().commit_from_memory(&m.to_bytes(13)) {
        Err(Error::Unsupported {
            node,
            op_type,
            opset,
            ..
        }) => {
            assert_eq!(
                (node.as_str(), op_type.as_str(), opset),
                ("FancyOp_1", "FancyOp", 13)
            );
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn an_attribute_the_operator_does_not_have_is_an_invalid_node() {
    let mut m = ModelBuilder::new(1);
    m.input("x", &[2])
        .node("Relu", &["x"], &["y"], &[("mystery", Attr::Int(3))])
        .output("y");
    match Session::builder().commit_from_memory(&m.to_bytes(13)) {
        Err(Error::InvalidNode { node, rule, .. }) => {
            assert_eq!(node, "Relu_0");
            assert!(rule.contains("'mystery'"), "{rule}");
        }
        other => panic!("expected InvalidNode, got {other:?}"),
    }
}

#[test]
fn failing_kernel_names_the_node_and_the_session_recovers() {
    let mut m = ModelBuilder::new(1);
    m.input("x", &[-1, 4])
        .ints("shape", &[3, -1])
        .node("Reshape", &["x", "shape"], &["y"], &[])
        .output("y");
    let session = Session::builder()
        .commit_from_memory(&m.to_bytes(13))
        .unwrap();
    match session.run([("x", f32_tensor(&[2, 4]))]) {
        Err(Error::Kernel { node, op_type, .. }) => {
            assert_eq!((node.as_str(), op_type.as_str()), ("Reshape_0", "Reshape"))
        }
        other => panic!("expected a kernel error, got {other:?}"),
    }
    assert_eq!(
        session.run([("x", f32_tensor(&[3, 4]))]).unwrap()[0].shape(),
        &[3, 4]
    );
}

#[test]
fn low_precision_inputs_to_arithmetic_are_typed_errors() {
    use spillway::DType;
    use spillway_kernels::KernelError;
    use spillway_kernels::low_precision::from_codes;
    // float8 E4M3FN (17) into Relu and int4 (22) into Add: ONNX defines neither; the
    // kernels name the type instead of computing on codes.
    for (code, dtype, op, inputs) in [
        (17, DType::F8E4M3Fn, "Relu", &["x"][..]),
        (22, DType::I4, "Add", &["x", "x"][..]),
    ] {
        let mut m = ModelBuilder::new(1);
        m.typed_input("x", code, &[2])
            .node(op, inputs, &["y"], &[])
            .typed_output("y", code, &[2]);
        let session = load_never_panics(&m.to_bytes(21)).unwrap();
        let x = from_codes(dtype, &[2], vec![0x1, 0x2]).unwrap();
        match session.run([("x", x)]) {
            Err(Error::Kernel {
                op_type,
                cause: KernelError::UnsupportedDType { dtype: d, .. },
                ..
            }) => assert_eq!((op_type.as_str(), d), (op, dtype)),
            other => panic!("{op} on {dtype}: expected UnsupportedDType, got {other:?}"),
        }
    }
}

#[test]
fn cycles_and_dangling_inputs_are_invalid_models() {
    let mut m = ModelBuilder::new(1);
    m.input("x", &[2])
        .node("Add", &["x", "b"], &["a"], &[])
        .node("Relu", &["a"], &["b"], &[])
        .output("b");
    assert!(matches!(
        Session::builder().commit_from_memory(&m.to_bytes(13)),
        Err(Error::InvalidModel(_))
    ));
    let mut m = ModelBuilder::new(1);
    m.input("x", &[2])
        .node("Add", &["x", "ghost"], &["y"], &[])
        .output("y");
    assert!(matches!(
        Session::builder().commit_from_memory(&m.to_bytes(13)),
        Err(Error::InvalidModel(_))
    ));
}

#[test]
fn missing_file_is_an_io_error() {
    assert!(matches!(
        Session::builder().commit_from_file("/nonexistent/model.onnx"),
        Err(Error::Io { .. })
    ));
}
