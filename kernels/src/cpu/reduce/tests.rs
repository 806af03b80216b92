//! Unit tests of the reduce family. Expected values come from `onnx.reference`
//! (onnx 1.22) / numpy, or from an independent naive loop for the large cases.

#![allow(clippy::excessive_precision, clippy::approx_constant)]

use crate::cpu::binary::test_util::{assert_f32, run_op, run1, t, values};
use crate::{AttrValue, KernelError, Tensor};

/// `arange(24).reshape(2, 3, 4) - 7` as f32.
fn d() -> Tensor {
    t(&[2, 3, 4], (0..24).map(|i| i as f32 - 7.0).collect())
}

fn axes(v: &[i64]) -> Tensor {
    t(&[v.len()], v.to_vec())
}

fn ints<'a>(name: &'a str, v: &[i64]) -> (&'a str, AttrValue) {
    (name, AttrValue::Ints(v.to_vec()))
}

fn int(name: &str, v: i64) -> (&str, AttrValue) {
    (name, AttrValue::Int(v))
}

#[test]
fn sum_and_mean_over_adjacent_and_split_axes() {
    let out = run1("ReduceSum", 13, &[], &[&d(), &axes(&[0, 2])]).unwrap();
    assert_f32(&out, &[1, 3, 1], &[4.0, 36.0, 68.0], 0.0);
    let attrs = [ints("axes", &[0, 2]), int("keepdims", 0)];
    let out = run1("ReduceMean", 11, &attrs, &[&d()]).unwrap();
    assert_f32(&out, &[3], &[0.5, 4.5, 8.5], 0.0);
    let out = run1("ReduceL2", 18, &[], &[&d(), &axes(&[1])]).unwrap();
    let want = [
        7.681_145_7,
        6.633_25,
        5.916_08,
        5.656_854,
        16.583_124,
        18.220_867,
        19.874_607,
        21.540_659,
    ];
    assert_f32(&out, &[2, 1, 4], &want, 1e-6);
    let out = run1("ReduceMax", 18, &[int("keepdims", 0)], &[&d()]).unwrap();
    assert_f32(&out, &[], &[16.0], 0.0);
    let m = t(&[2, 3], vec![3i64, -9, 4, 7, 1, -2]);
    assert_eq!(
        values::<i64>(&run1("ReduceMin", 18, &[], &[&m, &axes(&[1])]).unwrap()),
        vec![-9, -2]
    );
}

#[test]
fn log_and_product_reductions() {
    let small = t(
        &[2, 3, 4],
        (0..24).map(|i| (i as f32 - 7.0) * 0.1).collect(),
    );
    let out = run1(
        "ReduceLogSumExp",
        18,
        &[int("keepdims", 0)],
        &[&small, &axes(&[-1])],
    )
    .unwrap();
    let want = [
        0.842_535_6,
        1.242_535_5,
        1.642_535_6,
        2.042_535_5,
        2.442_535_4,
        2.842_535_5,
    ];
    assert_f32(&out, &[2, 3], &want, 1e-6);
    let shifted = t(
        &[2, 3, 4],
        (0..24).map(|i| (i as f32 - 7.0) * 0.1 + 0.05).collect(),
    );
    let out = run1(
        "ReduceProd",
        18,
        &[int("keepdims", 0)],
        &[&shifted, &axes(&[0, 1])],
    )
    .unwrap();
    assert_f32(
        &out,
        &[4],
        &[0.017_193_517, 0.020_411_016, 0.010_527_89, -0.013_805_859],
        1e-5,
    );
}

