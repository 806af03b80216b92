//! Shared helpers for the integration tests: locating the project venv and its test data,
//! and comparing tensors the way the ONNX backend test runner does.

pub mod build;
pub mod corpus;
pub mod detections;
pub mod differential;
pub mod fixtures;
/// The fuzzing harness (`fuzz/src/lib.rs`): the checks of the fuzz targets and the graph
/// generator, shared with the regression and differential tests.
#[allow(dead_code)]
#[path = "../../fuzz/src/lib.rs"]
pub mod fuzz_harness;
pub mod oracle;
pub mod redraw;

use std::path::{Path, PathBuf};

use spillway::Value;
use spillway_kernels::{DType, Tensor};

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    // A test binary carried to another machine (the GPU runner) is told where the checkout is.
    if let Some(root) = std::env::var_os("SPILLWAY_ROOT") {
        return PathBuf::from(root);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The project venv (`SPILLWAY_VENV`, else `<root>/.venv`). Panics with the command that
/// creates it: a missing venv is a failed test, never a skipped one.
pub fn venv() -> PathBuf {
    let venv = std::env::var_os("SPILLWAY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv"));
    assert!(
        venv.join("bin/python").exists(),
        "the project venv is missing at {}: run scripts/venv.sh (the README's test command does)",
        venv.display()
    );
    venv
}

/// `site-packages` inside the venv.
pub fn site_packages() -> PathBuf {
    let lib = venv().join("lib");
    let python = std::fs::read_dir(&lib)
        .expect("venv has lib/")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python3"))
        })
        .expect("venv has lib/python3.*");
    python.join("site-packages")
}

/// The ONNX backend test data shipped in the onnx wheel (`node/`, `light/`, …).
pub fn onnx_test_data() -> PathBuf {
    site_packages().join("onnx/backend/test/data")
}

/// Reads a serialized `TensorProto` file.
pub fn read_tensor_pb(path: &Path) -> anyhow::Result<Tensor> {
    use prost::Message;
    let bytes = std::fs::read(path)?;
    let proto = spillway::onnx::proto::TensorProto::decode(bytes.as_slice())?;
    Ok(spillway::onnx::decode_tensor(&proto, path.parent())?)
}

/// Reads the `name` of a serialized `TensorProto` file.
pub fn tensor_pb_name(path: &Path) -> anyhow::Result<String> {
    use prost::Message;
    let bytes = std::fs::read(path)?;
    Ok(
        spillway::onnx::proto::TensorProto::decode(bytes.as_slice())?
            .name()
            .to_string(),
    )
}

/// Reads a serialized `TensorProto`, `SequenceProto` or `OptionalProto` file, chosen by the
/// declared type of the value it holds.
pub fn read_value_pb(path: &Path, ty: &spillway::graph::ValueType) -> anyhow::Result<Value> {
    let bytes = std::fs::read(path)?;
    Ok(spillway::onnx::decode_value_bytes(
        &bytes,
        path.parent(),
        ty,
    )?)
}

/// Reads the `name` of a serialized `TensorProto`, `SequenceProto` or `OptionalProto` file,
/// decoding it as the message `ty` calls for.
pub fn value_pb_name(path: &Path, ty: &spillway::graph::ValueType) -> anyhow::Result<String> {
    use prost::Message;
    use spillway::graph::ValueType;
    use spillway::onnx::proto;
    let bytes = std::fs::read(path)?;
    Ok(match ty {
        ValueType::Tensor { .. } => proto::TensorProto::decode(bytes.as_slice())?
            .name()
            .to_string(),
        ValueType::Sequence(_) => proto::SequenceProto::decode(bytes.as_slice())?
            .name()
            .to_string(),
        ValueType::Optional(_) => proto::OptionalProto::decode(bytes.as_slice())?
            .name()
            .to_string(),
    })
}

