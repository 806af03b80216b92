//! Broadcasting binary ops against the spec's multidirectional broadcasting, computed in f32
//! exactly as IEEE 754 does (so arithmetic compares bit for bit, NaN for NaN), and the
//! comparisons as booleans.

use proptest::prelude::*;
use spillway_kernels::attrs::AttrValue;

use super::{assert_all_close, config, run_kernel, strides, tensor, unravel, values};

/// Two shapes that broadcast together: suffixes of one shape, some dims set to 1.
fn shapes() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    prop::collection::vec(0usize..=4, 0..=4).prop_flat_map(|full| {
        let r = full.len();
        (
            Just(full),
            0..=r,
            0..=r,
            prop::collection::vec(any::<bool>(), r),
            prop::collection::vec(any::<bool>(), r),
        )
            .prop_map(|(full, ra, rb, ones_a, ones_b)| {
                let pick = |rank: usize, ones: &[bool]| -> Vec<usize> {
                    (full.len() - rank..full.len())
                        .map(|k| if ones[k] { 1 } else { full[k] })
                        .collect()
                };
                (pick(ra, &ones_a), pick(rb, &ones_b))
            })
    })
}

fn broadcast(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|k| {
            let da = if k + a.len() >= r {
                a[k + a.len() - r]
            } else {
                1
            };
            let db = if k + b.len() >= r {
                b[k + b.len() - r]
            } else {
                1
            };
            if da == 1 { db } else { da }
        })
        .collect()
}

/// The flat position in `shape` (right-aligned, broadcast) of output index `o`.
fn source(o: &[usize], shape: &[usize]) -> usize {
    let off = o.len() - shape.len();
    let s = strides(shape);
    shape
        .iter()
        .enumerate()
        .map(|(k, &d)| if d == 1 { 0 } else { o[k + off] * s[k] })
        .sum()
}

const OPS: [&str; 11] = [
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Equal", "Greater", "Less",
];

fn apply(op: &str, a: f32, b: f32) -> f64 {
    (match op {
        "Add" => a + b,
        "Sub" => a - b,
        "Mul" => a * b,
        "Div" => a / b,
        "Pow" => a.powf(b),
        "Max" => a.max(b),
        "Min" => a.min(b),
        // fmod = 1: the sign of the dividend (C's fmod).
        "Mod" => a % b,
        "Equal" => f32::from(u8::from(a == b)),
        "Greater" => f32::from(u8::from(a > b)),
        _ => f32::from(u8::from(a < b)),
    }) as f64
}

proptest! {
    #![proptest_config(config(256))]
    #[test]
    fn broadcasting_binary(
        op in prop::sample::select(OPS.to_vec()),
        (sa, sb) in shapes(),
        fill_a in values(64, true),
        fill_b in values(64, true),
    ) {
        // Max and Min of NaN are left to the implementation: finite operands for them.
        let finite = matches!(op, "Max" | "Min");
        let fix = |v: f32| if finite && !v.is_finite() { 1.5 } else { v };
        let a: Vec<f32> = (0..sa.iter().product()).map(|i| fix(fill_a[i % 64])).collect();
        let b: Vec<f32> = (0..sb.iter().product()).map(|i| fix(fill_b[(i * 3 + 1) % 64])).collect();
        let out_shape = broadcast(&sa, &sb);
        let want: Vec<f64> = (0..out_shape.iter().product())
            .map(|flat| {
                let o = unravel(flat, &out_shape);
                apply(op, a[source(&o, &sa)], b[source(&o, &sb)])
            })
            .collect();
        let attrs: Vec<(&str, AttrValue)> = if op == "Mod" { vec![("fmod", AttrValue::Int(1))] } else { vec![] };
        let (ta, tb) = (tensor(&sa, &a), tensor(&sb, &b));
        let out = run_kernel(op, 14, &attrs, &[Some(&ta), Some(&tb)], 1)
            .map_err(|e| TestCaseError::fail(format!("{op} {sa:?} {sb:?}: {e}")))?;
        let what = format!("{op} {sa:?} with {sb:?}");
        if matches!(op, "Equal" | "Greater" | "Less") {
            prop_assert_eq!(out[0].shape(), &out_shape[..], "{}: shape", what);
            let got: Vec<f64> = out[0].view::<bool>().map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?
                .iter().map(|&v| f64::from(u8::from(v))).collect();
            prop_assert_eq!(got, want, "{}", what);
        } else {
            // Pow goes through other routines than powf: a few ulps.
            let rtol = if op == "Pow" { 1e-5 } else { 0.0 };
            assert_all_close(&what, &out_shape, &want, &out[0], &[0.0], rtol)?;
        }
    }
}
