//! Quantized models against ONNX Runtime 1.31.1: small float models (random-weight Conv, MatMul
//! and Gemm graphs and the bundled inception block) quantized by `onnxruntime.quantization`
//! statically (QDQ, per tensor with int8 activations and per channel with uint8 activations)
//! and dynamically (int8 and uint8 weights), built at test time by
//! `models/quantized/make_quantized.py`.
//!
//! Each model runs in Spillway and in ORT twice: without graph optimizations (ORT's plain
//! QuantizeLinear / DequantizeLinear / integer kernels, the definition these models spell out)
//! and with them (ORT fuses DQ→Conv→Q into QLinearConv and rounds once, in integers). Against
//! the first, QDQ outputs must agree within one output quantization step, dynamic ones within
//! float rounding; against the second (ORT's int8 result) within two steps. The table printed
//! gives the largest difference and how many positions differ at all.

use std::path::{Path, PathBuf};
use std::process::Command;

use spillway::{OptimizationLevel, Session};
use spillway_kernels::Tensor;
use spillway_tests::oracle::{Oracle, OrtConfig};
use spillway_tests::{seeded_inputs, venv, workspace_root};

/// Largest |a − b| (NaN against NaN equal, NaN against a number infinite), how many positions
/// differ by more than `1e-6 · max|a|`, and the count of positions.
fn differences(want: &Tensor, got: &Tensor) -> (f64, usize, usize) {
    assert_eq!(want.shape(), got.shape(), "shapes differ");
    let w = want.to_f64_vec().unwrap();
    let g = got.to_f64_vec().unwrap();
    let scale = w.iter().fold(0f64, |m, x| m.max(x.abs()));
    let mut worst = 0f64;
    let mut differing = 0;
    for (a, b) in w.iter().zip(&g) {
        let d = match (a.is_nan(), b.is_nan()) {
            (true, true) => 0.0,
            (false, false) => (a - b).abs(),
            _ => f64::INFINITY,
        };
        worst = worst.max(d);
        differing += usize::from(d > 1e-6 * scale.max(1e-30));
    }
    (worst, differing, w.len())
}