/// [`assert_close`] for values: same kind; sequences of the same element type and length,
/// compared element by element; optionals both empty or both holding close values.
pub fn assert_values_close(
    expected: &Value,
    actual: &Value,
    rtol: f64,
    atol: f64,
) -> Result<(), String> {
    match (expected, actual) {
        (Value::Tensor(e), Value::Tensor(a)) => assert_close(e, a, rtol, atol),
        (Value::Sequence(e), Value::Sequence(a)) => {
            if e.dtype() != a.dtype() {
                return Err(format!(
                    "sequence element type: expected {}, got {}",
                    e.dtype(),
                    a.dtype()
                ));
            }
            if e.len() != a.len() {
                return Err(format!(
                    "sequence length: expected {}, got {}",
                    e.len(),
                    a.len()
                ));
            }
            for (i, (x, y)) in e.tensors().iter().zip(a.tensors()).enumerate() {
                assert_close(x, y, rtol, atol).map_err(|m| format!("sequence element {i}: {m}"))?;
            }
            Ok(())
        }
        (Value::Optional(None), Value::Optional(None)) => Ok(()),
        (Value::Optional(Some(e)), Value::Optional(Some(a))) => {
            assert_values_close(e, a, rtol, atol).map_err(|m| format!("optional element: {m}"))
        }
        _ => Err(format!(
            "kind: expected {}, got {}",
            expected.type_string(),
            actual.type_string()
        )),
    }
}

/// Compares like `numpy.testing.assert_allclose(actual, expected, rtol, atol)` with NaN equal
/// to NaN, after requiring equal dtypes and shapes. Non-float types must match exactly; the
/// low-precision types (float8, float4, int4, int2, …) bit for bit, any NaN code equal to
/// any other.
pub fn assert_close(
    expected: &Tensor,
    actual: &Tensor,
    rtol: f64,
    atol: f64,
) -> Result<(), String> {
    if expected.dtype() != actual.dtype() {
        return Err(format!(
            "dtype: expected {}, got {}",
            expected.dtype(),
            actual.dtype()
        ));
    }
    if expected.shape() != actual.shape() {
        return Err(format!(
            "shape: expected {:?}, got {:?}",
            expected.shape(),
            actual.shape()
        ));
    }
    match expected.dtype() {
        DType::String => {
            let (e, a) = (
                expected.view::<String>().unwrap(),
                actual.view::<String>().unwrap(),
            );
            match e.iter().zip(a.iter()).position(|(x, y)| x != y) {
                Some(i) => Err(format!(
                    "element {i}: expected {:?}, got {:?}",
                    e.iter().nth(i),
                    a.iter().nth(i)
                )),
                None => Ok(()),
            }
        }
        DType::Bool => {
            let (e, a) = (
                expected.view::<bool>().unwrap(),
                actual.view::<bool>().unwrap(),
            );
            match e.iter().zip(a.iter()).position(|(x, y)| x != y) {
                Some(i) => Err(format!("element {i} differs")),
                None => Ok(()),
            }
        }
        d if d.is_low_precision() => {
            use spillway_kernels::low_precision::{codes, values};
            let (ec, ac) = (codes(expected).unwrap(), codes(actual).unwrap());
            let (ev, av) = (values(expected).unwrap(), values(actual).unwrap());
            for i in 0..ec.len() {
                if ec[i] != ac[i] && !(ev[i].is_nan() && av[i].is_nan()) {
                    return Err(format!(
                        "element {i}: expected {} (bits {:#04x}), got {} (bits {:#04x})",
                        ev[i], ec[i], av[i], ac[i]
                    ));
                }
            }
            Ok(())
        }
        d => {
            let (e, a) = (expected.to_f64_vec().unwrap(), actual.to_f64_vec().unwrap());
            let exact = !d.is_float();
            for (i, (&x, &y)) in e.iter().zip(&a).enumerate() {
                let ok = if exact {
                    x == y
                } else if x.is_nan() || y.is_nan() {
                    x.is_nan() && y.is_nan()
                } else if x.is_infinite() || y.is_infinite() {
                    x == y
                } else {
                    (x - y).abs() <= atol + rtol * x.abs()
                };
                if !ok {
                    return Err(format!("element {i}: expected {x}, got {y}"));
                }
            }
            Ok(())
        }
    }
}

/// The elements of two numeric tensors as `f64`, when their shapes agree.
fn same_shape_values(want: &Tensor, got: &Tensor) -> Result<(Vec<f64>, Vec<f64>), String> {
    if want.shape() != got.shape() {
        return Err(format!(
            "shape: expected {:?}, got {:?}",
            want.shape(),
            got.shape()
        ));
    }
    let w = want.to_f64_vec().map_err(|e| e.to_string())?;
    let g = got.to_f64_vec().map_err(|e| e.to_string())?;
    Ok((w, g))
}

