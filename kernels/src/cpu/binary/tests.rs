//! Unit tests of the binary family. Expected values come from `onnx.reference`
//! (onnx 1.22) / numpy, or from an independent naive loop for the large cases.

#![allow(clippy::excessive_precision, clippy::approx_constant)]

use super::broadcast::broadcast_shapes;
use super::test_util::{assert_f32, run_op, run1, t, values};
use crate::{AttrValue, DType, KernelError, Tensor};

fn arange(shape: &[usize], scale: f32, offset: f32) -> Tensor {
    let n: usize = shape.iter().product();
    t(shape, (0..n).map(|i| i as f32 * scale + offset).collect())
}

#[test]
fn add_broadcasts_like_numpy() {
    let a = arange(&[2, 3, 4], 0.5, -3.0);
    let b = t(&[3, 1], vec![1.5f32, -2.0, 0.25]);
    let want = [
        -1.5, -1.0, -0.5, 0.0, -3.0, -2.5, -2.0, -1.5, 1.25, 1.75, 2.25, 2.75, 4.5, 5.0, 5.5, 6.0,
        3.0, 3.5, 4.0, 4.5, 7.25, 7.75, 8.25, 8.75,
    ];
    assert_f32(
        &run1("Add", 14, &[], &[&a, &b]).unwrap(),
        &[2, 3, 4],
        &want,
        0.0,
    );
    // Swapped operands give the same sums.
    assert_f32(
        &run1("Add", 14, &[], &[&b, &a]).unwrap(),
        &[2, 3, 4],
        &want,
        0.0,
    );
}

/// Every broadcast pattern the engine special-cases, on tensors big enough to go parallel,
/// checked against a naive index computation.
#[test]
fn large_broadcasts_match_naive_loop() {
    let out_shape = [16usize, 33, 80];
    let shapes: &[(&[usize], &[usize])] = &[
        (&[16, 33, 80], &[16, 33, 80]),
        (&[16, 33, 80], &[]),
        (&[16, 33, 80], &[80]),
        (&[16, 33, 80], &[33, 1]),
        (&[16, 1, 80], &[1, 33, 1]),
        (&[1, 33, 80], &[16, 1, 1]),
    ];
    for (sa, sb) in shapes {
        let a = arange(sa, 0.25, -7.0);
        let b = arange(sb, -0.5, 3.0);
        let out = run1("Sub", 14, &[], &[&a, &b]).unwrap();
        let (va, vb) = (values::<f32>(&a), values::<f32>(&b));
        let index = |shape: &[usize], idx: &[usize]| {
            let off = idx.len() - shape.len();
            shape.iter().enumerate().fold(0, |acc, (i, &d)| {
                acc * d + if d == 1 { 0 } else { idx[off + i] }
            })
        };
        let mut want = Vec::new();
        for i in 0..out_shape[0] {
            for j in 0..out_shape[1] {
                for k in 0..out_shape[2] {
                    want.push(va[index(sa, &[i, j, k])] - vb[index(sb, &[i, j, k])]);
                }
            }
        }
        assert_f32(&out, &out_shape, &want, 0.0);
    }
}

#[test]
fn integer_division_and_mod_follow_c_and_numpy() {
    let a = t(&[4], vec![7i32, -7, 7, -7]);
    let b2 = t(&[4], vec![2i32, 2, -2, -2]);
    assert_eq!(
        values::<i32>(&run1("Div", 14, &[], &[&a, &b2]).unwrap()),
        vec![3, -3, -3, 3]
    );
    let b3 = t(&[4], vec![3i32, 3, -3, -3]);
    assert_eq!(
        values::<i32>(&run1("Mod", 13, &[], &[&a, &b3]).unwrap()),
        vec![1, 2, -2, -1]
    );
    let fmod = [("fmod", AttrValue::Int(1))];
    assert_eq!(
        values::<i32>(&run1("Mod", 13, &fmod, &[&a, &b3]).unwrap()),
        vec![1, -1, 1, -1]
    );
    // Division by zero is an error (ORT's too), not a trap or a made-up value.
    let z = t(&[1], vec![0u8]);
    assert!(matches!(
        run1("Div", 14, &[], &[&t(&[1], vec![9u8]), &z]),
        Err(KernelError::InvalidValue(_))
    ));
    // Wrapping arithmetic (numpy).
    let out = run1(
        "Add",
        14,
        &[],
        &[&t(&[1], vec![250u8]), &t(&[1], vec![10u8])],
    )
    .unwrap();
    assert_eq!(values::<u8>(&out), vec![4]);
}

