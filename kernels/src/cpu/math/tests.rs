//! Unit tests of the math family; expected values worked out by hand (and checked with numpy).

use crate::cpu::binary::test_util::{assert_f32, run1, t, values};
use crate::{AttrValue, Tensor};

#[test]
fn det_pivots_and_keeps_the_sign() {
    // A zero in the first pivot position forces a row swap.
    let m = t(
        &[2, 3, 3],
        vec![
            0.0f32, 1.0, 2.0, 1.0, 0.0, 3.0, 4.0, -3.0, 8.0, //
            2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 4.0,
        ],
    );
    let out = run1("Det", 11, &[], &[&m]).unwrap();
    assert_f32(&out, &[2], &[-2.0, 24.0], 1e-6);
    let singular = t(&[2, 2], vec![1.0f64, 2.0, 2.0, 4.0]);
    let out = run1("Det", 22, &[], &[&singular]).unwrap();
    assert_eq!(values::<f64>(&out), vec![0.0]);
    assert!(run1("Det", 22, &[], &[&t(&[2, 3], vec![0.0f32; 6])]).is_err());
}

#[test]
fn bitshift_past_the_width_is_zero() {
    let x = t(&[3], vec![0x81u8, 1, 255]);
    let by = t(&[3], vec![1u8, 8, 200]);
    let dir = |d: &str| [("direction", AttrValue::String(d.into()))];
    let out = run1("BitShift", 11, &dir("LEFT"), &[&x, &by]).unwrap();
    assert_eq!(values::<u8>(&out), vec![0x02, 0, 0]);
    let out = run1("BitShift", 11, &dir("RIGHT"), &[&x, &by]).unwrap();
    assert_eq!(values::<u8>(&out), vec![0x40, 0, 0]);
    assert!(run1("BitShift", 11, &dir("UP"), &[&x, &by]).is_err());
    let signed = t(&[1], vec![1i32]);
    assert!(run1("BitShift", 11, &dir("LEFT"), &[&signed, &signed]).is_err());
}

#[test]
fn bitwise_ops_broadcast() {
    let a = t(&[2, 2], vec![0b1100i16, -1, 7, 0]);
    let b = t(&[2], vec![0b1010i16, 3]);
    assert_eq!(
        values::<i16>(&run1("BitwiseAnd", 18, &[], &[&a, &b]).unwrap()),
        vec![0b1000, 3, 2, 0]
    );
    assert_eq!(
        values::<i16>(&run1("BitwiseOr", 18, &[], &[&a, &b]).unwrap()),
        vec![0b1110, -1, 15, 3]
    );
    assert_eq!(
        values::<i16>(&run1("BitwiseXor", 18, &[], &[&a, &b]).unwrap()),
        vec![0b0110, -4, 13, 3]
    );
    assert_eq!(
        values::<i16>(&run1("BitwiseNot", 18, &[], &[&a]).unwrap()),
        vec![!0b1100, 0, -8, -1]
    );
    let f = t(&[1], vec![1.0f32]);
    assert!(run1("BitwiseNot", 18, &[], &[&f]).is_err());
}

#[test]
fn isinf_by_sign_and_isnan() {
    let x = t(&[4], vec![f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1.0]);
    let neg_only = [("detect_positive", AttrValue::Int(0))];
    assert_eq!(
        values::<bool>(&run1("IsInf", 20, &neg_only, &[&x]).unwrap()),
        vec![false, true, false, false]
    );
    assert_eq!(
        values::<bool>(&run1("IsInf", 20, &[], &[&x]).unwrap()),
        vec![true, true, false, false]
    );
    assert_eq!(
        values::<bool>(&run1("IsNaN", 20, &[], &[&x]).unwrap()),
        vec![false, false, true, false]
    );
}

#[test]
fn windows_periodic_and_symmetric() {
    let size = Tensor::scalar(4i64);
    let out = run1("HannWindow", 17, &[], &[&size]).unwrap();
    assert_f32(&out, &[4], &[0.0, 0.5, 1.0, 0.5], 1e-6);
    let symmetric = [("periodic", AttrValue::Int(0))];
    let out = run1("HannWindow", 17, &symmetric, &[&size]).unwrap();
    assert_f32(&out, &[4], &[0.0, 0.75, 0.75, 0.0], 1e-6);
    // Hamming: 25/46 - 21/46 cos(2πn/4) = [4/46, 25/46, 46/46, 25/46].
    let out = run1("HammingWindow", 17, &[], &[&size]).unwrap();
    assert_f32(
        &out,
        &[4],
        &[4.0 / 46.0, 25.0 / 46.0, 1.0, 25.0 / 46.0],
        1e-6,
    );
    // Blackman at n = 0, 1, 2, 3 of 4: 0.42 - 0.5 + 0.08, 0.42 - 0.08, 0.42 + 0.5 + 0.08, …
    let double = [("output_datatype", AttrValue::Int(11))];
    let out = run1("BlackmanWindow", 17, &double, &[&size]).unwrap();
    let got = values::<f64>(&out);
    let want = [0.0, 0.34, 1.0, 0.34];
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{got:?}");
    }
}
