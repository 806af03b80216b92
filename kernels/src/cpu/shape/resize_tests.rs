//! Unit tests of `Resize` and `Upsample`.

use super::resize::{build_resize, build_upsample};
use crate::Tensor;
use crate::error::{KernelError, Result};
use crate::kernel::NodeSpec;
use crate::{AttrValue, Attributes};

fn attrs(list: &[(&str, AttrValue)]) -> Attributes {
    list.iter()
        .fold(Attributes::new(), |a, (k, v)| a.with(k, v.clone()))
}

fn s(v: &str) -> AttrValue {
    AttrValue::String(v.into())
}

fn run(
    attrs: &Attributes,
    x: &Tensor,
    roi: Option<&[f32]>,
    scales: Option<&[f32]>,
    sizes: Option<&[i64]>,
) -> Result<Tensor> {
    let spec = NodeSpec {
        op_type: "Resize",
        domain: "",
        opset: 19,
        attrs,
        num_inputs: 4,
        num_outputs: 1,
        options: Default::default(),
    };
    let roi = roi.map(|r| Tensor::from_shape_vec(&[r.len()], r.to_vec()).unwrap());
    let sc = scales.map(|r| Tensor::from_shape_vec(&[r.len()], r.to_vec()).unwrap());
    let sz = sizes.map(|r| Tensor::from_shape_vec(&[r.len()], r.to_vec()).unwrap());
    Ok(build_resize(&spec)?
        .run(&[Some(x), roi.as_ref(), sc.as_ref(), sz.as_ref()])?
        .remove(0))
}

fn assert_close(t: &Tensor, shape: &[usize], exp: &[f32]) {
    assert_eq!(t.shape(), shape);
    let got = t.to_f32_array().unwrap();
    for (g, e) in got.iter().zip(exp) {
        assert!((g - e).abs() < 1e-5, "{got:?} vs {exp:?}");
    }
}

fn x22() -> Tensor {
    Tensor::from_shape_vec(&[1, 1, 2, 2], vec![1.0f32, 2., 3., 4.]).unwrap()
}

fn x44() -> Tensor {
    Tensor::from_shape_vec(&[1, 1, 4, 4], (0..16).map(|v| v as f32).collect()).unwrap()
}

// Expected values below come from onnx.reference.ReferenceEvaluator (onnx 1.22).

#[test]
fn linear_align_corners() {
    let a = attrs(&[
        ("mode", s("linear")),
        ("coordinate_transformation_mode", s("align_corners")),
    ]);
    let out = run(&a, &x22(), None, Some(&[1., 1., 2., 2.]), None).unwrap();
    let t = 1.0 / 3.0;
    let exp = [
        1.,
        1. + t,
        1. + 2. * t,
        2.,
        1. + 2. * t,
        2.,
        2. + t,
        2. + 2. * t,
        2. + t,
        2. + 2. * t,
        3.,
        3. + t,
        3.,
        3. + t,
        3. + 2. * t,
        4.,
    ];
    assert_close(&out, &[1, 1, 4, 4], &exp);
}

#[test]
fn nearest_round_prefer_ceil_asymmetric_sizes() {
    let a = attrs(&[
        ("mode", s("nearest")),
        ("coordinate_transformation_mode", s("asymmetric")),
        ("nearest_mode", s("round_prefer_ceil")),
    ]);
    let out = run(&a, &x22(), None, None, Some(&[1, 1, 3, 3])).unwrap();
    assert_close(&out, &[1, 1, 3, 3], &[1., 2., 2., 3., 4., 4., 3., 4., 4.]);
}

#[test]
#[allow(clippy::excessive_precision)]
fn cubic_downsample() {
    let a = attrs(&[("mode", s("cubic"))]);
    let out = run(&a, &x44(), None, Some(&[1., 1., 0.75, 0.75]), None).unwrap();
    let exp = [
        0.6307917, 2.0046339, 3.3784776, 6.1261606, 7.5, 8.873845, 11.621535, 12.995373, 14.369221,
    ];
    assert_close(&out, &[1, 1, 3, 3], &exp);
}

