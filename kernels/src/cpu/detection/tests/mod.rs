//! Unit tests of the detection family. Expected values come from the onnx reference evaluator
//! (onnx 1.22) or ONNX Runtime 1.31 on the same inputs, or are worked by hand where noted.

mod index_ops;
mod nms;
mod roi_align;
mod topk;

use crate::error::Result;
use crate::kernel::NodeSpec;
use crate::{AttrValue, Attributes, Element, KernelError, Tensor};

/// Builds `op` at `opset` with `attrs` (as a node listing two outputs) and runs it.
fn run(
    op: &str,
    opset: i64,
    attrs: &[(&str, AttrValue)],
    inputs: &[Option<Tensor>],
) -> Result<Vec<Tensor>> {
    run_with_outputs(op, opset, attrs, inputs, 2)
}

/// Builds `op` as a node listing `num_outputs` outputs and runs it.
fn run_with_outputs(
    op: &str,
    opset: i64,
    attrs: &[(&str, AttrValue)],
    inputs: &[Option<Tensor>],
    num_outputs: usize,
) -> Result<Vec<Tensor>> {
    let mut a = Attributes::new();
    for (name, value) in attrs {
        a.insert(name, value.clone());
    }
    let spec = NodeSpec {
        op_type: op,
        domain: "",
        opset,
        attrs: &a,
        num_inputs: inputs.len(),
        num_outputs,
        options: Default::default(),
    };
    let kernel = super::build(&spec)?;
    let refs: Vec<Option<&Tensor>> = inputs.iter().map(Option::as_ref).collect();
    kernel.run(&refs)
}

/// Builds `op` and reports only the build error, if any.
fn build_err(op: &str, opset: i64, attrs: &[(&str, AttrValue)]) -> Option<KernelError> {
    let mut a = Attributes::new();
    for (name, value) in attrs {
        a.insert(name, value.clone());
    }
    let spec = NodeSpec {
        op_type: op,
        domain: "",
        opset,
        attrs: &a,
        num_inputs: 3,
        num_outputs: 1,
        options: Default::default(),
    };
    super::build(&spec).err()
}

fn t<T: Element>(shape: &[usize], data: Vec<T>) -> Option<Tensor> {
    Some(Tensor::from_shape_vec(shape, data).expect("test tensor shape"))
}

fn int(v: i64) -> AttrValue {
    AttrValue::Int(v)
}

fn s(v: &str) -> AttrValue {
    AttrValue::String(v.into())
}

/// The elements and shape of a tensor of type `T`.
fn parts<T: Element>(t: &Tensor) -> (Vec<usize>, Vec<T>) {
    let v = t.view::<T>().expect("output dtype");
    (v.shape().to_vec(), v.iter().cloned().collect())
}

fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: got {g}, want {w}"
        );
    }
}
