//! Unit tests of the unary family. Expected values come from `onnx.reference`
//! (onnx 1.22) or numpy, not from these kernels.

#![allow(clippy::excessive_precision, clippy::approx_constant)]

use crate::cpu::binary::test_util::{assert_f32, run1, t, values};
use crate::{AttrValue, DType, KernelError, Tensor};

const X: [f32; 7] = [-3.5, -1.0, -0.25, 0.0, 0.5, 2.0, 10.0];

fn x() -> Tensor {
    t(&[7], X.to_vec())
}

/// Op type, attributes, expected outputs for [`X`].
type Case<'a> = (&'a str, &'a [(&'a str, AttrValue)], [f32; 7]);

#[test]
fn activations_match_reference() {
    let cases: &[Case] = &[
        (
            "Sigmoid",
            &[],
            [
                0.029_312_23,
                0.268_941_4,
                0.437_823_47,
                0.5,
                0.622_459_35,
                0.880_797,
                0.999_954_6,
            ],
        ),
        (
            "Tanh",
            &[],
            [
                -0.998_177_9,
                -0.761_594_2,
                -0.244_918_66,
                0.0,
                0.462_117_2,
                0.964_027_6,
                1.0,
            ],
        ),
        (
            "Erf",
            &[],
            [
                -0.999_999_3,
                -0.842_700_8,
                -0.276_326_4,
                0.0,
                0.520_499_9,
                0.995_322_3,
                1.0,
            ],
        ),
        (
            "Softplus",
            &[],
            [
                0.029_750_416,
                0.313_261_66,
                0.575_939_4,
                0.693_147_2,
                0.974_077,
                2.126_927_9,
                10.000_046,
            ],
        ),
        (
            "Selu",
            &[],
            [
                -1.705_009_3,
                -1.111_330_7,
                -0.388_890_27,
                0.0,
                0.525_350_5,
                2.101_402,
                10.507_01,
            ],
        ),
        (
            "HardSwish",
            &[],
            [
                -0.0,
                -0.333_333_3,
                -0.114_583_336,
                0.0,
                0.291_666_66,
                1.666_666_7,
                10.0,
            ],
        ),
        (
            "Elu",
            &[("alpha", AttrValue::Float(0.5))],
            [
                -0.484_901_3,
                -0.316_060_3,
                -0.110_599_64,
                0.0,
                0.5,
                2.0,
                10.0,
            ],
        ),
        (
            "Celu",
            &[],
            [
                -0.969_802_6,
                -0.632_120_6,
                -0.221_199_27,
                0.0,
                0.5,
                2.0,
                10.0,
            ],
        ),
        (
            "Softsign",
            &[],
            [
                -0.777_777_8,
                -0.5,
                -0.2,
                0.0,
                0.333_333_34,
                0.666_666_7,
                0.909_090_9,
            ],
        ),
        ("HardSigmoid", &[], [0.0, 0.3, 0.45, 0.5, 0.6, 0.9, 1.0]),
        (
            "Gelu",
            &[],
            [
                -0.000_814_229_25,
                -0.158_655_26,
                -0.100_323_42,
                0.0,
                0.345_731_23,
                1.954_499_7,
                10.0,
            ],
        ),
        (
            "Gelu",
            &[("approximate", AttrValue::String("tanh".into()))],
            [
                -0.000_616_148_1,
                -0.158_808,
                -0.100_324_646,
                0.0,
                0.345_714,
                1.954_597_7,
                10.0,
            ],
        ),
    ];
    for (op, attrs, want) in cases {
        let opset = if *op == "Gelu" { 20 } else { 22 };
        let out = run1(op, opset, attrs, &[&x()]).unwrap();
        assert_f32(&out, &[7], want, 2e-6);
    }
}

/// Long tensors go through the chunked copy-and-finish path in parallel chunks, the last one
/// ragged; every element must match the definition (computed here in `f64`).
#[test]
fn long_sigmoid_and_exp_match_the_definition() {
    let len = 100_003;
    let xs: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin() * 20.0).collect();
    let input = t(&[len], xs.clone());
    type Definition = fn(f64) -> f64;
    let defs: [(&str, Definition); 2] =
        [("Sigmoid", |x| 1.0 / (1.0 + (-x).exp())), ("Exp", f64::exp)];
    for (op, def) in defs {
        let got = values::<f32>(&run1(op, 13, &[], &[&input]).unwrap());
        assert_eq!(got.len(), len, "{op}");
        for (i, (&g, &x)) in got.iter().zip(&xs).enumerate() {
            let want = def(x as f64);
            assert!(
                (g as f64 - want).abs() <= 1e-6 * want.abs().max(1e-30),
                "{op} element {i}: {g} vs {want}"
            );
        }
    }
}

#[test]
fn round_is_half_to_even_and_f64_works() {
    let out = run1(
        "Round",
        11,
        &[],
        &[&t(&[7], vec![0.5f32, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6])],
    )
    .unwrap();
    assert_f32(&out, &[7], &[0.0, 2.0, 2.0, -0.0, -2.0, 2.0, -3.0], 0.0);
    let out = run1("Sqrt", 13, &[], &[&t(&[2], vec![4.0f64, 2.0])]).unwrap();
    assert_eq!(values::<f64>(&out), vec![2.0, std::f64::consts::SQRT_2]);
}