#[test]
fn empty_sets_give_identities_and_noop_keeps_input() {
    let empty = t::<f32>(&[2, 0, 4], vec![]);
    let out = run1("ReduceMax", 18, &[], &[&empty, &axes(&[1])]).unwrap();
    assert_f32(&out, &[2, 1, 4], &[f32::NEG_INFINITY; 8], 0.0);
    let out = run1("ReduceProd", 18, &[], &[&empty, &axes(&[1])]).unwrap();
    assert_f32(&out, &[2, 1, 4], &[1.0; 8], 0.0);
    let out = run1("ReduceSum", 13, &[], &[&empty, &axes(&[1])]).unwrap();
    assert_f32(&out, &[2, 1, 4], &[0.0; 8], 0.0);
    let noop = [int("noop_with_empty_axes", 1)];
    let out = run1("ReduceSum", 13, &noop, &[&d(), &axes(&[])]).unwrap();
    assert_eq!(out, d());
    // Without noop, empty axes reduce everything.
    let out = run_op("ReduceSum", 13, &[], &[Some(&d()), None]).unwrap();
    assert_f32(&out[0], &[1, 1, 1], &[108.0], 0.0);
}

#[test]
fn bool_max_min_are_any_all() {
    let b = t(&[2, 2], vec![true, false, false, false]);
    assert_eq!(
        values::<bool>(&run1("ReduceMax", 20, &[], &[&b, &axes(&[1])]).unwrap()),
        vec![true, false]
    );
    assert_eq!(
        values::<bool>(&run1("ReduceMin", 20, &[], &[&b, &axes(&[0])]).unwrap()),
        vec![false, false]
    );
}

/// Large reductions take the parallel paths; checked against naive sums.
#[test]
fn large_reductions_match_naive_sums() {
    let (a, b, c) = (8usize, 3000usize, 3usize);
    let data: Vec<f32> = (0..a * b * c)
        .map(|i| ((i * 7919) % 1000) as f32 * 0.001)
        .collect();
    let x = t(&[a, b, c], data.clone());
    for (ax, shape) in [
        (vec![1i64], vec![a, 1, c]),
        (vec![0, 1, 2], vec![1, 1, 1]),
        (vec![2], vec![a, b, 1]),
    ] {
        let out = run1("ReduceSum", 13, &[], &[&x, &axes(&ax)]).unwrap();
        let mut want = vec![0f64; shape.iter().product()];
        for i in 0..a {
            for j in 0..b {
                for k in 0..c {
                    let o = [i, j, k];
                    let idx = (0..3).fold(0, |acc, d| {
                        acc * shape[d] + if shape[d] == 1 { 0 } else { o[d] }
                    });
                    want[idx] += data[(i * b + j) * c + k] as f64;
                }
            }
        }
        let want: Vec<f32> = want.into_iter().map(|v| v as f32).collect();
        assert_f32(&out, &shape, &want, 1e-5);
    }
}

#[test]
fn argmax_argmin() {
    let m = t(
        &[3, 4],
        vec![
            2.0f32, 5.0, 5.0, 1.0, 7.0, 7.0, 0.0, 7.0, 1.0, 1.0, 1.0, 1.0,
        ],
    );
    let last = [int("axis", 1), int("select_last_index", 1)];
    assert_eq!(
        values::<i64>(&run1("ArgMax", 13, &last, &[&m]).unwrap()),
        vec![2, 3, 3]
    );
    let out = run1("ArgMax", 13, &[int("axis", 1)], &[&m]).unwrap();
    assert_eq!(out.shape(), &[3, 1]);
    assert_eq!(values::<i64>(&out), vec![1, 0, 0]);
    let out = run1("ArgMin", 13, &[int("axis", 0), int("keepdims", 0)], &[&m]).unwrap();
    assert_eq!(out.shape(), &[4]);
    assert_eq!(values::<i64>(&out), vec![2, 2, 1, 0]);
}

