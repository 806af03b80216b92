//! The convolutional classifiers of the benchmark zoo (`models/zoo/`, exported by
//! `models/export.sh`; not committed) against ONNX Runtime 1.31.1, with Spillway's default
//! optimizations (Conv + activation fusion included) and without: every output within relative
//! L2 error 1e-4 of ORT's, or within twice what ORT's own optimized and unoptimized runs differ
//! by. The zoo is not committed, so the test is ignored by default; run it with
//! `cargo test -p spillway-tests --test zoo -- --ignored` after `models/export.sh` (every model
//! must then be present).

use spillway::{OptimizationLevel, Session};
use spillway_tests::oracle::{Oracle, OrtConfig};
use spillway_tests::{relative_l2, seeded_inputs, workspace_root};

const TOLERANCE: f64 = 1e-4;

/// Zoo models made of convolutions and activations (the detectors and transformers are left to
/// the benchmark harness).
const MODELS: &[&str] = &[
    "squeezenet1_1",
    "googlenet",
    "resnet50",
    "inception_v3",
    "randwire",
];

#[test]
#[ignore = "needs the exported zoo (models/export.sh), which is not committed"]
fn zoo_classifiers_match_onnx_runtime() {
    println!("| model | fused nodes | vs ORT (fused) | vs ORT (basic) | ORT opt vs no-opt |");
    println!("| --- | --- | --- | --- | --- |");
    let mut failures = Vec::new();
    for name in MODELS {
        let path = workspace_root().join(format!("models/zoo/{name}.onnx"));
        assert!(
            path.exists(),
            "{} is absent: run models/export.sh",
            path.display()
        );
        let fused = Session::builder().commit_from_file(&path).unwrap();
        let basic = Session::builder()
            .with_optimization(OptimizationLevel::Basic)
            .commit_from_file(&path)
            .unwrap();
        let inputs = seeded_inputs(&fused, 1);
        let ort = |optimize| {
            Oracle::load(
                &path,
                OrtConfig {
                    optimize,
                    ..OrtConfig::default()
                },
            )
            .unwrap()
            .run(&inputs)
            .unwrap()
        };
        let (want, ort_plain) = (ort(true), ort(false));
        let worst = |session: &Session| {
            let got = session.run(inputs.clone()).unwrap();
            (0..want.len())
                .map(|i| relative_l2(&want[i], &got[i]).unwrap())
                .fold(0.0, f64::max)
        };
        let own = (0..want.len())
            .map(|i| relative_l2(&want[i], &ort_plain[i]).unwrap())
            .fold(0.0, f64::max);
        let (e_fused, e_basic) = (worst(&fused), worst(&basic));
        let count = fused
            .graph()
            .nodes
            .iter()
            .filter(|n| n.op_type == "FusedConv")
            .count();
        println!("| {name} | {count} | {e_fused:.2e} | {e_basic:.2e} | {own:.2e} |");
        let bound = TOLERANCE.max(2.0 * own);
        if e_fused > bound || e_basic > bound {
            failures.push(format!(
                "{name}: {e_fused:.2e} / {e_basic:.2e} > {bound:.2e}"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