/// Relative L2 error ‖a − e‖ / ‖e‖ of two numeric tensors of the same shape (0 when both are
/// 0), over the positions where `expected` is finite. A position where either is not finite
/// must match exactly (NaN matches NaN): otherwise the error is infinite, never NaN, so that
/// a fold with `f64::max` cannot drop it.
pub fn relative_l2(expected: &Tensor, actual: &Tensor) -> Result<f64, String> {
    let (e, a) = same_shape_values(expected, actual)?;
    let mut diff = 0f64;
    let mut norm = 0f64;
    for (x, y) in e.iter().zip(&a) {
        if !(x.is_finite() && y.is_finite()) {
            if !(x == y || x.is_nan() && y.is_nan()) {
                return Ok(f64::INFINITY);
            }
            continue;
        }
        diff += (x - y) * (x - y);
        norm += x * x;
    }
    let (diff, norm) = (diff.sqrt(), norm.sqrt());
    Ok(if norm == 0.0 { diff } else { diff / norm })
}

/// The larger of two errors, where NaN (an error that could not be measured) wins: a fold with
/// `f64::max` would drop it.
pub fn worse(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// The smallest intersection over union of the masks `p > 0.5` of `want` and `got`, one mask
/// per index of the first dimension (1 when both are empty); an error when the shapes differ.
pub fn min_mask_iou(want: &Tensor, got: &Tensor) -> Result<f64, String> {
    let (w, g) = same_shape_values(want, got)?;
    let masks = want.shape().first().copied().unwrap_or(1).max(1);
    let plane = w.len() / masks;
    let mut worst = 1f64;
    for m in 0..masks {
        let (mut inter, mut union) = (0usize, 0usize);
        for (a, b) in w[m * plane..(m + 1) * plane]
            .iter()
            .zip(&g[m * plane..(m + 1) * plane])
        {
            let (a, b) = (*a > 0.5, *b > 0.5);
            inter += usize::from(a && b);
            union += usize::from(a || b);
        }
        if union > 0 {
            worst = worst.min(inter as f64 / union as f64);
        }
    }
    Ok(worst)
}

/// Largest |want − got| over the largest |want| (the absolute difference when `want` is all
/// zero); NaN against NaN counts as equal, NaN against a number as infinitely far.
pub fn max_relative_difference(want: &Tensor, got: &Tensor) -> Result<f64, String> {
    let (w, g) = same_shape_values(want, got)?;
    let scale = w.iter().fold(0f64, |m, x| m.max(x.abs()));
    let worst = w
        .iter()
        .zip(&g)
        .map(|(a, b)| {
            if a.is_nan() && b.is_nan() {
                0.0
            } else {
                (a - b).abs()
            }
        })
        .fold(
            0f64,
            |m, d| if d.is_nan() { f64::INFINITY } else { m.max(d) },
        );
    Ok(if scale == 0.0 { worst } else { worst / scale })
}

/// Median host wall milliseconds of `run` over `runs` calls (after one untimed call).
pub fn median_wall_ms<E>(runs: usize, run: &dyn Fn() -> Result<(), E>) -> Result<f64, E> {
    run()?;
    let mut samples = Vec::with_capacity(runs.max(1));
    for _ in 0..runs.max(1) {
        let start = std::time::Instant::now();
        run()?;
        samples.push(start.elapsed().as_secs_f64() * 1e3);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// Seeded floats in [-1, 1) of the given shape (xorshift64; the same seed gives the same tensor).
pub fn seeded_f32(shape: &[usize], seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_shape_vec(shape, data).expect("length matches the shape")
}

/// Seeded inputs for every declared input of `session` (input `i` from seed `17 + i`); symbolic
/// dims take `batch`, an input without a declared shape is a scalar.
pub fn seeded_inputs(session: &spillway::Session, batch: usize) -> Vec<(String, Tensor)> {
    seeded_inputs_from(session, batch, 17)
}

/// Like [`seeded_inputs`], from another seed (input `i` uses `seed + i`).
pub fn seeded_inputs_from(
    session: &spillway::Session,
    batch: usize,
    seed: u64,
) -> Vec<(String, Tensor)> {
    session
        .inputs()
        .iter()
        .enumerate()
        .map(|(i, info)| {
            let shape: Vec<usize> = info
                .shape
                .as_ref()
                .map(|s| s.iter().map(|d| d.fixed().unwrap_or(batch)).collect())
                .unwrap_or_default();
            (info.name.clone(), seeded_f32(&shape, seed + i as u64))
        })
        .collect()
}
