//! The `ort` crate's own API, switched to Spillway with `ort::set_api`, against a direct
//! `spillway::Session::run` on the same models.

mod common;

use std::sync::OnceLock;

use common::{D, bundled_model, identity, mlp, model, node, sequence, tensor_info};
use half::{bf16, f16};
use ndarray::{Array, Array2, ArrayD, IxDyn};
use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::{RunOptions, Session};
use ort::value::{DynSequenceValueType, Tensor, TensorElementType, TensorRef, ValueType};

type R = Result<(), Box<dyn std::error::Error>>;

/// The process's `ort` environment, on Spillway.
fn env() -> &'static Environment {
    static ENV: OnceLock<Environment> = OnceLock::new();
    ENV.get_or_init(|| {
        assert!(
            ort::set_api(spillway_ort::api()),
            "an OrtApi was set before"
        );
        ort::init()
            .with_name("spillway-ort-tests")
            .build()
            .expect("creating the environment")
    })
}

fn direct(model: &[u8], inputs: Vec<(&str, spillway::Tensor)>) -> Vec<spillway::Tensor> {
    let session = spillway::Session::builder()
        .commit_from_memory(model)
        .expect("spillway loads the model");
    session.run(inputs).expect("spillway runs").into_tensors()
}

#[test]
fn bundled_model_matches_direct_run() -> R {
    let path = bundled_model();
    let mut session = Session::builder(env())?
        .with_intra_threads(2)?
        .with_optimization_level(GraphOptimizationLevel::All)?
        .commit_from_file(&path)?;
    assert_eq!(session.inputs().len(), 1);
    let input = &session.inputs()[0];
    assert_eq!(input.name(), "input");
    assert_eq!(
        input.dtype().tensor_type(),
        Some(TensorElementType::Float32)
    );
    let shape: Vec<i64> = input.dtype().tensor_shape().expect("a tensor").to_vec();
    assert_eq!(shape.len(), 4);
    assert_eq!(session.outputs()[0].name(), "probabilities");

    let image = Array::from_shape_fn((1, 3, 64, 64), |(_, c, y, x)| {
        ((c * 31 + y * 7 + x) % 17) as f32 / 17.0 - 0.5
    });
    let outputs = session.run(ort::inputs!["input" => TensorRef::from_array_view(&image)?])?;
    let got = outputs["probabilities"]
        .try_extract_array::<f32>()?
        .to_owned();

    let bytes = std::fs::read(&path)?;
    let want = direct(
        &bytes,
        vec![(
            "input",
            spillway::Tensor::F32(image.into_dyn().into_shared()),
        )],
    );
    let want = want[0].view::<f32>()?;
    assert_eq!(got.shape(), want.shape());
    assert_eq!(got.shape(), &[1, 10]);
    for (a, b) in got.iter().zip(want.iter()) {
        assert!((a - b).abs() <= 1e-6, "{a} vs {b}");
    }
    assert!((got.sum() - 1.0).abs() < 1e-5);
    Ok(())
}

#[test]
fn mlp_with_dynamic_batch_matches_direct_run() -> R {
    let bytes = mlp();
    let mut session = Session::builder(env())?.commit_from_memory(&bytes)?;
    let dims = session.inputs()[0]
        .dtype()
        .tensor_shape()
        .expect("a tensor")
        .to_vec();
    assert_eq!(dims, [-1, 4]);
    match session.inputs()[0].dtype() {
        ValueType::Tensor {
            dimension_symbols, ..
        } => assert_eq!(dimension_symbols[0], "N"),
        other => panic!("input type {other:?}"),
    }
    for batch in [1usize, 5] {
        let x = Array2::from_shape_fn((batch, 4), |(i, j)| (i as f32 - 2.0) * 0.3 + j as f32 * 0.1);
        // An owned tensor (allocated by the backend) this time.
        let outputs = session.run(ort::inputs!["x" => Tensor::from_array(x.clone())?])?;
        let got = outputs["y"].try_extract_array::<f32>()?.to_owned();
        let want = direct(
            &bytes,
            vec![("x", spillway::Tensor::F32(x.into_dyn().into_shared()))],
        );
        assert_eq!(got, want[0].view::<f32>()?.to_owned());
        assert_eq!(got.shape(), &[batch, 3]);
    }
    Ok(())
}