#[test]
fn pow_with_mixed_types() {
    let base = t(&[3], vec![1i32, 2, 3]);
    let exp = t(&[3], vec![0.5f32, 2.0, 1.5]);
    assert_eq!(
        values::<i32>(&run1("Pow", 15, &[], &[&base, &exp]).unwrap()),
        vec![1, 4, 5]
    );
    let base = t(&[3], vec![1.5f32, 2.0, -3.0]);
    let exp = t(&[3], vec![2i64, -1, 3]);
    assert_f32(
        &run1("Pow", 15, &[], &[&base, &exp]).unwrap(),
        &[3],
        &[2.25, 0.5, -27.0],
        0.0,
    );
    assert!(matches!(
        run1("Pow", 7, &[], &[&base, &exp]),
        Err(KernelError::DTypeMismatch(_))
    ));
}

#[test]
fn variadic_ops() {
    let a = t(&[3], vec![1.0f32, f32::NAN, 3.0]);
    let b = t(&[3], vec![2.0f32, 2.0, f32::NAN]);
    assert_f32(
        &run1("Max", 13, &[], &[&a, &b]).unwrap(),
        &[3],
        &[2.0, f32::NAN, f32::NAN],
        0.0,
    );
    let a = t(&[3], vec![1.0f32, 2.0, 3.0]);
    let b = t(&[2, 1], vec![4.0f32, 5.0]);
    let c = Tensor::scalar(3.0f32);
    let want = [2.666_666_7, 3.0, 3.333_333_3, 3.0, 3.333_333_3, 3.666_666_7];
    assert_f32(
        &run1("Mean", 13, &[], &[&a, &b, &c]).unwrap(),
        &[2, 3],
        &want,
        1e-6,
    );
    let out = run1(
        "Min",
        13,
        &[],
        &[&t(&[2], vec![5i64, -9]), &t(&[1], vec![0i64])],
    )
    .unwrap();
    assert_eq!(values::<i64>(&out), vec![0, -9]);
    assert_f32(
        &run1("Sum", 13, &[], &[&a]).unwrap(),
        &[3],
        &[1.0, 2.0, 3.0],
        0.0,
    );
}

#[test]
fn prelu_broadcasts_slope() {
    let x = arange(&[2, 3, 4], 0.5, -3.0);
    let slope = t(&[4], vec![0.1f32, 0.2, 0.3, 0.4]);
    let want = [
        -0.3, -0.5, -0.6, -0.6, -0.1, -0.1, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
        5.5, 6.0, 6.5, 7.0, 7.5, 8.0, 8.5,
    ];
    assert_f32(
        &run1("PRelu", 16, &[], &[&x, &slope]).unwrap(),
        &[2, 3, 4],
        &want,
        1e-6,
    );
}

#[test]
fn comparisons_strings_and_where() {
    let a = t(
        &[2, 2],
        vec!["a".to_string(), "b".into(), "c".into(), "b".into()],
    );
    let b = t(&[2], vec!["c".to_string(), "b".into()]);
    assert_eq!(
        values::<bool>(&run1("Equal", 19, &[], &[&a, &b]).unwrap()),
        vec![false, true, true, true]
    );
    let x = t(&[3], vec![1i8, 5, -2]);
    let y = t(&[1], vec![1i8]);
    assert_eq!(
        values::<bool>(&run1("GreaterOrEqual", 16, &[], &[&x, &y]).unwrap()),
        vec![true, true, false]
    );
    assert_eq!(
        values::<bool>(&run1("Less", 13, &[], &[&x, &y]).unwrap()),
        vec![false, false, true]
    );
    let p = t(&[2], vec![true, false]);
    let q = t(&[2, 1], vec![true, false]);
    assert_eq!(
        values::<bool>(&run1("Xor", 7, &[], &[&p, &q]).unwrap()),
        vec![false, true, true, false]
    );
    // Where: condition [2,1], x [2] strings, y scalar.
    let c = t(&[2, 1], vec![true, false]);
    let xs = t(&[2], vec!["p".to_string(), "q".into()]);
    let ys = Tensor::scalar("z".to_string());
    let out = run1("Where", 16, &[], &[&c, &xs, &ys]).unwrap();
    assert_eq!(out.shape(), &[2, 2]);
    assert_eq!(values::<String>(&out), vec!["p", "q", "z", "z"]);
}

