//! ONNX Runtime as the oracle: the `onnxruntime` wheel's shared library loaded through the
//! `ort` crate (`load-dynamic`), so errors are recoverable and nothing is downloaded.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, bail};
use ort::environment::Environment;
use ort::session::Session as OrtSession;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::{DynValue, TensorElementType, ValueType};
use spillway_kernels::Tensor;

use crate::site_packages;

/// The process-wide ORT environment, loaded once from the venv's `libonnxruntime.so.1.31.1`.
pub fn environment() -> Result<&'static Environment> {
    static ENV: OnceLock<Result<Environment, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let lib = site_packages().join("onnxruntime/capi/libonnxruntime.so.1.31.1");
        if !lib.exists() {
            return Err(format!("{} is missing: run scripts/venv.sh", lib.display()));
        }
        let builder =
            ort::init_from(&lib).map_err(|e| format!("loading {}: {e}", lib.display()))?;
        builder
            .with_name("spillway-oracle")
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| anyhow!("{e}"))
}

/// How ORT is configured for a run.
#[derive(Debug, Clone, Copy)]
pub struct OrtConfig {
    /// Intra-op threads.
    pub intra_threads: usize,
    /// ORT's parallel (inter-op) executor instead of the sequential one.
    pub parallel: bool,
    /// ORT's graph optimizations (fusions, constant folding); off gives ORT's plain kernels.
    pub optimize: bool,
}

impl Default for OrtConfig {
    fn default() -> Self {
        OrtConfig {
            intra_threads: 1,
            parallel: false,
            optimize: true,
        }
    }
}

/// A loaded ORT session.
pub struct Oracle {
    session: OrtSession,
}

impl Oracle {
    /// Loads `model` with all graph optimizations on.
    pub fn load(model: &Path, config: OrtConfig) -> Result<Oracle> {
        let session = Self::builder(config)?
            .commit_from_file(model)
            .with_context(|| format!("ORT loading {}", model.display()))?;
        Ok(Oracle { session })
    }

    /// Loads a model held in memory.
    pub fn load_bytes(model: &[u8], config: OrtConfig) -> Result<Oracle> {
        let session = Self::builder(config)?
            .commit_from_memory(model)
            .context("ORT loading a model from memory")?;
        Ok(Oracle { session })
    }

    fn builder(config: OrtConfig) -> Result<ort::session::builder::SessionBuilder> {
        let env = environment()?;
        OrtSession::builder(env)?
            .with_optimization_level(if config.optimize {
                GraphOptimizationLevel::All
            } else {
                GraphOptimizationLevel::Disable
            })
            .map_err(|e| anyhow!("{e}"))?
            .with_intra_threads(config.intra_threads)
            .map_err(|e| anyhow!("{e}"))?
            .with_parallel_execution(config.parallel)
            .map_err(|e| anyhow!("{e}"))
    }

    /// Runs with named inputs; returns the outputs in the model's order.
    pub fn run(&mut self, inputs: &[(String, Tensor)]) -> Result<Vec<Tensor>> {
        let mut values: Vec<(String, DynValue)> = Vec::new();
        for (name, t) in inputs {
            values.push((name.clone(), to_ort(t)?));
        }
        let outputs = self.session.run(values)?;
        outputs.iter().map(|(_, v)| from_ort(&v)).collect()
    }
}

fn to_ort(t: &Tensor) -> Result<DynValue> {
    macro_rules! conv {
        ($a:expr) => {
            ort::value::Tensor::from_array($a.to_owned())?.into_dyn()
        };
    }
    Ok(match t {
        Tensor::F32(a) => conv!(a),
        Tensor::F64(a) => conv!(a),
        Tensor::I64(a) => conv!(a),
        Tensor::I32(a) => conv!(a),
        Tensor::I16(a) => conv!(a),
        Tensor::I8(a) => conv!(a),
        Tensor::U8(a) => conv!(a),
        Tensor::U16(a) => conv!(a),
        Tensor::U32(a) => conv!(a),
        Tensor::U64(a) => conv!(a),
        Tensor::Bool(a) => conv!(a),
        Tensor::F16(a) => conv!(a),
        Tensor::BF16(a) => conv!(a),
        other => bail!("the oracle does not pass {} inputs", other.dtype()),
    })
}

fn from_ort(v: &ort::value::ValueRef<'_>) -> Result<Tensor> {
    let ValueType::Tensor { ty, .. } = v.dtype() else {
        bail!("ORT returned a non-tensor output")
    };
    macro_rules! ext {
        ($t:ty) => {
            Tensor::from(v.try_extract_array::<$t>()?.to_owned())
        };
    }
    Ok(match ty {
        TensorElementType::Float32 => ext!(f32),
        TensorElementType::Float64 => ext!(f64),
        TensorElementType::Int64 => ext!(i64),
        TensorElementType::Int32 => ext!(i32),
        TensorElementType::Int16 => ext!(i16),
        TensorElementType::Int8 => ext!(i8),
        TensorElementType::Uint8 => ext!(u8),
        TensorElementType::Uint16 => ext!(u16),
        TensorElementType::Uint32 => ext!(u32),
        TensorElementType::Uint64 => ext!(u64),
        TensorElementType::Bool => ext!(bool),
        TensorElementType::Float16 => ext!(half::f16),
        TensorElementType::Bfloat16 => ext!(half::bf16),
        other => bail!("ORT output of type {other:?} is not handled"),
    })
}
