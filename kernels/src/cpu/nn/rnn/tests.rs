//! Unit tests of the recurrent operators' parts, with values worked out by hand; the cells are
//! checked against the ONNX node tests and ONNX Runtime in `spillway-tests`.

use super::activation::{Activation, parse_list};
use crate::error::KernelError;
use crate::kernel::NodeSpec;
use crate::{AttrValue, Attributes, Tensor};

fn strings(v: &[&str]) -> AttrValue {
    AttrValue::Strings(v.iter().map(|s| s.to_string()).collect())
}

fn run(
    op: &str,
    attrs: &Attributes,
    inputs: &[Option<&Tensor>],
    outputs: usize,
) -> crate::error::Result<Vec<Tensor>> {
    let spec = NodeSpec {
        op_type: op,
        domain: "",
        opset: 14,
        attrs,
        num_inputs: inputs.len(),
        num_outputs: outputs,
        options: Default::default(),
    };
    super::build(&spec)?.run(inputs)
}

fn t(shape: &[usize], values: &[f32]) -> Tensor {
    Tensor::from_shape_vec(shape, values.to_vec()).unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

#[test]
fn alphas_and_betas_go_in_order_to_the_functions_that_take_them() {
    let a = Attributes::new()
        .with(
            "activations",
            strings(&["HardSigmoid", "LeakyRelu", "ScaledTanh"]),
        )
        .with("activation_alpha", AttrValue::Floats(vec![0.3, 0.05, 1.5]))
        .with("activation_beta", AttrValue::Floats(vec![0.4, 0.7]));
    let list = parse_list(&a, &["Sigmoid", "Tanh", "Tanh"], 1).unwrap();
    assert_eq!(
        list,
        [
            Activation::HardSigmoid(0.3, 0.4),
            Activation::LeakyRelu(0.05),
            Activation::ScaledTanh(1.5, 0.7)
        ]
    );
    // Without values the ONNX operators' defaults; one direction's list serves both.
    let a = Attributes::new().with("activations", strings(&["elu", "Affine"]));
    let list = parse_list(&a, &["Sigmoid", "Tanh"], 2).unwrap();
    assert_eq!(
        list,
        [
            Activation::Elu(1.0),
            Activation::Affine(1.0, 0.0),
            Activation::Elu(1.0),
            Activation::Affine(1.0, 0.0)
        ]
    );
    let a = Attributes::new().with("activations", strings(&["Swish"]));
    assert!(parse_list(&a, &["Tanh"], 1).is_err());
    let a = Attributes::new().with("activations", strings(&["Tanh", "Tanh", "Tanh"]));
    assert!(parse_list(&a, &["Tanh"], 2).is_err());
}

#[test]
fn activations_compute_their_formulas() {
    let check = |f: Activation, x: f64, want: f64| {
        let mut v = [x];
        f.apply(&mut v);
        assert!(
            (v[0] - want).abs() < 1e-12,
            "{f:?}({x}) = {}, not {want}",
            v[0]
        );
    };
    check(Activation::Relu, -2.0, 0.0);
    check(Activation::Sigmoid, 0.0, 0.5);
    check(Activation::Tanh, 0.5, 0.5f64.tanh());
    check(Activation::Affine(2.0, 0.5), 3.0, 6.5);
    check(Activation::LeakyRelu(0.5), -4.0, -2.0);
    check(Activation::ThresholdedRelu(1.0), 1.0, 0.0);
    check(Activation::ThresholdedRelu(1.0), 1.5, 1.5);
    check(Activation::ScaledTanh(2.0, 0.5), 1.0, 2.0 * 0.5f64.tanh());
    check(Activation::HardSigmoid(0.5, 0.5), 0.5, 0.75);
    check(Activation::HardSigmoid(0.2, 0.5), 10.0, 1.0);
    check(Activation::Elu(2.0), -1.0, 2.0 * ((-1f64).exp() - 1.0));
    check(Activation::Softsign, 3.0, 0.75);
    check(Activation::Softplus, 0.0, 2f64.ln());
    check(Activation::Softplus, 100.0, 100.0);
}

/// `h' = relu(2x + 0.5h)` on one unit: forward `x = 1, −1, 3` gives `2, 0, 6`; reversed,
/// `6, relu(−2 + 3) = 1, relu(2 + 0.5) = 2.5` (from the last step back). A second batch entry
/// with length 2 stops early (its third output is zero).
#[test]
fn rnn_runs_forward_reverse_and_stops_at_each_length() {
    let x = t(&[3, 2, 1], &[1.0, 1.0, -1.0, -1.0, 3.0, 3.0]);
    let w = t(&[1, 1, 1], &[2.0]);
    let r = t(&[1, 1, 1], &[0.5]);
    let lens = Tensor::from_shape_vec(&[2], vec![3i32, 2]).unwrap();
    let attrs = |dir: &str| {
        Attributes::new()
            .with("activations", strings(&["Relu"]))
            .with("direction", AttrValue::String(dir.into()))
    };
    let inputs = [Some(&x), Some(&w), Some(&r), None, Some(&lens)];
    let out = run("RNN", &attrs("forward"), &inputs, 2).unwrap();
    assert_eq!(out[0].shape(), [3, 1, 2, 1]);
    assert_eq!(values(&out[0]), [2.0, 2.0, 0.0, 0.0, 6.0, 0.0]);
    assert_eq!(values(&out[1]), [6.0, 0.0]);
    // Reversed, the second entry starts at its own last step (t = 1: relu(−2) = 0, then
    // t = 0: relu(2 + 0) = 2).
    let out = run("RNN", &attrs("reverse"), &inputs, 2).unwrap();
    assert_eq!(values(&out[0]), [2.5, 2.0, 1.0, 0.0, 6.0, 0.0]);
    assert_eq!(values(&out[1]), [2.5, 2.0]);
    // Both directions at once, batch-major: Y is [batch, seq, directions, hidden].
    let xb = t(&[2, 3, 1], &[1.0, -1.0, 3.0, 1.0, -1.0, 3.0]);
    let w2 = t(&[2, 1, 1], &[2.0, 2.0]);
    let r2 = t(&[2, 1, 1], &[0.5, 0.5]);
    let a = attrs("bidirectional")
        .with("layout", AttrValue::Int(1))
        .with("activations", strings(&["Relu", "Relu"]));
    let out = run("RNN", &a, &[Some(&xb), Some(&w2), Some(&r2)], 2).unwrap();
    assert_eq!(out[0].shape(), [2, 3, 2, 1]);
    assert_eq!(
        values(&out[0]),
        [2.0, 2.5, 0.0, 1.0, 6.0, 6.0, 2.0, 2.5, 0.0, 1.0, 6.0, 6.0]
    );
    assert_eq!(out[1].shape(), [2, 2, 1]);
    assert_eq!(values(&out[1]), [6.0, 2.5, 6.0, 2.5]);
}

#[test]
fn bad_inputs_and_attributes_are_typed_errors() {
    let x = t(&[2, 1, 3], &[0.0; 6]);
    let w = t(&[1, 8, 3], &[0.0; 24]);
    let r = t(&[1, 8, 2], &[0.0; 16]);
    let a = Attributes::new();
    // GRU takes 3 gates: W of 8 rows does not fit a hidden size of 2.
    let e = run("GRU", &a, &[Some(&x), Some(&w), Some(&r)], 2);
    assert!(matches!(e, Err(KernelError::Shape(_))), "{e:?}");
    let ok = run("LSTM", &a, &[Some(&x), Some(&w), Some(&r)], 3).unwrap();
    assert_eq!(ok[2].shape(), [1, 1, 2]);
    let lens = Tensor::from_shape_vec(&[1], vec![3i32]).unwrap();
    let e = run(
        "LSTM",
        &a,
        &[Some(&x), Some(&w), Some(&r), None, Some(&lens)],
        1,
    );
    assert!(matches!(e, Err(KernelError::InvalidValue(_))), "{e:?}");
    let bad = Attributes::new().with("direction", AttrValue::String("both".into()));
    let e = run("LSTM", &bad, &[Some(&x), Some(&w), Some(&r)], 1);
    assert!(matches!(e, Err(KernelError::BadAttribute { .. })), "{e:?}");
    let e = run("RNN", &a, &[Some(&x), Some(&w), Some(&r)], 3);
    assert!(matches!(e, Err(KernelError::Arity(_))), "{e:?}");
    let half = Tensor::from_shape_vec(&[2, 1, 3], vec![half::f16::ZERO; 6]).unwrap();
    let e = run("LSTM", &a, &[Some(&half), Some(&w), Some(&r)], 1);
    assert!(matches!(e, Err(KernelError::DTypeMismatch(_))), "{e:?}");
}
