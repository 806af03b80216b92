//! `com.microsoft` `FusedConv`: a hand-derived case, agreement with `Conv` followed by the
//! unfused `Add` and activation kernels on every convolution path (packed GEMM on an image or
//! a dense operand, depth past one packed block, groups, depthwise, 1-d, 3-d, `f64`), residuals
//! that broadcast, and typed errors. (The comparison with ONNX Runtime itself is in `tests/tests/fused_conv.rs`.)

use super::run_op;
use crate::cpu::nn::packed_gemm::KC;
use crate::error::{KernelError, Result};
use crate::kernel::NodeSpec;
use crate::{AttrValue, Attributes, Tensor};

/// Builds and runs `FusedConv` in the `com.microsoft` domain.
fn fused(a: &Attributes, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let spec = NodeSpec {
        op_type: "FusedConv",
        domain: "com.microsoft",
        opset: 1,
        attrs: a,
        num_inputs: inputs.len(),
        num_outputs: 1,
        options: Default::default(),
    };
    crate::cpu::build(&spec)?.run(inputs)
}

fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_shape_vec(shape, v.to_vec()).unwrap()
}

/// A seeded tensor with values in [-1, 1).
fn seeded(shape: &[usize], seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let n = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    f32s(shape, &v)
}

fn to_f64(t: &Tensor) -> Tensor {
    Tensor::from(t.view::<f32>().unwrap().mapv(f64::from))
}

fn values(t: &Tensor) -> Vec<f64> {
    match t {
        Tensor::F32(a) => a.iter().map(|&v| f64::from(v)).collect(),
        Tensor::F64(a) => a.iter().copied().collect(),
        other => panic!("unexpected {:?}", other.dtype()),
    }
}

