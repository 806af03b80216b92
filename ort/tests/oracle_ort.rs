//! The same `ort` calls as the tests on Spillway, on ONNX Runtime itself (the venv's
//! `onnxruntime` wheel, loaded through `ort`'s `load-dynamic` like the differential tests): its
//! outputs agree with a direct `spillway::Session::run`, which the tests on Spillway match. A
//! separate test binary, so that this process never calls `ort::set_api`.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use common::{bundled_model, mlp};
use ndarray::{Array, ArrayD, IxDyn};
use ort::environment::Environment;
use ort::session::Session;
use ort::value::TensorRef;

/// The project venv (`SPILLWAY_VENV`, else `<root>/.venv`): a missing venv is a failed test.
fn venv() -> PathBuf {
    let venv = std::env::var_os("SPILLWAY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv"));
    assert!(
        venv.join("bin/python").exists(),
        "the project venv is missing at {}: run scripts/venv.sh (the README's test command does)",
        venv.display()
    );
    venv
}

fn onnx_runtime() -> &'static Environment {
    static ENV: OnceLock<Environment> = OnceLock::new();
    ENV.get_or_init(|| {
        let lib = std::fs::read_dir(venv().join("lib"))
            .expect("venv has lib/")
            .filter_map(|e| e.ok())
            .map(|e| {
                e.path()
                    .join("site-packages/onnxruntime/capi/libonnxruntime.so.1.31.1")
            })
            .find(|p| p.exists())
            .expect("the venv has onnxruntime 1.31.1");
        ort::init_from(&lib)
            .expect("loading ONNX Runtime")
            .with_name("spillway-ort-oracle")
            .build()
            .expect("environment")
    })
}

/// Runs `model` on ONNX Runtime with one float input, returns the first output.
fn through_onnx_runtime(model: &[u8], input: &ArrayD<f32>) -> ArrayD<f32> {
    let mut session = Session::builder(onnx_runtime())
        .expect("builder")
        .with_intra_threads(1)
        .expect("threads")
        .commit_from_memory(model)
        .expect("ONNX Runtime loads the model");
    let outputs = session
        .run(ort::inputs![
            TensorRef::from_array_view(input).expect("tensor")
        ])
        .expect("ONNX Runtime runs");
    outputs[0]
        .try_extract_array::<f32>()
        .expect("a float output")
        .to_owned()
}

fn through_spillway(model: &[u8], name: &str, input: &ArrayD<f32>) -> ArrayD<f32> {
    let session = spillway::Session::builder()
        .commit_from_memory(model)
        .expect("Spillway loads the model");
    let outputs = session
        .run([(name, spillway::Tensor::F32(input.clone().into_shared()))])
        .expect("Spillway runs");
    outputs
        .tensor_at(0)
        .unwrap()
        .view::<f32>()
        .unwrap()
        .to_owned()
}

fn assert_close(a: &ArrayD<f32>, b: &ArrayD<f32>, tolerance: f32) {
    assert_eq!(a.shape(), b.shape());
    for (x, y) in a.iter().zip(b.iter()) {
        assert!((x - y).abs() <= tolerance * (1.0 + y.abs()), "{x} vs {y}");
    }
}

#[test]
fn onnx_runtime_agrees_on_the_bundled_model() {
    let model = std::fs::read(bundled_model()).unwrap();
    let input = Array::from_shape_fn(IxDyn(&[1, 3, 64, 64]), |i| {
        ((i[1] * 31 + i[2] * 7 + i[3]) % 17) as f32 / 17.0 - 0.5
    });
    let ort = through_onnx_runtime(&model, &input);
    assert_close(&ort, &through_spillway(&model, "input", &input), 1e-5);
}

#[test]
fn onnx_runtime_agrees_on_light_models() {
    let input = Array::from_shape_fn(IxDyn(&[3, 4]), |i| i[0] as f32 * 0.7 - i[1] as f32 * 0.2);
    let model = mlp();
    assert_close(
        &through_onnx_runtime(&model, &input),
        &through_spillway(&model, "x", &input),
        1e-6,
    );
    let upsample = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/upsample.onnx"),
    )
    .unwrap();
    let image = Array::from_shape_fn(IxDyn(&[1, 8, 6, 3]), |i| (i[1] * 6 + i[2] + i[3]) as f32);
    let ort = through_onnx_runtime(&upsample, &image);
    assert_eq!(ort.shape(), &[1, 16, 12, 3]);
    assert_close(
        &ort,
        &through_spillway(&upsample, "up_sampling2d_input:0", &image),
        0.0,
    );
}