#[test]
fn softmax_coerced_and_single_axis() {
    let s = t(
        &[2, 3, 4],
        (0..24).map(|i| (i % 5) as f32 * 0.7 - 1.0).collect(),
    );
    // numpy on the [2, 12] coercion (onnx.reference ignores the pre-13 coercion).
    let want11 = [
        0.015_066_301,
        0.030_339_805,
        0.061_096_858,
        0.123_033_96,
        0.247_759_98,
        0.015_066_301,
        0.030_339_805,
        0.061_096_858,
        0.123_033_96,
        0.247_759_98,
        0.015_066_301,
        0.030_339_805,
        0.053_653_758,
        0.108_045_4,
        0.217_576_73,
        0.013_230_855,
        0.026_643_671,
        0.053_653_758,
        0.108_045_4,
        0.217_576_73,
        0.013_230_855,
        0.026_643_671,
        0.053_653_758,
        0.108_045_4,
    ];
    assert_f32(
        &run1("Softmax", 11, &[], &[&s]).unwrap(),
        &[2, 3, 4],
        &want11,
        1e-5,
    );
    let want13 = [
        0.039_046,
        0.103_490_16,
        0.573_663_5,
        0.573_663_4,
        0.642_097_7,
        0.051_391_687,
        0.284_872_86,
        0.284_872_83,
        0.318_856_27,
        0.845_118_2,
        0.141_463_68,
        0.141_463_68,
        0.573_663_5,
        0.573_663_4,
        0.573_663_5,
        0.039_046,
        0.284_872_86,
        0.284_872_83,
        0.284_872_86,
        0.642_097_7,
        0.141_463_68,
        0.141_463_68,
        0.141_463_68,
        0.318_856_27,
    ];
    assert_f32(
        &run1("Softmax", 13, &[int("axis", 1)], &[&s]).unwrap(),
        &[2, 3, 4],
        &want13,
        1e-5,
    );
    let out = run1("LogSoftmax", 13, &[], &[&s]).unwrap();
    let first = &values::<f32>(&out)[..4];
    assert_f32(
        &t(&[4], first.to_vec()),
        &[4],
        &[-2.723_603_2, -2.023_603_4, -1.323_603_4, -0.623_603_5],
        1e-5,
    );
}

#[test]
fn cumsum_modes() {
    let x = t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]);
    let attrs = [int("exclusive", 1), int("reverse", 1)];
    let out = run1("CumSum", 14, &attrs, &[&x, &Tensor::scalar(1i32)]).unwrap();
    assert_eq!(values::<i32>(&out), vec![5, 3, 0, 11, 6, 0]);
    let x = t(&[2, 3], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = run1("CumSum", 14, &[], &[&x, &Tensor::scalar(0i64)]).unwrap();
    assert_eq!(values::<f64>(&out), vec![1.0, 2.0, 3.0, 5.0, 7.0, 9.0]);
}

#[test]
fn errors_are_typed() {
    assert!(matches!(
        run1("ReduceSum", 13, &[], &[&d(), &axes(&[3])]),
        Err(KernelError::InvalidValue(_))
    ));
    let strings = t(&[1], vec!["a".to_string()]);
    assert!(matches!(
        run1("ReduceSum", 13, &[], &[&strings]),
        Err(KernelError::UnsupportedDType { .. })
    ));
    let b = t(&[1], vec![true]);
    assert!(matches!(
        run1("ReduceSum", 13, &[], &[&b]),
        Err(KernelError::UnsupportedDType { .. })
    ));
    assert!(matches!(
        run1("ReduceMean", 18, &[int("keepdims", 2)], &[&d()]),
        Err(KernelError::BadAttribute { .. })
    ));
    // Axes as an attribute are rejected once they became an input.
    assert!(matches!(
        run1("ReduceMean", 18, &[ints("axes", &[0])], &[&d()]),
        Err(KernelError::UnsupportedAttribute { .. })
    ));
    assert!(matches!(
        run1("ArgMax", 13, &[int("axis", -4)], &[&d()]),
        Err(KernelError::InvalidValue(_))
    ));
    let empty = t::<f32>(&[2, 0], vec![]);
    assert!(matches!(
        run1("ArgMax", 13, &[int("axis", 1)], &[&empty]),
        Err(KernelError::InvalidValue(_))
    ));
    assert!(matches!(
        run1("Softmax", 13, &[], &[&t(&[1], vec![1i32])]),
        Err(KernelError::UnsupportedDType { .. })
    ));
    let two = t(&[2], vec![0i64, 1]);
    assert!(matches!(
        run1("CumSum", 14, &[], &[&d(), &two]),
        Err(KernelError::Shape(_))
    ));
}