/// Runs the identity model on `values` of one element type through `ort` and checks they come
/// back unchanged.
fn roundtrip<T>(elem: i32, values: [T; 6]) -> R
where
    T: ort::value::PrimitiveTensorElementType + Clone + PartialEq + std::fmt::Debug + 'static,
{
    let mut session = Session::builder(env())?.commit_from_memory(&identity(elem))?;
    let x = Array::from_shape_vec((2, 3), values.to_vec())?;
    let outputs = session.run(ort::inputs![TensorRef::from_array_view(&x)?])?;
    assert_eq!(outputs[0].try_extract_array::<T>()?, x.into_dyn().view());
    Ok(())
}

#[test]
fn every_numeric_type_round_trips() -> R {
    roundtrip::<f32>(1, [1.5, -2.0, 0.0, 3.25, f32::MAX, f32::MIN_POSITIVE])?;
    roundtrip::<u8>(2, [0, 1, 2, 127, 200, 255])?;
    roundtrip::<i8>(3, [-128, -1, 0, 1, 64, 127])?;
    roundtrip::<u16>(4, [0, 1, 300, 40000, 65535, 7])?;
    roundtrip::<i16>(5, [-32768, -1, 0, 1, 300, 32767])?;
    roundtrip::<i32>(6, [i32::MIN, -1, 0, 1, 70000, i32::MAX])?;
    roundtrip::<i64>(7, [i64::MIN, -1, 0, 1, 1 << 40, i64::MAX])?;
    roundtrip::<bool>(9, [true, false, false, true, true, false])?;
    let h = |v: f32| f16::from_f32(v);
    roundtrip::<f16>(10, [h(1.5), h(-2.0), h(0.0), h(65504.0), h(0.25), h(-0.5)])?;
    roundtrip::<f64>(11, [1.5, -2.0, 0.0, 1e300, -1e-300, 3.0])?;
    roundtrip::<u32>(12, [0, 1, 2, 1 << 31, u32::MAX, 9])?;
    roundtrip::<u64>(13, [0, 1, 2, 1 << 63, u64::MAX, 9])?;
    let b = |v: f32| bf16::from_f32(v);
    roundtrip::<bf16>(16, [b(1.5), b(-2.0), b(0.0), b(3.0e38), b(0.25), b(-0.5)])?;
    Ok(())
}

#[test]
fn strings_round_trip() -> R {
    let mut session = Session::builder(env())?.commit_from_memory(&identity(8))?;
    let words = ["", "spillway", "ünïcødé", "a b", "x", "longer string here"];
    let x = ArrayD::from_shape_vec(
        IxDyn(&[2, 3]),
        words.iter().map(|s| s.to_string()).collect(),
    )?;
    let outputs = session.run(ort::inputs![Tensor::from_string_array(&x)?])?;
    assert_eq!(outputs[0].try_extract_string_array()?, x);
    let (shape, strings) = outputs[0].try_extract_strings()?;
    assert_eq!(**shape, [2, 3]);
    assert_eq!(strings, words);
    Ok(())
}

#[test]
fn sequence_output_is_a_sequence() -> R {
    let mut session = Session::builder(env())?.commit_from_memory(&sequence())?;
    assert!(matches!(
        session.outputs()[0].dtype(),
        ValueType::Sequence(_)
    ));
    let a = ndarray::arr1(&[1.0f32, 2.0]);
    let b = ndarray::arr1(&[3.0f32, 4.0]);
    let mut outputs = session.run(ort::inputs![
        "a" => TensorRef::from_array_view(&a)?,
        "b" => TensorRef::from_array_view(&b)?
    ])?;
    let n = outputs["n"].try_extract_array::<i64>()?;
    assert_eq!(n.iter().copied().collect::<Vec<_>>(), [2]);
    let seq = outputs
        .remove("s")
        .expect("output s")
        .downcast::<DynSequenceValueType>()?;
    let items = seq.try_extract_sequence::<ort::value::TensorValueType<f32>>()?;
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].try_extract_array::<f32>()?, a.into_dyn().view());
    assert_eq!(items[1].try_extract_array::<f32>()?, b.into_dyn().view());
    Ok(())
}

