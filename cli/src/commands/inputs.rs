//! Model inputs for the commands: `NAME=FILE.npy` files, or seeded random values of the
//! declared shapes.

use anyhow::{Context, Result, bail};
use spillway::graph::{Dim, ValueInfo};
use spillway::{DType, Tensor};

/// The inputs of a model in its declared order: those given as `NAME=FILE.npy`, the rest
/// seeded random values of the declared shape (symbolic dimensions take `dim_default`).
pub fn model_inputs(
    declared: &[&ValueInfo],
    given: &[String],
    dim_default: usize,
) -> Result<Vec<(String, Tensor)>> {
    let mut files: Vec<(String, Tensor)> = Vec::new();
    for spec in given {
        let (name, file) = spec
            .split_once('=')
            .with_context(|| format!("--input '{spec}' is not NAME=FILE.npy"))?;
        if !declared.iter().any(|v| v.name == name) {
            bail!("--input '{name}': the model has no input of that name");
        }
        if files.iter().any(|(n, _)| n == name) {
            bail!("--input '{name}' is given more than once");
        }
        files.push((name.to_string(), read_npy(file.as_ref())?));
    }
    let mut inputs = Vec::with_capacity(declared.len());
    for (i, info) in declared.iter().enumerate() {
        if let Some(pos) = files.iter().position(|(n, _)| n == &info.name) {
            inputs.push(files.swap_remove(pos));
            continue;
        }
        let shape: Vec<usize> = match &info.shape {
            Some(dims) => dims
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => *n,
                    _ => dim_default,
                })
                .collect(),
            None => bail!(
                "input '{}' has no declared shape: give it with --input",
                info.name
            ),
        };
        let dtype = info.dtype.unwrap_or(DType::F32);
        inputs.push((info.name.clone(), random_tensor(dtype, &shape, i as u64)?));
    }
    Ok(inputs)
}

/// Seeded values in [-1, 1) for floats, small non-negative integers for ints.
pub fn random_tensor(dtype: DType, shape: &[usize], seed: u64) -> Result<Tensor> {
    let n = spillway_kernels::limits::checked_elements(shape, dtype.size_of())
        .with_context(|| format!("a random input of shape {shape:?}"))?;
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    Ok(match dtype {
        DType::F32 => {
            Tensor::from_shape_vec(shape, (0..n).map(|_| (next() * 2.0 - 1.0) as f32).collect())?
        }
        DType::F64 => Tensor::from_shape_vec(shape, (0..n).map(|_| next() * 2.0 - 1.0).collect())?,
        DType::I64 => {
            Tensor::from_shape_vec(shape, (0..n).map(|_| (next() * 4.0) as i64).collect())?
        }
        DType::I32 => {
            Tensor::from_shape_vec(shape, (0..n).map(|_| (next() * 4.0) as i32).collect())?
        }
        DType::Bool => Tensor::from_shape_vec(shape, (0..n).map(|_| next() < 0.5).collect())?,
        DType::U8 => {
            Tensor::from_shape_vec(shape, (0..n).map(|_| (next() * 255.0) as u8).collect())?
        }
        other => bail!("cannot make random {other} inputs: give this input with --input"),
    })
}

/// Reads a `.npy` file of any element type a tensor can hold.
fn read_npy(path: &std::path::Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).with_context(|| format!("opening {}", path.display()))?;
    spillway::tensor_from_npy(&bytes).with_context(|| format!("reading {}", path.display()))
}
