//! Property tests of the kernels with the most parameters, each against a naive reference
//! written here from the ONNX spec (f64 loops): Conv (through a session at every optimization
//! level, so the blocked NCHW16c, Winograd and depthwise paths are taken where they apply),
//! MaxPool / AveragePool, Resize, Gather / GatherElements / ScatterElements / ScatterND,
//! broadcasting binary ops and reductions.
//!
//! The case count is modest (`PROPTEST_CASES` raises it for long runs, e.g.
//! `PROPTEST_CASES=2000 cargo test -p spillway-tests --test properties`).

mod binary;
mod conv;
mod indexing;
mod pool;
mod reduce;
mod resize;

use proptest::prelude::*;
use spillway_kernels::attrs::{AttrValue, Attributes};
use spillway_kernels::kernel::NodeSpec;
use spillway_kernels::{KernelError, Tensor};

/// The configuration of every property: `cases` by default, `PROPTEST_CASES` when set.
pub fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Builds the default-domain CPU kernel `op` at `opset` and runs it.
pub fn run_kernel(
    op: &str,
    opset: i64,
    attrs: &[(&str, AttrValue)],
    inputs: &[Option<&Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>, KernelError> {
    let mut a = Attributes::new();
    for (name, v) in attrs {
        a.insert(name, v.clone());
    }
    let spec = NodeSpec {
        op_type: op,
        domain: "",
        opset,
        attrs: &a,
        num_inputs: inputs.len(),
        num_outputs,
        options: Default::default(),
    };
    spillway_kernels::cpu::build(&spec)?.run(inputs)
}

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of flat position `flat` in `shape`.
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for i in (0..shape.len()).rev() {
        if shape[i] > 0 {
            idx[i] = flat % shape[i];
            flat /= shape[i];
        }
    }
    idx
}

/// Whether `actual` is `expected` within `atol + rtol·|expected|`, NaN for NaN and each
/// infinity for itself (never folded with `f64::max`, which drops NaN).
pub fn close(expected: f64, actual: f64, atol: f64, rtol: f64) -> bool {
    if expected.is_nan() || actual.is_nan() {
        return expected.is_nan() && actual.is_nan();
    }
    if expected.is_infinite() || actual.is_infinite() {
        return expected == actual;
    }
    (expected - actual).abs() <= atol + rtol * expected.abs()
}

/// Asserts the shape, then every element with [`close`]; `atol` may differ per element
/// (`atol[i % atol.len()]`, a bound from the magnitudes that were summed).
pub fn assert_all_close(
    what: &str,
    shape: &[usize],
    expected: &[f64],
    actual: &Tensor,
    atol: &[f64],
    rtol: f64,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(actual.shape(), shape, "{}: shape", what);
    let got: Vec<f64> = actual
        .to_f32_array()
        .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?
        .iter()
        .map(|&v| v as f64)
        .collect();
    prop_assert_eq!(got.len(), expected.len(), "{}: element count", what);
    for (i, (&e, &a)) in expected.iter().zip(&got).enumerate() {
        let tol = atol[i % atol.len().max(1)];
        prop_assert!(
            close(e, a, tol, rtol),
            "{}: element {} (index {:?}): expected {}, got {}",
            what,
            i,
            unravel(i, shape),
            e,
            a
        );
    }
    Ok(())
}

/// Float values: finite ones in [-2, 2], now and then (`special`) NaN, ±∞ or -0.
pub fn values(len: usize, special: bool) -> BoxedStrategy<Vec<f32>> {
    let finite = (-200i32..=200).prop_map(|v| v as f32 / 100.0);
    if special {
        prop::collection::vec(
            prop_oneof![
                20 => finite,
                1 => Just(f32::NAN),
                1 => Just(f32::INFINITY),
                1 => Just(f32::NEG_INFINITY),
                1 => Just(-0.0f32),
            ],
            len,
        )
        .boxed()
    } else {
        prop::collection::vec(finite, len).boxed()
    }
}

/// An f32 tensor.
pub fn tensor(shape: &[usize], data: &[f32]) -> Tensor {
    Tensor::from_shape_vec(shape, data.to_vec()).expect("shape matches data")
}

/// An i64 tensor.
pub fn tensor_i64(shape: &[usize], data: &[i64]) -> Tensor {
    Tensor::from_shape_vec(shape, data.to_vec()).expect("shape matches data")
}