#[test]
fn metadata_and_io_info() -> R {
    let session = Session::builder(env())?.commit_from_memory(&mlp())?;
    let metadata = session.metadata()?;
    assert_eq!(metadata.producer().as_deref(), Some("spillway-ort-tests"));
    assert_eq!(metadata.name().as_deref(), Some("test_graph"));
    assert_eq!(metadata.description().as_deref(), Some("test description"));
    assert_eq!(metadata.domain().as_deref(), Some("dev.spillway"));
    assert_eq!(metadata.version(), Some(7));
    assert_eq!(
        metadata.graph_description().as_deref(),
        Some("a graph for spillway-ort's tests")
    );
    assert_eq!(metadata.custom_keys()?, ["custom_key"]);
    assert_eq!(
        metadata.custom("custom_key").as_deref(),
        Some("custom_value")
    );
    assert_eq!(metadata.custom("absent"), None);
    assert_eq!(session.outputs()[0].name(), "y");
    Ok(())
}

#[test]
fn thread_and_execution_options_are_accepted() -> R {
    let bytes = mlp();
    let x = Array2::from_shape_fn((3, 4), |(i, j)| i as f32 - j as f32);
    let want = direct(
        &bytes,
        vec![(
            "x",
            spillway::Tensor::F32(x.clone().into_dyn().into_shared()),
        )],
    );
    for level in [
        GraphOptimizationLevel::Disable,
        GraphOptimizationLevel::Level1,
        GraphOptimizationLevel::Level3,
    ] {
        let mut session = Session::builder(env())?
            .with_optimization_level(level)?
            .with_intra_threads(1)?
            .with_inter_threads(2)?
            .with_parallel_execution(true)?
            .commit_from_memory(&bytes)?;
        let outputs = session.run(ort::inputs![TensorRef::from_array_view(&x)?])?;
        assert_eq!(
            outputs[0].try_extract_array::<f32>()?.to_owned(),
            want[0].view::<f32>()?.to_owned()
        );
    }
    // More threads than this machine may have cores: accepted, as ONNX Runtime does.
    let mut session = Session::builder(env())?
        .with_intra_threads(8)?
        .commit_from_memory(&bytes)?;
    let outputs = session.run(ort::inputs![TensorRef::from_array_view(&x)?])?;
    assert_eq!(
        outputs[0].try_extract_array::<f32>()?.to_owned(),
        want[0].view::<f32>()?.to_owned()
    );
    Ok(())
}

#[test]
fn io_binding_runs() -> R {
    let bytes = mlp();
    let mut session = Session::builder(env())?.commit_from_memory(&bytes)?;
    let x = Array2::from_shape_fn((2, 4), |(i, j)| (i * 4 + j) as f32 * 0.25);
    let want = direct(
        &bytes,
        vec![(
            "x",
            spillway::Tensor::F32(x.clone().into_dyn().into_shared()),
        )],
    );
    let input = Tensor::from_array(x)?;
    let mut binding = session.create_binding()?;
    binding.bind_input("x", &input)?;
    binding.bind_output_to_device("y", session.allocator().memory_info())?;
    let outputs = session.run_binding(&binding)?;
    assert_eq!(
        outputs["y"].try_extract_array::<f32>()?.to_owned(),
        want[0].view::<f32>()?.to_owned()
    );
    Ok(())
}

#[test]
fn terminate_flag_stops_a_run() -> R {
    let mut session = Session::builder(env())?.commit_from_memory(&mlp())?;
    let x = Array2::<f32>::zeros((1, 4));
    let options = RunOptions::new()?;
    options.terminate()?;
    let err = session
        .run_with_options(ort::inputs![TensorRef::from_array_view(&x)?], &options)
        .expect_err("a terminated run fails");
    assert!(err.to_string().contains("terminate"), "{err}");
    options.unterminate()?;
    let outputs =
        session.run_with_options(ort::inputs![TensorRef::from_array_view(&x)?], &options)?;
    assert_eq!(outputs[0].try_extract_array::<f32>()?.shape(), &[1, 3]);
    Ok(())
}

