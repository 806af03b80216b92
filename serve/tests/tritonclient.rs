//! Compatibility with a client no one here wrote: NVIDIA's `tritonclient` (Python; HTTP and
//! gRPC, JSON and binary tensors) drives the server through `tritonclient_check.py`, which
//! also checks health, metadata, config and error statuses; this test compares every output
//! it received with a direct `Session::run` on the inputs it sent.
//!
//! Needs `.venv` (scripts/venv.sh installs the pinned tritonclient); skipped, saying so, only
//! when `.venv` is missing.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use serde_json::Value as Json;
use spillway::Tensor;
use spillway_serve::datatype::{self, Datatype};
use spillway_serve::{ModelOptions, SessionModel};

fn tensors(spec: &serde_json::Map<String, Json>) -> Vec<(String, Tensor)> {
    spec.iter()
        .map(|(name, t)| {
            let dt = Datatype::parse(t["datatype"].as_str().expect("datatype")).expect("known");
            let shape: Vec<i64> = serde_json::from_value(t["shape"].clone()).expect("shape");
            let tensor = datatype::tensor_from_json(dt, &shape, &t["data"], name).expect("decodes");
            (name.clone(), tensor)
        })
        .collect()
}

fn close(a: &Json, b: &Json) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_f64() || b.is_f64() => (x - y).abs() <= 1e-6 * (1.0 + y.abs()),
        _ => a == b,
    }
}

/// The `dtypes` model without BF16, which tritonclient sends only as binary data.
fn python_dtypes() -> spillway::Session {
    let types: Vec<(&str, i32)> = DTYPES
        .iter()
        .copied()
        .filter(|(s, _)| *s != "bf16")
        .collect();
    session_of(&dtypes_model_of(&types))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tritonclient_http_and_grpc_match_a_direct_run() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join(".venv/bin/python");
    if !python.exists() {
        eprintln!(
            "SKIPPED: {} is missing (run scripts/venv.sh for tritonclient)",
            python.display()
        );
        return;
    }
    let server = start(vec![
        (
            "inception_block",
            Arc::new(SessionModel::new(bundled_session())),
            ModelOptions {
                instances: 2,
                queue: 16,
            },
        ),
        (
            "dtypes",
            Arc::new(SessionModel::new(python_dtypes())),
            ModelOptions::default(),
        ),
    ])
    .await;
    let out =
        std::env::temp_dir().join(format!("spillway-tritonclient-{}.json", std::process::id()));
    let args = [
        root.join("serve/tests/tritonclient_check.py")
            .display()
            .to_string(),
        "--http".into(),
        server.http_addr().expect("HTTP").to_string(),
        "--grpc".into(),
        server.grpc_addr().expect("gRPC").to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    let run =
        tokio::task::spawn_blocking(move || std::process::Command::new(python).args(args).output())
            .await
            .expect("task")
            .expect("python starts");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "tritonclient_check.py failed (is tritonclient installed? run scripts/venv.sh):\n{stderr}"
    );
    eprintln!("{}", String::from_utf8_lossy(&run.stdout).trim());
    let report: Json =
        serde_json::from_slice(&std::fs::read(&out).expect("result file")).expect("JSON");
    let _ = std::fs::remove_file(&out);

    let sessions = [
        ("inception_block", bundled_session()),
        ("dtypes", python_dtypes()),
    ];
    let mut compared = 0;
    for (model, session) in &sessions {
        let inputs = tensors(report["inputs"][model].as_object().expect("inputs"));
        let want = session.run(inputs).expect("direct run");
        for path in ["http_json", "http_binary", "grpc"] {
            let got = report["results"][path][model].as_object().expect("results");
            assert_eq!(
                got.len(),
                want.len(),
                "{path} {model}: every output came back"
            );
            for (name, t) in want.iter() {
                let dt = Datatype::from_dtype(t.dtype()).expect("datatype");
                let g = &got[name];
                assert_eq!(g["datatype"], dt.name(), "{path} {model} {name}");
                assert_eq!(
                    g["shape"],
                    serde_json::json!(t.shape()),
                    "{path} {model} {name}"
                );
                let w = datatype::tensor_to_json(t, dt);
                let (w, g) = (
                    w.as_array().expect("array"),
                    g["data"].as_array().expect("array"),
                );
                assert_eq!(w.len(), g.len(), "{path} {model} {name}");
                for (i, (a, b)) in g.iter().zip(w).enumerate() {
                    assert!(
                        close(a, b),
                        "{path} {model} {name}[{i}]: got {a}, direct run {b}"
                    );
                }
                compared += 1;
            }
        }
    }
    assert_eq!(
        compared,
        3 * (1 + 13),
        "every output of every path was compared"
    );
    let errors = report["errors"].as_object().expect("errors");
    assert_eq!(errors.len(), 6, "{errors:?}");
    server.shutdown();
    server.wait().await.expect("clean stop");
}
