//! Helpers for the unit tests of the unary, binary and reduce families.

use crate::error::Result;
use crate::kernel::NodeSpec;
use crate::{AttrValue, Attributes, Element, Tensor};

/// Builds `op` at `opset` with `attrs` through the CPU registry and runs it on `inputs`.
pub fn run_op(
    op: &str,
    opset: i64,
    attrs: &[(&str, AttrValue)],
    inputs: &[Option<&Tensor>],
) -> Result<Vec<Tensor>> {
    let mut a = Attributes::new();
    for (k, v) in attrs {
        a.insert(k, v.clone());
    }
    let spec = NodeSpec {
        op_type: op,
        domain: "",
        opset,
        attrs: &a,
        num_inputs: inputs.len(),
        num_outputs: 1,
        options: Default::default(),
    };
    crate::cpu::build(&spec)?.run(inputs)
}

/// Runs `op` on present inputs and returns its single output.
pub fn run1(
    op: &str,
    opset: i64,
    attrs: &[(&str, AttrValue)],
    inputs: &[&Tensor],
) -> Result<Tensor> {
    let inputs: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
    Ok(run_op(op, opset, attrs, &inputs)?.remove(0))
}

/// A tensor from a shape and row-major values.
pub fn t<T: Element>(shape: &[usize], data: Vec<T>) -> Tensor {
    Tensor::from_shape_vec(shape, data).expect("test tensor shape matches its data")
}

/// Asserts an `f32` tensor's shape and values (relative tolerance `tol`, NaN equals NaN).
pub fn assert_f32(out: &Tensor, shape: &[usize], expected: &[f32], tol: f32) {
    assert_eq!(out.shape(), shape, "shape");
    let got: Vec<f32> = out
        .view::<f32>()
        .expect("f32 output")
        .iter()
        .copied()
        .collect();
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        let ok = (g.is_nan() && e.is_nan()) || g == e || (g - e).abs() <= tol * e.abs().max(1e-6);
        assert!(
            ok,
            "element {i}: got {g}, expected {e}\n got {got:?}\nwant {expected:?}"
        );
    }
}

/// The elements of a tensor of type `T`, row-major.
pub fn values<T: Element>(out: &Tensor) -> Vec<T> {
    out.view::<T>()
        .expect("output element type")
        .iter()
        .cloned()
        .collect()
}