#[test]
fn errors_are_statuses_not_crashes() -> R {
    let mut session = Session::builder(env())?.commit_from_memory(&mlp())?;
    // A wrong element type: Spillway's typed error comes back through the status.
    let x = Array2::<i64>::zeros((1, 4));
    let err = session
        .run(ort::inputs!["x" => TensorRef::from_array_view(&x)?])
        .expect_err("an int64 input to a float model fails");
    assert!(err.to_string().contains("element type"), "{err}");
    // A model that is not one.
    let err = Session::builder(env())?
        .commit_from_memory(b"not a model")
        .expect_err("garbage is refused");
    assert!(err.to_string().contains("CreateSessionFromArray"), "{err}");
    // An operator Spillway lacks (from ONNX Runtime's ML domain): refused, naming it.
    let bytes = model(
        vec![node("MadeUpOperator", &["x"], &["y"])],
        vec![],
        vec![tensor_info("x", 1, &[D::N(1)])],
        vec![tensor_info("y", 1, &[D::N(1)])],
    );
    let err = Session::builder(env())?
        .commit_from_memory(&bytes)
        .expect_err("an unknown op is refused");
    assert!(err.to_string().contains("MadeUpOperator"), "{err}");
    // An entry Spillway does not implement answers with its name.
    let err = Session::builder(env())?
        .with_profiling("profile")
        .map(|_| ())
        .expect_err("profiling is not implemented");
    assert!(err.to_string().contains("EnableProfiling"), "{err}");
    Ok(())
}

#[test]
fn unimplemented_entries_name_themselves() {
    let api = spillway_ort::api();
    // SAFETY: the stand-ins read none of their arguments; every status they return is
    // released once through the same table.
    unsafe {
        for (name, status) in [
            (
                "CreateCustomOpDomain",
                (api.CreateCustomOpDomain)(std::ptr::null(), std::ptr::null_mut()),
            ),
            (
                "RunAsync",
                (api.RunAsync)(
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    std::ptr::null(),
                    std::ptr::null(),
                    0,
                    std::ptr::null(),
                    0,
                    std::ptr::null_mut(),
                    None,
                    std::ptr::null_mut(),
                ),
            ),
        ] {
            assert!(!status.0.is_null(), "{name} returned success");
            assert_eq!(
                (api.GetErrorCode)(status.0),
                ort::sys::OrtErrorCode::ORT_NOT_IMPLEMENTED
            );
            let message = std::ffi::CStr::from_ptr((api.GetErrorMessage)(status.0));
            assert!(message.to_str().unwrap().contains(name), "{message:?}");
            (api.ReleaseStatus)(status.0);
        }
        // Null handles are errors, not crashes.
        let status = (api.SessionGetInputCount)(std::ptr::null(), std::ptr::null_mut());
        assert!(!status.0.is_null());
        let message = std::ffi::CStr::from_ptr((api.GetErrorMessage)(status.0));
        assert!(
            message
                .to_str()
                .unwrap()
                .starts_with("SessionGetInputCount"),
            "{message:?}"
        );
        (api.ReleaseStatus)(status.0);
    }
    assert!(spillway_ort::IMPLEMENTED.contains(&"Run"));
}

#[test]
fn cuda_provider_never_falls_back_silently() -> R {
    let bytes = mlp();
    let result = Session::builder(env())?
        .with_execution_providers([ort::ep::CUDA::default().with_device_id(0).build()])?
        .commit_from_memory(&bytes);
    match result {
        // No usable GPU (or a build without CUDA): creation fails and says why.
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains("cuda0"), "{message}");
        }
        // A GPU: the session runs there and gives the CPU's answer.
        Ok(mut session) => {
            let x = Array2::from_shape_fn((2, 4), |(i, j)| (i + j) as f32 * 0.5);
            let want = direct(
                &bytes,
                vec![(
                    "x",
                    spillway::Tensor::F32(x.clone().into_dyn().into_shared()),
                )],
            );
            let outputs = session.run(ort::inputs![TensorRef::from_array_view(&x)?])?;
            let got = outputs[0].try_extract_array::<f32>()?;
            for (a, b) in got.iter().zip(want[0].view::<f32>()?.iter()) {
                assert!((a - b).abs() <= 1e-5, "{a} vs {b}");
            }
        }
    }
    // A device that does not exist fails, whatever the machine.
    let err = Session::builder(env())?
        .with_execution_providers([ort::ep::CUDA::default().with_device_id(63).build()])?
        .commit_from_memory(&bytes)
        .map(|_| ())
        .expect_err("GPU 63 does not exist");
    assert!(err.to_string().contains("cuda63"), "{err}");
    Ok(())
}
