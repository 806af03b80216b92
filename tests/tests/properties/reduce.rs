//! The reductions at opset 18 (axes as an input) against f64 sums: any subset of the axes,
//! negative ones, none (every axis, or nothing with `noop_with_empty_axes`), `keepdims`.

use proptest::prelude::*;
use spillway_kernels::attrs::AttrValue;

use super::{assert_all_close, config, run_kernel, strides, tensor, tensor_i64, unravel, values};

const OPS: [&str; 9] = [
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSumExp",
    "ReduceSumSquare",
];

/// The reduction of `terms` and the magnitude its rounding error scales with.
fn reduce(op: &str, terms: &[f64]) -> (f64, f64) {
    let abs: f64 = terms.iter().map(|v| v.abs()).sum();
    match op {
        "ReduceSum" => (terms.iter().sum(), abs),
        "ReduceMean" => (
            terms.iter().sum::<f64>() / terms.len() as f64,
            abs / terms.len() as f64,
        ),
        // Never `fold(f64::max)`: finite data here, but the fold must not drop a NaN either.
        "ReduceMax" => (
            terms.iter().copied().fold(
                f64::NEG_INFINITY,
                |m, v| if v > m || v.is_nan() { v } else { m },
            ),
            0.0,
        ),
        "ReduceMin" => (
            terms.iter().copied().fold(
                f64::INFINITY,
                |m, v| if v < m || v.is_nan() { v } else { m },
            ),
            0.0,
        ),
        "ReduceProd" => {
            let p: f64 = terms.iter().product();
            (p, p.abs())
        }
        "ReduceL1" => (abs, abs),
        "ReduceL2" => {
            let s: f64 = terms.iter().map(|v| v * v).sum();
            (s.sqrt(), s.sqrt())
        }
        "ReduceLogSumExp" => {
            let s: f64 = terms.iter().map(|v| v.exp()).sum();
            (s.ln(), 1.0)
        }
        _ => {
            let s: f64 = terms.iter().map(|v| v * v).sum();
            (s, s)
        }
    }
}

proptest! {
    #![proptest_config(config(256))]
    #[test]
    fn reductions(
        op in prop::sample::select(OPS.to_vec()),
        shape in prop::collection::vec(1usize..=4, 1..=4),
        pick in prop::collection::vec(0u8..=3, 4),
        keepdims in any::<bool>(),
        noop in any::<bool>(),
        fill in values(256, false),
    ) {
        let r = shape.len();
        // 0: not reduced; 1: reduced, given as is; 2: reduced, given negative; 3: not reduced.
        let axes: Vec<i64> = (0..r).filter_map(|k| match pick[k] {
            1 => Some(k as i64),
            2 => Some(k as i64 - r as i64),
            _ => None,
        }).collect();
        let reduced: Vec<bool> = if axes.is_empty() {
            vec![!noop; r]
        } else {
            (0..r).map(|k| matches!(pick[k], 1 | 2)).collect()
        };
        let data: Vec<f32> = (0..shape.iter().product()).map(|i| fill[i % fill.len()]).collect();
        let out_full: Vec<usize> = shape.iter().zip(&reduced).map(|(&d, &red)| if red { 1 } else { d }).collect();
        let out_shape: Vec<usize> = if keepdims {
            out_full.clone()
        } else {
            shape.iter().zip(&reduced).filter(|(_, red)| !**red).map(|(&d, _)| d).collect()
        };
        let mut groups: Vec<Vec<f64>> = vec![Vec::new(); out_full.iter().product()];
        let os = strides(&out_full);
        for (flat, &v) in data.iter().enumerate() {
            let i = unravel(flat, &shape);
            let o: usize = i.iter().zip(&reduced).zip(&os).map(|((&x, &red), s)| if red { 0 } else { x * s }).sum();
            groups[o].push(v as f64);
        }
        // Without axes and with `noop_with_empty_axes`, every group is one element, which
        // still goes through the op's elementwise part (ReduceL1 gives |x|, ReduceSumSquare
        // x²: the ONNX reference implementation and ONNX Runtime agree).
        let (want, atol): (Vec<f64>, Vec<f64>) = groups.iter()
            .map(|g| {
                let (v, mag) = reduce(op, g);
                (v, 1e-5 * (mag + 1.0))
            })
            .unzip();
        let x = tensor(&shape, &data);
        let ax = tensor_i64(&[axes.len()], &axes);
        let attrs = [
            ("keepdims", AttrValue::Int(keepdims as i64)),
            ("noop_with_empty_axes", AttrValue::Int(noop as i64)),
        ];
        let out = run_kernel(op, 18, &attrs, &[Some(&x), Some(&ax)], 1)
            .map_err(|e| TestCaseError::fail(format!("{op} {shape:?} axes {axes:?}: {e}")))?;
        let rtol = if op == "ReduceProd" { 1e-5 } else { 1e-6 };
        assert_all_close(
            &format!("{op} {shape:?} axes {axes:?} keepdims {keepdims} noop {noop}"),
            &out_shape,
            &want,
            &out[0],
            &atol,
            rtol,
        )?;
    }
}
