//! Writing a run's outputs as `.npy` files (`spillway run --output-dir`).

use std::path::Path;

use anyhow::{Context, Result, bail};
use ndarray_npy::WriteNpyExt;
use spillway::{DType, SessionOutputs, Tensor};

/// Writes every output of `outputs` to `dir/NAME.npy` (`/` and `\` in a name become `_`),
/// creating `dir` if it is missing. An output that is not a tensor, or a tensor whose element
/// type `.npy` cannot hold (strings, 16-bit and smaller floats), fails naming the output.
pub fn write_npy_dir(dir: &Path, outputs: &SessionOutputs) -> Result<()> {
    let mut tensors = Vec::new();
    for (name, value) in outputs.iter_values() {
        let Some(tensor) = value.as_tensor() else {
            bail!(
                "output {name} is a {}, which .npy cannot hold",
                value.type_string()
            );
        };
        tensors.push((name, tensor));
    }
    write_tensors(dir, tensors)
}

/// Writes each `(name, tensor)` to `dir/NAME.npy` as [`write_npy_dir`] does, after checking
/// that no two names share a file.
pub fn write_tensors<'a>(
    dir: &Path,
    tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
) -> Result<()> {
    let tensors: Vec<(&str, &Tensor)> = tensors.into_iter().collect();
    let mut files: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
    for &(name, _) in &tensors {
        let file = file_name(name);
        if let Some(other) = files.insert(file.clone(), name) {
            bail!("'{other}' and '{name}' would both be written to {file}");
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, tensor) in tensors {
        let path = dir.join(file_name(name));
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        write_npy(tensor, std::io::BufWriter::new(file))
            .with_context(|| format!("writing {name} to {}", path.display()))?;
    }
    Ok(())
}

/// `NAME.npy`, with `/` and `\\` in the name replaced by `_`.
fn file_name(output: &str) -> String {
    format!("{}.npy", output.replace(['/', '\\'], "_"))
}

fn write_npy(tensor: &Tensor, mut out: impl std::io::Write) -> Result<()> {
    macro_rules! write_as {
        ($t:ty) => {
            tensor.view::<$t>()?.write_npy(out)?
        };
    }
    match tensor.dtype() {
        DType::F32 => write_as!(f32),
        DType::F64 => write_as!(f64),
        DType::I64 => write_as!(i64),
        DType::I32 => write_as!(i32),
        DType::I16 => write_as!(i16),
        DType::I8 => write_as!(i8),
        DType::U8 => write_as!(u8),
        DType::U16 => write_as!(u16),
        DType::U32 => write_as!(u32),
        DType::U64 => write_as!(u64),
        DType::Bool => write_as!(bool),
        DType::F16 => {
            // Written as `<u2` half-precision bits, then the descriptor (same length) says
            // `<f2`: numpy reads it as float16.
            let bits = tensor.view::<half::f16>()?.mapv(half::f16::to_bits);
            let mut bytes = Vec::new();
            bits.write_npy(&mut bytes)?;
            let at = bytes
                .windows(5)
                .position(|w| w == b"'<u2'")
                .context("the .npy header names its type")?;
            bytes[at..at + 5].copy_from_slice(b"'<f2'");
            out.write_all(&bytes)?;
        }
        // numpy has no bfloat16: float32 holds every bfloat16 value exactly.
        DType::BF16 => tensor
            .view::<half::bf16>()?
            .mapv(f32::from)
            .write_npy(out)?,
        other => bail!("a {other} tensor cannot be written as .npy (numpy has no such type)"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::ArrayD;
    use ndarray_npy::ReadNpyExt;
    use spillway::Session;

    #[test]
    fn every_output_reads_back_equal() {
        let session = Session::builder()
            .commit_from_memory(crate::commands::run::DEFAULT_MODEL)
            .unwrap();
        let inputs = crate::commands::inputs::model_inputs(
            &session.inputs(),
            &[],
            &crate::commands::inputs::DimSizes::all(1),
        )
        .unwrap();
        let outputs = session.run(inputs).unwrap();
        let dir = std::env::temp_dir().join(format!("spillway-outputs-{}", std::process::id()));
        write_npy_dir(&dir, &outputs).unwrap();
        for (name, value) in outputs.iter_values() {
            let file =
                std::fs::File::open(dir.join(format!("{}.npy", name.replace('/', "_")))).unwrap();
            let back = ArrayD::<f32>::read_npy(file).unwrap();
            let want = value.as_tensor().unwrap().view::<f32>().unwrap();
            assert_eq!(back.view(), want, "output {name}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn half_precision_outputs_are_written_as_numpy_reads_them() {
        let values = [1.5f32, -0.25, 65504.0, 0.0, -3.0, 1e-3];
        let halves: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f32(v)).collect();
        let f16 = Tensor::from_shape_vec(&[2, 3], halves.clone()).unwrap();
        let mut bytes = Vec::new();
        write_npy(&f16, &mut bytes).unwrap();
        // numpy's descriptor for little-endian float16, and the bits back as they were.
        assert!(bytes.windows(5).any(|w| w == b"'<f2'"));
        let back = spillway::tensor_from_npy(&bytes).unwrap();
        assert_eq!(back.dtype(), DType::F16);
        assert_eq!(back.shape(), &[2, 3]);
        assert_eq!(
            back.view::<half::f16>()
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            halves
        );

        let brains: Vec<half::bf16> = values.iter().map(|&v| half::bf16::from_f32(v)).collect();
        let bf16 = Tensor::from_shape_vec(&[6], brains.clone()).unwrap();
        let mut bytes = Vec::new();
        write_npy(&bf16, &mut bytes).unwrap();
        let back = spillway::tensor_from_npy(&bytes).unwrap();
        let want: Vec<f32> = brains.iter().map(|&b| f32::from(b)).collect();
        assert_eq!(
            back.view::<f32>()
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            want
        );
    }
}