/// `(FusedConv attributes, the unfused op and its attributes)` for every activation.
fn activations() -> Vec<(Attributes, Option<(&'static str, Attributes)>)> {
    let act = |name: &str, params: &[f32]| {
        let a = Attributes::new().with("activation", AttrValue::String(name.into()));
        if params.is_empty() {
            a
        } else {
            a.with("activation_params", AttrValue::Floats(params.to_vec()))
        }
    };
    let f = |v: f32| AttrValue::Float(v);
    vec![
        (Attributes::new(), None),
        (act("Relu", &[]), Some(("Relu", Attributes::new()))),
        (
            act("LeakyRelu", &[0.2]),
            Some(("LeakyRelu", Attributes::new().with("alpha", f(0.2)))),
        ),
        (act("Sigmoid", &[]), Some(("Sigmoid", Attributes::new()))),
        (act("Tanh", &[]), Some(("Tanh", Attributes::new()))),
        (
            act("Clip", &[-0.3, 0.4]),
            Some((
                "Clip",
                Attributes::new().with("min", f(-0.3)).with("max", f(0.4)),
            )),
        ),
        (
            act("HardSigmoid", &[0.3, 0.6]),
            Some((
                "HardSigmoid",
                Attributes::new().with("alpha", f(0.3)).with("beta", f(0.6)),
            )),
        ),
    ]
}

/// `Conv`, then `+ Z`, then the activation, each through its own unfused kernel.
fn unfused(
    conv: &Attributes,
    inputs: &[Option<&Tensor>],
    z: Option<&Tensor>,
    act: &Option<(&str, Attributes)>,
) -> Tensor {
    let mut y = run_op("Conv", 11, conv, inputs, 1).unwrap().remove(0);
    if let Some(z) = z {
        y = crate::cpu::build(&NodeSpec {
            op_type: "Add",
            domain: "",
            opset: 14,
            attrs: &Attributes::new(),
            num_inputs: 2,
            num_outputs: 1,
            options: Default::default(),
        })
        .unwrap()
        .run(&[Some(&y), Some(z)])
        .unwrap()
        .remove(0);
    }
    if let Some((op, attrs)) = act {
        let opset = if *op == "Clip" { 6 } else { 13 };
        y = run_op_any(op, opset, attrs, &[Some(&y)]);
    }
    y
}

/// Runs an op of any family (the activations are unary, not nn).
fn run_op_any(op: &str, opset: i64, attrs: &Attributes, inputs: &[Option<&Tensor>]) -> Tensor {
    crate::cpu::build(&NodeSpec {
        op_type: op,
        domain: "",
        opset,
        attrs,
        num_inputs: inputs.len(),
        num_outputs: 1,
        options: Default::default(),
    })
    .unwrap()
    .run(inputs)
    .unwrap()
    .remove(0)
}

#[test]
fn hand_derived_relu_and_leaky_relu_with_residual() {
    // conv: 2·[1, −2, 3] = [2, −4, 6]; + B (−1) = [1, −5, 5]; + Z = [1.5, −4.5, −5].
    let x = f32s(&[1, 1, 3], &[1.0, -2.0, 3.0]);
    let w = f32s(&[1, 1, 1], &[2.0]);
    let b = f32s(&[1], &[-1.0]);
    let z = f32s(&[1, 1, 3], &[0.5, 0.5, -10.0]);
    let inputs = [Some(&x), Some(&w), Some(&b), Some(&z)];
    let relu = Attributes::new().with("activation", AttrValue::String("Relu".into()));
    let y = fused(&relu, &inputs).unwrap();
    assert_eq!(values(&y[0]), [1.5, 0.0, 0.0]);
    let leaky = Attributes::new()
        .with("activation", AttrValue::String("LeakyRelu".into()))
        .with("activation_params", AttrValue::Floats(vec![0.5]));
    let y = fused(&leaky, &inputs).unwrap();
    assert_eq!(values(&y[0]), [1.5, -2.25, -2.5]);
    // No activation, no Z: a plain convolution.
    let y = fused(&Attributes::new(), &[Some(&x), Some(&w), Some(&b)]).unwrap();
    assert_eq!(values(&y[0]), [1.0, -5.0, 5.0]);
}

/// One convolution geometry: `(label, X shape, W shape, Conv attributes)`.
type Case = (&'static str, Vec<usize>, Vec<usize>, Attributes);

fn geometries() -> Vec<Case> {
    let ints = |v: &[i64]| AttrValue::Ints(v.to_vec());
    vec![
        // KC / 9 + 4 channels · 3 · 3 rows of the operand: two packed depth blocks.
        (
            "2-d, deep",
            vec![2, KC / 9 + 4, 9, 11],
            vec![20, KC / 9 + 4, 3, 3],
            Attributes::new().with("pads", ints(&[1, 1, 1, 1])),
        ),
        (
            "2-d, groups, strided",
            vec![1, 6, 9, 8],
            vec![10, 3, 3, 2],
            Attributes::new()
                .with("group", AttrValue::Int(2))
                .with("strides", ints(&[2, 1]))
                .with("pads", ints(&[1, 0, 1, 1])),
        ),
        // A stem: 27-deep products on a stride-2 image, computed at the phase plane's width
        // and cropped before the epilogue.
        (
            "2-d, strided stem",
            vec![1, 3, 21, 21],
            vec![16, 3, 3, 3],
            Attributes::new().with("strides", ints(&[2, 2])),
        ),
        (
            "depthwise, multiplier 2",
            vec![1, 4, 7, 7],
            vec![8, 1, 3, 3],
            Attributes::new()
                .with("group", AttrValue::Int(4))
                .with("pads", ints(&[1, 1, 1, 1])),
        ),
        (
            "1-d, dilated",
            vec![2, 5, 17],
            vec![7, 5, 3],
            Attributes::new().with("dilations", ints(&[2])),
        ),
        (
            "1-d depthwise",
            vec![1, 3, 12],
            vec![3, 1, 4],
            Attributes::new().with("group", AttrValue::Int(3)),
        ),
        (
            "pointwise",
            vec![1, 16, 5, 6],
            vec![12, 16, 1, 1],
            Attributes::new(),
        ),
        (
            "3-d",
            vec![1, 2, 4, 5, 3],
            vec![3, 2, 2, 3, 2],
            Attributes::new(),
        ),
    ]
}

#[test]
fn matches_conv_then_unfused_activation_on_every_path() {
    for (gi, (label, xs, ws, conv)) in geometries().into_iter().enumerate() {
        let seed = 100 * gi as u64;
        let x = seeded(&xs, seed + 1);
        let w = seeded(&ws, seed + 2);
        let b = seeded(&[ws[0]], seed + 3);
        let y_shape = run_op("Conv", 11, &conv, &[Some(&x), Some(&w)], 1).unwrap()[0]
            .shape()
            .to_vec();
        let z = seeded(&y_shape, seed + 4);
        for wide in [false, true] {
            let cast = |t: &Tensor| if wide { to_f64(t) } else { t.clone() };
            let (x, w, b, z) = (cast(&x), cast(&w), cast(&b), cast(&z));
            for (act_attrs, act) in activations() {
                for with_z in [false, true] {
                    let mut attrs = conv.clone();
                    for name in act_attrs.names() {
                        attrs.insert(name, act_attrs.get(name).unwrap().clone());
                    }
                    let zin = with_z.then_some(&z);
                    let mut inputs = vec![Some(&x), Some(&w), Some(&b)];
                    if with_z {
                        inputs.push(zin);
                    }
                    let got = fused(&attrs, &inputs).unwrap().remove(0);
                    let want = unfused(&conv, &inputs[..3], zin, &act);
                    assert_eq!(got.dtype(), want.dtype());
                    assert_eq!(got.shape(), want.shape(), "{label}");
                    let what = format!(
                        "{label}, {:?}, Z {with_z}, f64 {wide}",
                        act.as_ref().map(|a| a.0)
                    );
                    for (g, w) in values(&got).iter().zip(values(&want)) {
                        assert!(
                            (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
                            "{what}: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_residual_that_broadcasts_is_added_as_add_does() {
    // Conv output [2, 20, 9, 11]; each Z broadcasts against it, the last one widening it.
    let (_, xs, ws, conv) = geometries().remove(0);
    let x = seeded(&xs, 1);
    let w = seeded(&ws, 2);
    let b = seeded(&[ws[0]], 3);
    for (zi, z_shape) in [vec![20, 1, 1], vec![1, 1, 1, 11], vec![3, 2, 20, 9, 11]]
        .into_iter()
        .enumerate()
    {
        let z = seeded(&z_shape, 10 + zi as u64);
        for (act_attrs, act) in activations() {
            let mut attrs = conv.clone();
            for name in act_attrs.names() {
                attrs.insert(name, act_attrs.get(name).unwrap().clone());
            }
            let inputs = [Some(&x), Some(&w), Some(&b), Some(&z)];
            let got = fused(&attrs, &inputs).unwrap().remove(0);
            let want = unfused(&conv, &inputs[..3], Some(&z), &act);
            assert_eq!(got.shape(), want.shape(), "Z {z_shape:?}");
            for (g, w) in values(&got).iter().zip(values(&want)) {
                assert!(
                    (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
                    "Z {z_shape:?}, {:?}: {g} vs {w}",
                    act.as_ref().map(|a| a.0)
                );
            }
        }
    }
}

#[test]
fn bad_activations_and_sums_are_typed_errors() {
    let x = seeded(&[1, 2, 4, 4], 1);
    let w = seeded(&[3, 2, 3, 3], 2);
    let act = |name: &str| Attributes::new().with("activation", AttrValue::String(name.into()));
    let params =
        |a: Attributes, p: &[f32]| a.with("activation_params", AttrValue::Floats(p.to_vec()));
    let inputs = [Some(&x), Some(&w)];
    let r = fused(&act("Gelu"), &inputs);
    assert!(
        matches!(&r, Err(KernelError::UnsupportedAttribute { name, reason })
            if name == "activation" && reason.contains("Gelu")),
        "{r:?}"
    );
    for bad in [
        act("LeakyRelu"),
        params(act("LeakyRelu"), &[0.1, 0.2]),
        params(act("Clip"), &[0.0]),
        params(act("HardSigmoid"), &[]),
        params(act("Relu"), &[1.0]),
        params(Attributes::new(), &[1.0]),
    ] {
        let r = fused(&bad, &inputs);
        assert!(
            matches!(&r, Err(KernelError::BadAttribute { name, .. }) if name == "activation_params"),
            "{bad:?}: {r:?}"
        );
    }
    let wrong_type = Attributes::new().with("activation", AttrValue::Int(1));
    assert!(matches!(
        fused(&wrong_type, &inputs),
        Err(KernelError::BadAttribute { .. })
    ));
    let unknown = act("Relu").with("alpha", AttrValue::Float(0.1));
    assert!(matches!(
        fused(&unknown, &inputs),
        Err(KernelError::UnsupportedAttribute { .. })
    ));
    // Z must broadcast against the output ([1, 3, 2, 2]) and have the inputs' element type.
    let z = seeded(&[1, 3, 2, 3], 3);
    let r = fused(&act("Relu"), &[Some(&x), Some(&w), None, Some(&z)]);
    assert!(matches!(r, Err(KernelError::Shape(_))), "{r:?}");
    let z = to_f64(&seeded(&[1, 3, 2, 2], 3));
    let r = fused(&act("Relu"), &[Some(&x), Some(&w), None, Some(&z)]);
    assert!(matches!(r, Err(KernelError::DTypeMismatch(_))), "{r:?}");
    let five = [Some(&x), Some(&w), None, None, Some(&x)];
    assert!(matches!(
        fused(&act("Relu"), &five),
        Err(KernelError::Arity(_))
    ));
}
