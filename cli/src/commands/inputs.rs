//! Model inputs for the commands: `NAME=FILE.npy` files, or seeded random values of the
//! declared shapes.

use anyhow::{Context, Result, bail};
use spillway::{DType, Tensor};
use spillway::{Dim, ValueInfo};

/// The sizes the commands give symbolic dimensions of inputs they make: `--dim NAME=SIZE`
/// for a named one, `--dim-default` for the rest.
#[derive(Debug, Clone, clap::Args)]
pub struct DimSizes {
    /// A symbolic input dimension's size, as NAME=SIZE (`--dim batch=4 --dim height=480`);
    /// repeat for several.
    #[arg(long = "dim", value_name = "NAME=SIZE")]
    pub named: Vec<String>,
    /// The size of symbolic dimensions `--dim` does not name (and of unnamed ones).
    #[arg(long, default_value_t = 1)]
    pub dim_default: usize,
}

impl DimSizes {
    /// Every symbolic dimension takes `size`.
    #[cfg(test)]
    pub fn all(size: usize) -> Self {
        DimSizes {
            named: Vec::new(),
            dim_default: size,
        }
    }

    /// The `--dim` pairs, each checked against the dimensions `declared` names.
    fn parse(&self, declared: &[&ValueInfo]) -> Result<Vec<(String, usize)>> {
        let symbols: Vec<&str> = declared
            .iter()
            .filter_map(|v| v.shape.as_ref())
            .flatten()
            .filter_map(|d| match d {
                Dim::Symbol(s) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        let mut out: Vec<(String, usize)> = Vec::new();
        for spec in &self.named {
            let (name, size) = spec
                .split_once('=')
                .with_context(|| format!("--dim '{spec}' is not NAME=SIZE"))?;
            let size: usize = size
                .parse()
                .with_context(|| format!("--dim '{spec}': '{size}' is not a size"))?;
            if !symbols.contains(&name) {
                bail!(
                    "--dim '{name}': no input has a dimension of that name (the symbolic ones: {})",
                    if symbols.is_empty() {
                        "none".to_string()
                    } else {
                        symbols.join(", ")
                    }
                );
            }
            if out.iter().any(|(n, _)| n == name) {
                bail!("--dim '{name}' is given more than once");
            }
            out.push((name.to_string(), size));
        }
        Ok(out)
    }
}

/// The inputs of a model in its declared order: those given as `NAME=FILE.npy`, the rest
/// seeded random values of the declared shape (symbolic dimensions as `dims` says).
pub fn model_inputs(
    declared: &[&ValueInfo],
    given: &[String],
    dims: &DimSizes,
) -> Result<Vec<(String, Tensor)>> {
    let named = dims.parse(declared)?;
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
            Some(declared_dims) => declared_dims
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => *n,
                    Dim::Symbol(s) => named
                        .iter()
                        .find(|(n, _)| n == s)
                        .map_or(dims.dim_default, |&(_, size)| size),
                    Dim::Unknown => dims.dim_default,
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
        DType::F16 => Tensor::from_shape_vec(
            shape,
            (0..n)
                .map(|_| half::f16::from_f64(next() * 2.0 - 1.0))
                .collect(),
        )?,
        DType::BF16 => Tensor::from_shape_vec(
            shape,
            (0..n)
                .map(|_| half::bf16::from_f64(next() * 2.0 - 1.0))
                .collect(),
        )?,
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