/// Builds the models into a folder of their own per test (tests run in parallel).
fn models(test: &str) -> (PathBuf, serde_json::Value) {
    let out = workspace_root().join("target/quantized-models").join(test);
    let status = Command::new(venv().join("bin/python"))
        .arg(workspace_root().join("models/quantized/make_quantized.py"))
        .arg(&out)
        .env("PYTHONWARNINGS", "ignore")
        .output()
        .expect("running make_quantized.py");
    assert!(
        status.status.success(),
        "make_quantized.py failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    (out, serde_json::from_str(&manifest).unwrap())
}

fn run_ort(path: &Path, optimize: bool, inputs: &[(String, Tensor)]) -> Vec<Tensor> {
    Oracle::load(
        path,
        OrtConfig {
            optimize,
            ..OrtConfig::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: ORT load: {e}", path.display()))
    .run(inputs)
    .unwrap_or_else(|e| panic!("{}: ORT run: {e}", path.display()))
}

fn ours(path: &Path, level: OptimizationLevel, inputs: &[(String, Tensor)]) -> Vec<Tensor> {
    let session = Session::builder()
        .with_optimization(level)
        .commit_from_file(path)
        .unwrap_or_else(|e| panic!("{}: spillway load: {e}", path.display()));
    let out = session
        .run(inputs.to_vec())
        .unwrap_or_else(|e| panic!("{}: spillway run: {e}", path.display()));
    out.into_tensors()
}

/// Spillway without QDQ fusion (`Basic`) against ORT without optimizations, and Spillway with
/// it (the default `All`) against ORT with them.
#[test]
fn quantized_models_match_onnx_runtime() {
    let (_, manifest) = models("differential");
    let mut failures = Vec::new();
    println!(
        "| model | output | step | unfused: max diff (differing/total) | fused: max diff (differing/total) |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (name, entry) in manifest.as_object().unwrap() {
        let path = PathBuf::from(entry["file"].as_str().unwrap());
        let probe = Session::builder().commit_from_file(&path).unwrap();
        let inputs = seeded_inputs(&probe, 1);
        let names: Vec<String> = probe.outputs().iter().map(|o| o.name.clone()).collect();
        let basic = ours(&path, OptimizationLevel::Basic, &inputs);
        let extended = ours(&path, OptimizationLevel::All, &inputs);
        let plain = run_ort(&path, false, &inputs);
        let optimized = run_ort(&path, true, &inputs);
        for (i, out) in names.iter().enumerate() {
            let step = entry["steps"][out.as_str()].as_f64();
            let (dp, np, total) = differences(&plain[i], &basic[i]);
            let (dopt, nopt, _) = differences(&optimized[i], &extended[i]);
            println!(
                "| {name} | {out} | {} | {dp:.3e} ({np}/{total}) | {dopt:.3e} ({nopt}/{total}) |",
                step.map_or("float".into(), |s| format!("{s:.3e}"))
            );
            // QDQ outputs are multiples of the step: one step apart at most. Float outputs
            // (dynamic models) within float rounding of the output's range.
            let scale = plain[i]
                .to_f64_vec()
                .unwrap()
                .iter()
                .fold(0f64, |m, x| m.max(x.abs()));
            let limit = match step {
                Some(s) => 1.01 * s,
                None => 1e-5 * scale,
            };
            if dp.is_nan() || dp > limit || dopt.is_nan() || dopt > limit {
                failures.push(format!(
                    "{name}/{out}: {dp:e} unfused, {dopt:e} fused (limit {limit:e})"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The QDQ fusion pass on its own: every `Conv` and `MatMul` of the static models becomes a
/// `QLinearConv` / `QLinearMatMul`, and the rewritten graph computes within one output step of
/// the original.
#[test]
fn qdq_fusion_makes_integer_ops() {
    let (_, manifest) = models("fusion");
    for name in [
        "conv_net_qdq_s8",
        "conv_net_qdq_u8_per_channel",
        "matmul_net_qdq_s8",
    ] {
        let entry = &manifest[name];
        let path = PathBuf::from(entry["file"].as_str().unwrap());
        let data = std::fs::read(&path).unwrap();
        let mut graph =
            spillway::onnx::load_bytes(bytes::Bytes::copy_from_slice(&data), None).unwrap();
        spillway::graph::shape_inference::infer(&mut graph);
        let floats = |g: &spillway::graph::Graph| {
            g.nodes
                .iter()
                .filter(|n| matches!(n.op_type.as_str(), "Conv" | "MatMul"))
                .count()
        };
        let before = floats(&graph);
        let fused = spillway::graph::passes::fuse_qdq(&mut graph);
        assert!(
            before > 0 && fused == before,
            "{name}: fused {fused} of {before}"
        );
        assert_eq!(floats(&graph), 0, "{name}");
        let plain = Session::builder().with_optimization(OptimizationLevel::Disabled);
        let probe = plain.clone().commit_from_file(&path).unwrap();
        let inputs = seeded_inputs(&probe, 1);
        let want = probe.run(inputs.clone()).unwrap();
        let got = plain.commit_graph(graph).unwrap().run(inputs).unwrap();
        let step = entry["steps"]
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .as_f64()
            .unwrap();
        for i in 0..want.len() {
            let (d, _, _) = differences(&want[i], &got[i]);
            assert!(d <= 1.01 * step, "{name}: output {i} differs by {d}");
        }
    }
}

/// Speed of the int8 path against ORT's, same model, same thread count (one), same process:
/// `conv_wide` (two 3x3 Convs, 32 -> 64 -> 64 channels on 28x28) quantized statically (QDQ,
/// int8). Prints the ratio; asserts nothing about time. Run in release:
/// `cargo test --release -p spillway-tests --test quantized_ort -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn int8_speed_against_onnx_runtime() {
    let (_, manifest) = models("speed");
    for name in [
        "conv_wide_qdq_s8",
        "conv_wide_qdq_u8_per_channel",
        "conv_wide_dynamic_qint8",
    ] {
        let path = PathBuf::from(manifest[name]["file"].as_str().unwrap());
        let session = Session::builder()
            .with_intra_op_threads(1)
            .commit_from_file(&path)
            .unwrap();
        let inputs = seeded_inputs(&session, 1);
        let mut oracle = Oracle::load(&path, OrtConfig::default()).unwrap();
        let runs = 30;
        let ours =
            spillway_tests::median_wall_ms(runs, &|| session.run(inputs.clone()).map(|_| ()))
                .unwrap();
        let oracle = std::cell::RefCell::new(&mut oracle);
        let theirs =
            spillway_tests::median_wall_ms(runs, &|| oracle.borrow_mut().run(&inputs).map(|_| ()))
                .unwrap();
        println!(
            "{name}: spillway / ORT median time ratio {:.2} (1 thread each, {runs} runs)",
            ours / theirs
        );
    }
}
