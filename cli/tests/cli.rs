//! The `spillway` command line on bad input: closed pipes, bad paths, bad files, repeated or
//! colliding names. Each gets a message and an exit status, never a panic.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use prost::Message;
use spillway::onnx::proto::{
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto,
    ValueInfoProto, tensor_shape_proto, type_proto,
};

fn spillway() -> Command {
    Command::new(env!("CARGO_BIN_EXE_spillway"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spillway-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn assert_no_panic(out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
}

/// Fails with a message containing `expected` (and no panic).
fn assert_fails_saying(out: Output, expected: &str) {
    assert_no_panic(&out);
    assert!(!out.status.success(), "should fail: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(expected), "'{expected}' not in: {stderr}");
}

fn float_info(name: &str, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| tensor_shape_proto::Dimension {
            value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `x [2] → Relu → a/b` and `x → Neg → a_b`: two outputs whose file names collide.
fn colliding_outputs_model(dir: &Path) -> PathBuf {
    let node = |op: &str, out: &str| NodeProto {
        op_type: Some(op.into()),
        name: Some(op.into()),
        input: vec!["x".into()],
        output: vec![out.into()],
        ..Default::default()
    };
    write_model(
        dir,
        GraphProto {
            name: Some("collide".into()),
            node: vec![node("Relu", "a/b"), node("Neg", "a_b")],
            input: vec![float_info("x", &[2])],
            output: vec![float_info("a/b", &[2]), float_info("a_b", &[2])],
            ..Default::default()
        },
    )
}

/// Writes `graph` as an opset-13 model to `dir/<graph name>.onnx`.
fn write_model(dir: &Path, graph: GraphProto) -> PathBuf {
    let path = dir.join(format!("{}.onnx", graph.name.as_deref().unwrap_or("model")));
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        }],
        graph: Some(graph),
        ..Default::default()
    };
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

#[test]
fn a_closed_standard_output_ends_the_program_quietly() {
    for args in [&["ops"][..], &["run", "--repeat", "1"][..]] {
        let mut child = spillway()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the program writes: `spillway … | head -0`.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_no_panic(&out);
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
}

#[test]
fn bad_model_paths_say_what_is_wrong() {
    let dir = scratch("paths");
    let run = |path: &Path| spillway().arg("run").arg(path).output().unwrap();
    assert_fails_saying(run(&dir), "not a file");
    let empty = dir.join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    assert_fails_saying(run(&empty), "empty");
    assert_fails_saying(run(&dir.join("missing.onnx")), "No such file");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_repeated_input_name_is_refused() {
    let dir = scratch("repeat");
    let npy = dir.join("x.npy");
    let x = ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[2]));
    ndarray_npy::write_npy(&npy, &x).unwrap();
    let model = colliding_outputs_model(&dir);
    let spec = format!("x={}", npy.display());
    let out = spillway()
        .args(["run", "--repeat", "1", "--input", &spec, "--input", &spec])
        .arg(&model)
        .output()
        .unwrap();
    assert_fails_saying(out, "more than once");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_truncated_npy_file_says_so() {
    let dir = scratch("npy");
    let npy = dir.join("x.npy");
    let x = ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[2]));
    ndarray_npy::write_npy(&npy, &x).unwrap();
    let bytes = std::fs::read(&npy).unwrap();
    std::fs::write(&npy, &bytes[..bytes.len() - 3]).unwrap();
    let out = spillway()
        .args(["run", "--repeat", "1", "--input"])
        .arg(format!("x={}", npy.display()))
        .arg(colliding_outputs_model(&dir))
        .output()
        .unwrap();
    assert_fails_saying(out, "not a readable .npy file");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn outputs_that_would_share_a_file_are_refused() {
    let dir = scratch("collide");
    let out = spillway()
        .args(["run", "--repeat", "1", "--output-dir"])
        .arg(dir.join("out"))
        .arg(colliding_outputs_model(&dir))
        .output()
        .unwrap();
    assert_fails_saying(out, "would both be written to a_b.npy");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_huge_default_dimension_is_an_error_not_an_abort() {
    // The bundled model's batch is symbolic: 10^11 × 3 × 64 × 64 floats is 4.9 PB, and
    // 10^16 of them overflows.
    for dims in ["100000000000", "10000000000000000"] {
        let out = spillway()
            .args(["run", "--repeat", "1", "--dim-default", dims])
            .output()
            .unwrap();
        assert_fails_saying(out, "larger than");
    }
}

/// `x [batch, 3] → Relu → y`: one symbolic dimension, named `batch`.
fn batch_model(dir: &Path) -> PathBuf {
    let mut x = float_info("x", &[0, 3]);
    if let Some(type_proto::Value::TensorType(t)) = x.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.shape.as_mut().unwrap().dim[0].value = Some(
            tensor_shape_proto::dimension::Value::DimParam("batch".into()),
        );
    }
    write_model(
        dir,
        GraphProto {
            name: Some("batch".into()),
            node: vec![NodeProto {
                op_type: Some("Relu".into()),
                name: Some("relu".into()),
                input: vec!["x".into()],
                output: vec!["y".into()],
                ..Default::default()
            }],
            input: vec![x],
            output: vec![ValueInfoProto {
                name: Some("y".into()),
                ..Default::default()
            }],
            ..Default::default()
        },
    )
}

#[test]
fn a_named_dimension_takes_its_size_and_the_inputs_are_saved() {
    let dir = scratch("dims");
    let out = spillway()
        .args(["run", "--repeat", "1", "--dim", "batch=4", "--save-inputs"])
        .arg(dir.join("inputs"))
        .arg(batch_model(&dir))
        .output()
        .unwrap();
    assert_no_panic(&out);
    assert!(out.status.success(), "{out:?}");
    let x: ndarray::ArrayD<f32> = ndarray_npy::read_npy(dir.join("inputs").join("x.npy")).unwrap();
    assert_eq!(x.shape(), &[4, 3]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_dimension_no_input_has_is_refused() {
    let dir = scratch("nodim");
    let out = spillway()
        .args(["run", "--repeat", "1", "--dim", "height=2"])
        .arg(batch_model(&dir))
        .output()
        .unwrap();
    assert_fails_saying(
        out,
        "no input has a dimension of that name (the symbolic ones: batch)",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn knobs_lists_every_environment_variable_with_its_value() {
    let out = spillway()
        .arg("knobs")
        .env("SPILLWAY_CACHE_DIR", "/tmp/spillway-knobs-test")
        .env_remove("SPILLWAY_SKIPPED_LOG")
        .output()
        .unwrap();
    assert_no_panic(&out);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for knob in spillway::knobs::KNOBS {
        assert!(
            stdout.contains(knob.name),
            "{} not in:\n{stdout}",
            knob.name
        );
        assert!(stdout.contains(knob.description), "{stdout}");
    }
    assert!(
        stdout.contains("SPILLWAY_CACHE_DIR = /tmp/spillway-knobs-test"),
        "{stdout}"
    );
    assert!(
        stdout.contains("SPILLWAY_SKIPPED_LOG = (unset)"),
        "{stdout}"
    );
    // The switches that chose what a session computes are options now.
    for gone in [
        "SPILLWAY_BLOCKED",
        "SPILLWAY_FOUR",
        "SPILLWAY_WINOGRAD",
        "SPILLWAY_SPIN",
        "SPILLWAY_PIN_THREADS",
    ] {
        assert!(!stdout.contains(gone), "{gone} listed:\n{stdout}");
    }
}

/// `spillway run --repeat 1` of the bundled model with `flags` succeeds (and does not panic).
fn assert_bundled_model_runs_with(flags: &[&str]) {
    let out = spillway()
        .args(["run", "--repeat", "1"])
        .args(flags)
        .output()
        .unwrap();
    assert_no_panic(&out);
    assert!(out.status.success(), "{flags:?}: {out:?}");
}

#[test]
fn the_session_option_flags_run_the_bundled_model() {
    assert_bundled_model_runs_with(&[
        "--gemm",
        "generic",
        "--winograd",
        "never",
        "--no-blocked",
        "--no-spin",
        "--no-four-panels",
    ]);
    assert_bundled_model_runs_with(&[
        "--gemm",
        "avx2",
        "--winograd",
        "always",
        "--pin-threads",
        "--spin",
    ]);
}

#[test]
fn an_unknown_gemm_or_winograd_choice_is_refused() {
    let out = spillway().args(["run", "--gemm", "sse2"]).output().unwrap();
    assert_fails_saying(out, "unknown GEMM instruction set");
    let out = spillway()
        .args(["run", "--winograd", "sometimes"])
        .output()
        .unwrap();
    assert_fails_saying(out, "unknown Winograd choice");
}

fn inception_block() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/small/inception_block.onnx")
}

/// Nothing on standard error but what `allowed` lets through: no progress bar drawn into a
/// pipe (no carriage returns, no escape sequences, no bar).
fn assert_no_progress_drawn(out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains('\r'), "{stderr:?}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(!stderr.contains("[="), "{stderr:?}");
    assert!(!stderr.contains("runs ("), "{stderr:?}");
    assert!(!stderr.contains("nodes ("), "{stderr:?}");
}

/// Succeeded without a panic and without drawing a progress bar into the pipe; its stdout.
fn quiet_success_stdout(out: &Output) -> String {
    assert_no_panic(out);
    assert!(out.status.success(), "{out:?}");
    assert_no_progress_drawn(out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn profile_and_schedule_name_devices_as_the_engine_does_and_draw_no_bars_into_a_pipe() {
    let dir = scratch("schedule");
    let cost = dir.join("cost.json");
    let out = spillway()
        .args(["profile", "--virtual", "1", "--repeats", "1", "--out"])
        .arg(&cost)
        .arg(inception_block())
        .output()
        .unwrap();
    let stdout = quiet_success_stdout(&out);
    // The sums per device, by the engine's device names (a Virtual device is not a "Gpu").
    assert!(
        stdout.contains("cpu ") && stdout.contains("virtual0 "),
        "{stdout}"
    );
    assert!(
        !stdout.contains("Gpu") && !stdout.contains("Cpu"),
        "{stdout}"
    );

    let (gantt, trace) = (dir.join("gantt.svg"), dir.join("trace.json"));
    let out = spillway()
        .args([
            "schedule",
            "--virtual",
            "1",
            "--repeat",
            "2",
            "--policy",
            "heft",
        ])
        .arg("--cost-model")
        .arg(&cost)
        .arg("--gantt")
        .arg(&gantt)
        .arg("--trace")
        .arg(&trace)
        .arg(inception_block())
        .output()
        .unwrap();
    let stdout = quiet_success_stdout(&out);
    assert!(stdout.contains("cpu busy"), "{stdout}");
    assert!(stdout.contains("virtual0 busy"), "{stdout}");

    // The Gantt chart: a time axis, rows named like the devices, a legend.
    let svg = std::fs::read_to_string(&gantt).unwrap();
    assert!(svg.contains(r#"<g class="axis">"#), "{svg}");
    assert!(svg.contains(">0 µs</text>"), "{svg}");
    assert!(svg.contains(">cpu lane 0</text>"), "{svg}");
    assert!(svg.contains(">virtual0 stream 0</text>"), "{svg}");
    assert!(svg.contains(r#"<g class="legend">"#), "{svg}");
    assert!(svg.contains(">Concat</text>"), "{svg}");

    // The trace: one named process per device and named tracks.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let names = |kind: &str| -> Vec<String> {
        json["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == kind)
            .map(|e| e["args"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("process_name"), ["cpu", "virtual0"]);
    let threads = names("thread_name");
    assert!(threads.iter().any(|t| t == "lane 0"), "{threads:?}");
    assert!(
        threads
            .iter()
            .all(|t| t.starts_with("lane ") || t == "copies"),
        "{threads:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
