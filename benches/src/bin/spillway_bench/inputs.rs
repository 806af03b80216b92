//! The zoo's models and their seeded inputs: shapes from `check.json` (the shapes the zoo was
//! verified with), else from `manifest.json` with symbolic dimensions bound to defaults.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use spillway::Tensor;

/// One model of the zoo.
pub struct ZooModel {
    /// Name in the manifest.
    pub name: String,
    /// The ONNX file.
    pub path: PathBuf,
    /// `(name, dtype, shape)` per input, in the model's order.
    pub inputs: Vec<(String, String, Vec<usize>)>,
}

/// Reads the manifest (and `check.json` beside it when present).
pub fn zoo(dir: &Path) -> Result<Vec<ZooModel>> {
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json"))
            .with_context(|| format!("reading {}/manifest.json", dir.display()))?,
    )?;
    let check: Value = std::fs::read_to_string(dir.join("check.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let mut out = Vec::new();
    for m in manifest["models"].as_array().into_iter().flatten() {
        let name = m["name"].as_str().unwrap_or_default().to_string();
        let file = m["file"].as_str().unwrap_or_default();
        let checked = &check["models"][&name]["input_shapes"];
        let mut inputs = Vec::new();
        for input in m["inputs"].as_array().into_iter().flatten() {
            let iname = input["name"].as_str().unwrap_or_default().to_string();
            let dtype = input["dtype"].as_str().unwrap_or("float").to_string();
            let shape = match checked[&iname].as_array() {
                Some(dims) => dims
                    .iter()
                    .filter_map(Value::as_u64)
                    .map(|d| d as usize)
                    .collect(),
                None => input["shape"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|d| {
                        d.as_u64()
                            .map_or_else(|| default_dim(d.as_str()), |v| v as usize)
                    })
                    .collect(),
            };
            inputs.push((iname, dtype, shape));
        }
        out.push(ZooModel {
            name,
            path: dir.join(file),
            inputs,
        });
    }
    Ok(out)
}

fn default_dim(symbol: Option<&str>) -> usize {
    match symbol {
        Some("seq") => 128,
        Some("dec_seq") => 32,
        Some("height") => 480,
        Some("width") => 640,
        _ => 1,
    }
}

/// A small seeded generator (SplitMix64): the same inputs on every run and machine.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Seeded inputs: floats uniform in [0, 1) (images are expected in that range), token ids
/// uniform in [0, 1000) (inside every zoo vocabulary), masks all ones.
pub fn make_inputs(model: &ZooModel, seed: u64) -> Result<Vec<(String, Tensor)>> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::new();
    for (name, dtype, shape) in &model.inputs {
        let n: usize = shape.iter().product();
        let t = match dtype.as_str() {
            "float" => Tensor::from_shape_vec(shape, (0..n).map(|_| rng.unit()).collect())?,
            "int64" if name.contains("mask") => Tensor::from_shape_vec(shape, vec![1i64; n])?,
            "int64" => {
                Tensor::from_shape_vec(shape, (0..n).map(|_| (rng.next() % 1000) as i64).collect())?
            }
            other => bail!("input {name} has dtype {other}, which the bench does not generate"),
        };
        out.push((name.clone(), t));
    }
    Ok(out)
}
