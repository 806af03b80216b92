//! tract (`tract-onnx`, pure Rust) as a configuration of the bench, behind the `tract` feature:
//! the model loaded with every input's shape fixed, optimized, and run on one thread (tract's
//! default executor) or on a private pool of two (`multithread-mm`, its parallel products).

use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use spillway::{DType, Tensor};
use tract_linalg::multithread::{Executor, multithread_tract_scope};
use tract_onnx::prelude::{
    DatumType, Framework, InferenceFact, InferenceModelExt, IntoRunnable, TValue, TVec,
    TypedRunnableModel,
};

use crate::inputs::ZooModel;

/// A loaded tract model and the executor it runs on.
pub struct Tract {
    model: Arc<TypedRunnableModel>,
    executor: Executor,
}

impl Tract {
    /// Loads `model` for its bench input shapes, to run on `threads` threads.
    pub fn load(model: &ZooModel, threads: usize) -> Result<Tract> {
        std::panic::catch_unwind(|| Self::load_unguarded(model, threads))
            .map_err(|panic| anyhow!("tract panicked while loading: {}", panic_text(&panic)))?
    }

    fn load_unguarded(model: &ZooModel, threads: usize) -> Result<Tract> {
        let mut inference = tract_onnx::onnx()
            .model_for_path(&model.path)
            .map_err(|e| anyhow!("tract could not read the model: {e:?}"))?;
        for (i, (name, dtype, shape)) in model.inputs.iter().enumerate() {
            let dt = match dtype.as_str() {
                "float" => DatumType::F32,
                "int64" => DatumType::I64,
                other => bail!("input {name}: dtype {other} is not given to tract"),
            };
            inference = inference
                .with_input_fact(i, InferenceFact::dt_shape(dt, shape.clone()))
                .map_err(|e| anyhow!("tract rejected the shape of input {name}: {e:?}"))?;
        }
        let model = inference
            .into_optimized()
            .and_then(|m| m.into_runnable())
            .map_err(|e| anyhow!("tract could not optimize the model: {e:?}"))?;
        let executor = match threads {
            1 => Executor::SingleThread,
            n => Executor::multithread_with_name(n, "bench-tract"),
        };
        Ok(Tract { model, executor })
    }

    /// Runs once on `inputs` (in the model's order); outputs as Spillway tensors.
    pub fn run(&self, inputs: &[(String, Tensor)]) -> Result<Vec<Tensor>> {
        let values: TVec<TValue> = inputs
            .iter()
            .map(|(_, t)| to_tract(t).map(TValue::from))
            .collect::<Result<_>>()?;
        // tract panics on some models (nasnetalarge: a broadcast to an empty shape); that is a
        // failed configuration, not the end of the bench.
        let run = || multithread_tract_scope(self.executor.clone(), || self.model.run(values));
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
            .map_err(|panic| anyhow!("tract panicked: {}", panic_text(&panic)))?
            .map_err(|e| anyhow!("tract failed: {e:?}"))?;
        out.iter().map(|v| from_tract(v)).collect()
    }
}

/// The message of a caught panic.
fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".to_string())
}

fn to_tract(t: &Tensor) -> Result<tract_onnx::prelude::Tensor> {
    match t.dtype() {
        DType::F32 => copy_in::<f32>(t),
        DType::I64 => copy_in::<i64>(t),
        other => bail!("the bench gives tract no {other:?} inputs"),
    }
}

/// A Spillway tensor of `T` copied into a tract tensor (once: a standard-layout view is read
/// in place).
fn copy_in<T>(t: &Tensor) -> Result<tract_onnx::prelude::Tensor>
where
    T: tract_onnx::prelude::Datum + spillway_kernels::Element + Copy,
{
    let view = t.view::<T>()?;
    let data = view.as_standard_layout();
    let data = data.as_slice().expect("standard layout is contiguous");
    tract_onnx::prelude::Tensor::from_shape(t.shape(), data).map_err(|e| anyhow!("{e:?}"))
}

fn from_tract(t: &tract_onnx::prelude::Tensor) -> Result<Tensor> {
    match t.datum_type() {
        DatumType::F32 => copy_out::<f32>(t),
        DatumType::I64 => copy_out::<i64>(t),
        other => bail!("tract gave an output of type {other:?}, which the bench does not compare"),
    }
}

/// A tract tensor of `T` copied into a Spillway tensor.
fn copy_out<T>(t: &tract_onnx::prelude::Tensor) -> Result<Tensor>
where
    T: tract_onnx::prelude::Datum + spillway_kernels::Element + Copy,
{
    let data = t.to_plain_array_view::<T>().map_err(|e| anyhow!("{e:?}"))?;
    Ok(Tensor::from_shape_vec(
        t.shape(),
        data.iter().copied().collect(),
    )?)
}