#[test]
fn half_types_compute_through_f32() {
    let h = t(
        &[3],
        vec![
            half::f16::from_f32(-1.0),
            half::f16::from_f32(0.0),
            half::f16::from_f32(2.0),
        ],
    );
    let out = run1("Relu", 14, &[], &[&h]).unwrap();
    assert_eq!(out.dtype(), DType::F16);
    assert_eq!(
        values::<half::f16>(&out),
        vec![half::f16::ZERO, half::f16::ZERO, half::f16::from_f32(2.0)]
    );
}

#[test]
fn integer_unary_ops() {
    let out = run1("Relu", 14, &[], &[&t(&[3], vec![-4i32, 0, 9])]).unwrap();
    assert_eq!(values::<i32>(&out), vec![0, 0, 9]);
    // numpy: np.abs(np.int8(-128)) wraps to -128.
    let out = run1("Abs", 13, &[], &[&t(&[3], vec![-128i8, -1, 5])]).unwrap();
    assert_eq!(values::<i8>(&out), vec![-128, 1, 5]);
    let out = run1("Sign", 13, &[], &[&t(&[3], vec![-7i64, 0, 3])]).unwrap();
    assert_eq!(values::<i64>(&out), vec![-1, 0, 1]);
    let out = run1("Neg", 13, &[], &[&t(&[2], vec![-7i16, 3])]).unwrap();
    assert_eq!(values::<i16>(&out), vec![7, -3]);
    let out = run1("Not", 1, &[], &[&t(&[2], vec![true, false])]).unwrap();
    assert_eq!(values::<bool>(&out), vec![false, true]);
}

#[test]
fn clip_attribute_and_input_forms() {
    let attrs = [
        ("min", AttrValue::Float(-1.0)),
        ("max", AttrValue::Float(1.5)),
    ];
    let out = run1("Clip", 6, &attrs, &[&x()]).unwrap();
    assert_f32(&out, &[7], &[-1.0, -1.0, -0.25, 0.0, 0.5, 1.5, 1.5], 0.0);
    // Opset 13, int8 with only `min` given (numpy.clip).
    let data = t(&[5], vec![-128i8, -5, 0, 5, 127]);
    let lo = Tensor::scalar(-3i8);
    let out = run1("Clip", 13, &[], &[&data, &lo]).unwrap();
    assert_eq!(values::<i8>(&out), vec![-3, -3, 0, 5, 127]);
    // Only `max`: the `min` input is omitted.
    let hi = Tensor::scalar(0.0f32);
    let out =
        crate::cpu::binary::test_util::run_op("Clip", 13, &[], &[Some(&x()), None, Some(&hi)])
            .unwrap();
    assert_f32(&out[0], &[7], &[-3.5, -1.0, -0.25, 0.0, 0.0, 0.0, 0.0], 0.0);
}

#[test]
fn errors_are_typed() {
    let ints = t(&[2], vec![1i32, 2]);
    assert!(matches!(
        run1("Sigmoid", 13, &[], &[&ints]),
        Err(KernelError::UnsupportedDType {
            index: 0,
            dtype: DType::I32
        })
    ));
    assert!(matches!(
        run1("Neg", 13, &[], &[&t(&[1], vec![1u8])]),
        Err(KernelError::UnsupportedDType { .. })
    ));
    assert!(matches!(
        run1("Not", 1, &[], &[&x()]),
        Err(KernelError::UnsupportedDType { .. })
    ));
    let bad = [("approximate", AttrValue::String("erf".into()))];
    assert!(matches!(
        run1("Gelu", 20, &bad, &[&x()]),
        Err(KernelError::BadAttribute { .. })
    ));
    let unknown = [("beta", AttrValue::Float(1.0))];
    assert!(matches!(
        run1("Relu", 14, &unknown, &[&x()]),
        Err(KernelError::UnsupportedAttribute { .. })
    ));
    assert!(matches!(
        run1("Relu", 5, &[], &[&x()]),
        Err(KernelError::UnsupportedOpset { .. })
    ));
    let wrong_type = [("alpha", AttrValue::Int(1))];
    assert!(matches!(
        run1("LeakyRelu", 16, &wrong_type, &[&x()]),
        Err(KernelError::BadAttribute { .. })
    ));
    // Clip bounds must be scalars of the input's type.
    let not_scalar = t(&[2], vec![0.0f32, 1.0]);
    assert!(matches!(
        run1("Clip", 13, &[], &[&x(), &not_scalar]),
        Err(KernelError::Shape(_))
    ));
    let other_type = Tensor::scalar(0.0f64);
    assert!(matches!(
        run1("Clip", 13, &[], &[&x(), &other_type]),
        Err(KernelError::DTypeMismatch(_))
    ));
}

#[test]
fn float_activations_keep_nan() {
    // numpy and `onnx.reference` give NaN for NaN; a `max`/`min` form would give 0.
    let nan = t(&[2], vec![f32::NAN, -1.0]);
    for op in [
        "Celu",
        "Elu",
        "Selu",
        "Sigmoid",
        "Tanh",
        "Softsign",
        "Softplus",
        "Gelu",
        "HardSigmoid",
        "HardSwish",
    ] {
        let out = values::<f32>(&run1(op, 20, &[], &[&nan]).unwrap());
        assert!(out[0].is_nan(), "{op}(NaN) = {}", out[0]);
        assert!(!out[1].is_nan(), "{op}(-1) = NaN");
    }
    // alpha = 0 divides by zero: numpy's form gives NaN for every x but -inf … 0.
    let zero_alpha = [("alpha", AttrValue::Float(0.0))];
    let out = values::<f32>(&run1("Celu", 12, &zero_alpha, &[&t(&[1], vec![2.0f32])]).unwrap());
    assert!(out[0].is_nan(), "Celu(2, alpha 0) = {}", out[0]);
}