#[test]
fn tf_crop_and_resize_with_axes_and_extrapolation() {
    let a = attrs(&[
        ("mode", s("linear")),
        ("coordinate_transformation_mode", s("tf_crop_and_resize")),
        ("extrapolation_value", AttrValue::Float(-1.0)),
        ("axes", AttrValue::Ints(vec![2, 3])),
    ]);
    let out = run(&a, &x44(), Some(&[0.4, 0.6, 1.2, 1.0]), None, Some(&[3, 2])).unwrap();
    assert_close(&out, &[1, 1, 3, 2], &[6.6, 7.8, 11.4, 12.6, -1., -1.]);
}

#[test]
fn linear_antialias_downsample() {
    let a = attrs(&[("mode", s("linear")), ("antialias", AttrValue::Int(1))]);
    let out = run(&a, &x44(), None, None, Some(&[1, 1, 2, 2])).unwrap();
    assert_close(&out, &[1, 1, 2, 2], &[3.125, 4.875, 10.125, 11.875]);
}

#[test]
fn uint8_rounds_and_saturates() {
    let a = attrs(&[("mode", s("linear"))]);
    let x = Tensor::from_shape_vec(&[1, 4], vec![10u8, 20, 200, 250]).unwrap();
    let out = run(&a, &x, None, Some(&[1., 1.5]), None).unwrap();
    assert_eq!(
        out,
        Tensor::from_shape_vec(&[1, 6], vec![10u8, 15, 50, 170, 225, 250]).unwrap()
    );
}

#[test]
fn bad_inputs_are_typed_errors() {
    // Attributes not supported: area mode, half_pixel_symmetric, antialias.
    for (a, opset) in [
        (attrs(&[("mode", s("area"))]), 19),
        (
            attrs(&[("coordinate_transformation_mode", s("half_pixel_symmetric"))]),
            18,
        ),
        (
            attrs(&[("mode", s("nearest")), ("antialias", AttrValue::Int(1))]),
            19,
        ),
    ] {
        let spec = NodeSpec {
            op_type: "Resize",
            domain: "",
            opset,
            attrs: &a,
            num_inputs: 3,
            num_outputs: 1,
            options: Default::default(),
        };
        assert!(matches!(
            build_resize(&spec),
            Err(KernelError::UnsupportedAttribute { .. })
        ));
    }
    let a = attrs(&[]);
    assert!(matches!(
        run(&a, &x22(), None, Some(&[1., 2.]), None),
        Err(KernelError::InvalidValue(_))
    ));
    assert!(matches!(
        run(
            &a,
            &x22(),
            None,
            Some(&[1., 1., 2., 2.]),
            Some(&[1, 1, 4, 4])
        ),
        Err(KernelError::InvalidValue(_))
    ));
    assert!(matches!(
        run(&a, &x22(), None, None, None),
        Err(KernelError::Arity(_))
    ));
}

#[test]
fn upsample_opset7_nearest_repeats() {
    // numpy: np.repeat(np.repeat(x, 2, axis=2), 3, axis=3)
    let a = attrs(&[
        ("mode", s("nearest")),
        ("scales", AttrValue::Floats(vec![1., 1., 2., 3.])),
    ]);
    let spec = NodeSpec {
        op_type: "Upsample",
        domain: "",
        opset: 7,
        attrs: &a,
        num_inputs: 1,
        num_outputs: 1,
        options: Default::default(),
    };
    let out = build_upsample(&spec)
        .unwrap()
        .run(&[Some(&x22())])
        .unwrap()
        .remove(0);
    let exp = [
        1., 1., 1., 2., 2., 2., 1., 1., 1., 2., 2., 2., 3., 3., 3., 4., 4., 4., 3., 3., 3., 4., 4.,
        4.,
    ];
    assert_close(&out, &[1, 1, 4, 6], &exp);
}

/// Sizes with a zero dimension give an empty output at once, and huge dimensions beside the
/// zero are a resource error: the graph_gen fuzzer found `[i64::MAX, 0, 2]` building a table
/// for the huge axis until memory ran out.
#[test]
fn empty_output_sizes_build_no_tables() {
    let x = Tensor::from_shape_vec(&[2, 4, 3], vec![1.0f64; 24]).unwrap();
    let a = Attributes::new();
    let empty = run(&a, &x, None, None, Some(&[1i64 << 20, 0, 2][..])).unwrap();
    assert_eq!(
        (empty.shape(), empty.dtype()),
        (&[1usize << 20, 0, 2][..], x.dtype())
    );
    assert!(matches!(
        run(&a, &x, None, None, Some(&[1i64 << 40, 0, 2][..])),
        Err(KernelError::ResourceLimit(_))
    ));
}
