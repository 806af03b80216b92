//! The engines under test behind one interface, and how their outputs are compared.

use std::time::Instant;

use anyhow::{Result, anyhow};
use spillway::{Devices, Placement, Session, Tensor};
use spillway_tests::oracle::{Oracle, OrtConfig};

use crate::inputs::ZooModel;

/// One engine configuration.
pub enum Engine {
    /// A Spillway session.
    Spillway(Box<Session>),
    /// ONNX Runtime through `spillway_tests::oracle`.
    Ort(Oracle),
    /// tract (the `tract` feature).
    #[cfg(feature = "tract")]
    Tract(Box<crate::tract::Tract>),
}

/// Every configuration by label, tract's two last.
const ALL: [&str; 7] = [
    "spillway-1lane",
    "spillway-2lane-auto",
    "ort-seq-1t",
    "ort-seq-2t",
    "ort-parallel",
    "tract-1t",
    "tract-2t",
];

/// The configurations the bench runs: tract's only with the `tract` feature.
pub const CONFIGS: &[&str] = if cfg!(feature = "tract") {
    &ALL
} else {
    ALL.split_at(ALL.len() - 2).0
};

/// Whether the label is one of ONNX Runtime's configurations.
pub fn is_ort(label: &str) -> bool {
    label.starts_with("ort")
}

/// Whether the label is one of tract's configurations.
pub fn is_tract(label: &str) -> bool {
    label.starts_with("tract")
}

impl Engine {
    /// Loads `model` in the configuration called `label`.
    pub fn load(label: &str, model: &ZooModel) -> Result<Engine> {
        let ort = |intra_threads, parallel| -> Result<Engine> {
            Ok(Engine::Ort(Oracle::load(
                &model.path,
                OrtConfig {
                    intra_threads,
                    parallel,
                    optimize: true,
                },
            )?))
        };
        #[cfg(feature = "tract")]
        let tract = |threads| -> Result<Engine> {
            Ok(Engine::Tract(Box::new(crate::tract::Tract::load(
                model, threads,
            )?)))
        };
        match label {
            "spillway-1lane" => Ok(Engine::Spillway(Box::new(
                Session::builder().commit_from_file(&model.path)?,
            ))),
            "spillway-2lane-auto" => {
                let mut b = Session::builder()
                    .with_devices(Devices::cpu().with_cpu_lanes(2))
                    .with_placement(Placement::Auto);
                for (name, _, shape) in &model.inputs {
                    b = b.with_profile_shape(name, shape);
                }
                Ok(Engine::Spillway(Box::new(b.commit_from_file(&model.path)?)))
            }
            "ort-seq-1t" => ort(1, false),
            "ort-seq-2t" => ort(2, false),
            "ort-parallel" => ort(1, true),
            #[cfg(feature = "tract")]
            "tract-1t" => tract(1),
            #[cfg(feature = "tract")]
            "tract-2t" => tract(2),
            other => Err(anyhow!("unknown configuration {other}")),
        }
    }

    /// Runs once; returns the outputs in the model's order and the wall time in ms.
    pub fn run(&mut self, inputs: &[(String, Tensor)]) -> Result<(Vec<Tensor>, f64)> {
        let start = Instant::now();
        let out = match self {
            Engine::Spillway(s) => s.run(inputs.iter().cloned())?.into_tensors(),
            Engine::Ort(o) => o.run(inputs)?,
            #[cfg(feature = "tract")]
            Engine::Tract(t) => t.run(inputs)?,
        };
        Ok((out, start.elapsed().as_secs_f64() * 1e3))
    }
}

/// The largest relative L2 error, over the outputs, of `got` against `want`
/// (`‖got − want‖ / ‖want‖`, absolute when `want` is zero). Outputs of different shapes or
/// counts are an error: that is a wrong answer, not a small one.
pub fn relative_l2(got: &[Tensor], want: &[Tensor]) -> Result<f64> {
    if got.len() != want.len() {
        return Err(anyhow!(
            "{} outputs, ONNX Runtime gave {}",
            got.len(),
            want.len()
        ));
    }
    let mut worst = 0.0f64;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.shape() != w.shape() {
            return Err(anyhow!(
                "output {i} has shape {:?}, ONNX Runtime gave {:?}",
                g.shape(),
                w.shape()
            ));
        }
        let (g, w) = (g.to_f64_vec()?, w.to_f64_vec()?);
        let (mut diff, mut norm) = (0.0f64, 0.0f64);
        for (a, b) in g.iter().zip(&w) {
            diff += (a - b) * (a - b);
            norm += b * b;
        }
        let err = if norm > 0.0 {
            (diff / norm).sqrt()
        } else {
            diff.sqrt()
        };
        worst = worst.max(if err.is_nan() { f64::INFINITY } else { err });
    }
    Ok(worst)
}