#[test]
fn errors_are_typed() {
    assert!(broadcast_shapes(&[&[2, 3], &[4]]).is_err());
    let a = arange(&[2, 3], 1.0, 0.0);
    let b = arange(&[4], 1.0, 0.0);
    assert!(matches!(
        run1("Add", 14, &[], &[&a, &b]),
        Err(KernelError::Shape(_))
    ));
    let i = t(&[1], vec![1i32]);
    assert!(matches!(
        run1("Mul", 14, &[], &[&a, &i]),
        Err(KernelError::DTypeMismatch(_))
    ));
    let bools = t(&[1], vec![true]);
    assert!(matches!(
        run1("Add", 14, &[], &[&bools, &bools]),
        Err(KernelError::UnsupportedDType {
            index: 0,
            dtype: DType::Bool
        })
    ));
    assert!(matches!(
        run1("And", 7, &[], &[&a, &a]),
        Err(KernelError::UnsupportedDType { .. })
    ));
    assert!(matches!(
        run1("Mod", 13, &[], &[&a, &a]),
        Err(KernelError::BadAttribute { .. })
    ));
    let bad = [("fmod", AttrValue::Int(2))];
    assert!(matches!(
        run1("Mod", 13, &bad, &[&i, &i]),
        Err(KernelError::BadAttribute { .. })
    ));
    // PRelu's slope may grow X's shape (numpy broadcasting, as ONNX's reference and ORT do).
    let x = arange(&[3], 1.0, -1.0);
    let slope = arange(&[2, 3], 1.0, 0.0);
    let out = run1("PRelu", 16, &[], &[&x, &slope]).unwrap();
    assert_eq!(out.shape(), &[2, 3]);
    assert_eq!(values::<f32>(&out), [0.0, 0.0, 1.0, -3.0, 0.0, 1.0]);
    // Integer division and modulo by zero are errors (ORT's too), not a made-up 0.
    let n = Tensor::from(ndarray::arr1(&[7i64, 8]).into_dyn());
    let d = Tensor::from(ndarray::arr1(&[2i64, 0]).into_dyn());
    for (op, attrs) in [
        ("Div", &[][..]),
        ("Mod", &[][..]),
        ("Mod", &[("fmod", AttrValue::Int(1))][..]),
    ] {
        assert!(
            matches!(
                run1(op, 13, attrs, &[&n, &d]),
                Err(KernelError::InvalidValue(_))
            ),
            "{op} {attrs:?}"
        );
    }
    assert!(matches!(
        run_op("Add", 14, &[], &[Some(&a), None]),
        Err(KernelError::Arity(_))
    ));
    let legacy = [("broadcast", AttrValue::Int(1))];
    assert!(matches!(
        run1("Add", 6, &legacy, &[&a, &a]),
        Err(KernelError::UnsupportedOpset { .. })
    ));
    let c = t(&[1], vec![1.0f32]);
    assert!(matches!(
        run1("Where", 16, &[], &[&c, &a, &a]),
        Err(KernelError::UnsupportedDType { index: 0, .. })
    ));
}

#[test]
fn pow_of_two_is_the_square_with_the_base_shape() {
    let base = t(&[2, 3], vec![1.5f32, -2.0, 0.0, -0.0, f32::INFINITY, 3e20]);
    for exp in [t(&[1], vec![2.0f32]), t(&[], vec![2.0f32])] {
        let out = run1("Pow", 15, &[], &[&base, &exp]).unwrap();
        assert_eq!(out.shape(), [2, 3]);
        let got: Vec<f32> = values::<f32>(&out);
        let want: Vec<f32> = [1.5f32, -2.0, 0.0, -0.0, f32::INFINITY, 3e20]
            .iter()
            .map(|p| p.powf(2.0))
            .collect();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
    // A scalar base and an exponent of rank 1 broadcast to rank 1, as before.
    let out = run1(
        "Pow",
        15,
        &[],
        &[&t(&[], vec![3.0f32]), &t(&[1], vec![2.0f32])],
    )
    .unwrap();
    assert_eq!(out.shape(), [1]);
    assert_eq!(values::<f32>(&out), [9.0]);
}
