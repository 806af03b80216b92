//! The onnx wheel's light models carry degenerate constant weights: eight of the nine answer a
//! uniform 0.001 softmax (densenet121 a constant) whatever the input, so a test that compares
//! their outputs checks little more than shapes. [`redraw_weights`] gives a model seeded random
//! weights of the usual scales instead, so that its outputs depend on its inputs.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use prost::Message;
use spillway::onnx::proto::{ModelProto, TensorProto};

/// Writes `path`'s model with every float initializer re-drawn from `seed` into the system's
/// temporary directory, and returns the new file's path: weights of rank 2 or more uniform
/// with He's scale `sqrt(6 / fan_in)`, `BatchNormalization` scales and variances in
/// [0.5, 1.5], every other vector in [-0.1, 0.1].
pub fn redraw_weights(path: &Path, seed: u64) -> anyhow::Result<PathBuf> {
    let mut model = ModelProto::decode(std::fs::read(path)?.as_slice())?;
    let graph = model
        .graph
        .as_mut()
        .ok_or_else(|| anyhow::anyhow!("{}: no graph", path.display()))?;
    let positive: HashSet<String> = graph
        .node
        .iter()
        .filter(|n| n.op_type() == "BatchNormalization")
        .flat_map(|n| [n.input.get(1).cloned(), n.input.get(4).cloned()])
        .flatten()
        .collect();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f32 / (1u64 << 53) as f32
    };
    for t in graph.initializer.iter_mut().filter(|t| t.data_type() == 1) {
        let n: i64 = t.dims.iter().product();
        let (lo, hi) = if positive.contains(t.name()) {
            (0.5, 1.5)
        } else if t.dims.len() >= 2 {
            let fan_in: i64 = t.dims[1..].iter().product();
            let bound = (6.0 / fan_in.max(1) as f32).sqrt();
            (-bound, bound)
        } else {
            (-0.1, 0.1)
        };
        let data = (0..n).map(|_| lo + (hi - lo) * uniform()).collect();
        *t = TensorProto {
            name: t.name.clone(),
            dims: t.dims.clone(),
            data_type: t.data_type,
            float_data: data,
            ..Default::default()
        };
    }
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let dir = std::env::temp_dir().join(format!("spillway-redrawn-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let out = dir.join(format!("{stem}-{seed}.onnx"));
    std::fs::write(&out, model.encode_to_vec())?;
    Ok(out)
}
