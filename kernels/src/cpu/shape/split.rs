//! Split: cuts a tensor into pieces along one axis.

use ndarray::{ArcArray, Axis, IxDyn, Slice};

use super::util::{min_opset, norm_axis, opt_ints, view_to_tensor};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, opt_input};
use crate::{Element, Tensor, dispatch_all};

/// Split: sizes from the `split` attribute (< 13) or input (13+), otherwise
/// equal parts (`num_outputs` from 18, the node's output count before).
#[derive(Debug)]
pub struct Split {
    axis: i64,
    split_attr: Option<Vec<i64>>,
    split_from_input: bool,
    parts: usize,
}

/// Builds [`Split`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 2)?;
    let a = spec.attrs;
    if spec.opset >= 18 {
        a.only(&["axis", "num_outputs"])?;
    } else if spec.opset >= 13 {
        a.only(&["axis"])?;
    } else {
        a.only(&["axis", "split"])?;
    }
    let parts = match a.opt_int("num_outputs")? {
        Some(n) if n < 1 => {
            return Err(KernelError::BadAttribute {
                name: "num_outputs".into(),
                reason: format!("must be positive, got {n}"),
            });
        }
        Some(n) if n as usize != spec.num_outputs => {
            return Err(KernelError::BadAttribute {
                name: "num_outputs".into(),
                reason: format!("{n} differs from the node's {} outputs", spec.num_outputs),
            });
        }
        _ => spec.num_outputs,
    };
    Ok(Box::new(Split {
        axis: a.int("axis", 0)?,
        split_attr: a.opt_ints("split")?,
        split_from_input: spec.opset >= 13,
        parts,
    }))
}

impl Kernel for Split {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = crate::kernel::input(inputs, 0)?;
        let axis = norm_axis(self.axis, x.rank())?;
        let dim = x.shape()[axis];
        let given = if self.split_from_input {
            opt_ints(opt_input(inputs, 1))?
        } else {
            self.split_attr.clone()
        };
        let sizes = match given {
            Some(s) => {
                if s.len() != self.parts
                    || s.iter().any(|&v| v < 0)
                    || s.iter().try_fold(0i64, |t, &v| t.checked_add(v)) != Some(dim as i64)
                {
                    return Err(KernelError::InvalidValue(format!(
                        "split {s:?} must have {} non-negative entries summing to {dim}",
                        self.parts
                    )));
                }
                s.iter().map(|&v| v as usize).collect()
            }
            None => equal_parts(dim, self.parts)?,
        };
        dispatch_all!(x, a => split_typed(a, axis, &sizes))
    }
}

/// Sizes for `n` parts: equal when `dim` divides, else `ceil(dim / n)` each with a smaller last part.
fn equal_parts(dim: usize, n: usize) -> Result<Vec<usize>> {
    if n == 0 {
        return Err(KernelError::Arity("Split has no outputs".into()));
    }
    let chunk = dim.div_ceil(n);
    let before = chunk * (n - 1);
    if before > dim {
        return Err(KernelError::InvalidValue(format!(
            "cannot split a dimension of {dim} into {n} parts"
        )));
    }
    let mut v = vec![chunk; n];
    v[n - 1] = dim - before;
    Ok(v)
}

fn split_typed<T: Element>(
    a: &ArcArray<T, IxDyn>,
    axis: usize,
    sizes: &[usize],
) -> Result<Vec<Tensor>> {
    let mut start = 0;
    let mut outs = Vec::with_capacity(sizes.len());
    for (index, &s) in sizes.iter().enumerate() {
        let view = a.slice_axis(Axis(axis), Slice::from(start..start + s));
        outs.push(view_to_tensor(view, index)?);
        start += s;
    }
    Ok(outs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    fn run(
        opset: i64,
        attrs: Attributes,
        outs: usize,
        inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        let spec = NodeSpec {
            op_type: "Split",
            domain: "",
            opset,
            attrs: &attrs,
            num_inputs: inputs.len(),
            num_outputs: outs,
            options: Default::default(),
        };
        build(&spec)?.run(inputs)
    }

    fn f(shape: &[usize], v: Vec<f32>) -> Tensor {
        Tensor::from_shape_vec(shape, v).unwrap()
    }

    #[test]
    fn uneven_split_opset18() {
        // onnx test_split_1d_uneven_split_opset18: [1..7] in 4 -> [1,2],[3,4],[5,6],[7]
        let x = f(&[7], (1..=7).map(|v| v as f32).collect());
        let out = run(
            18,
            Attributes::new().with("num_outputs", AttrValue::Int(4)),
            4,
            &[Some(&x)],
        )
        .unwrap();
        assert_eq!(out[3], f(&[1], vec![7.0]));
        assert_eq!(out[1], f(&[2], vec![3.0, 4.0]));
    }

    #[test]
    fn split_input_and_attr() {
        // numpy: np.split([[1..6],[7..12]], [2], axis=1) with split [2, 4]
        let x = f(&[2, 6], (1..=12).map(|v| v as f32).collect());
        let s = Tensor::from_shape_vec(&[2], vec![2i64, 4]).unwrap();
        let attrs = Attributes::new().with("axis", AttrValue::Int(1));
        let out = run(13, attrs.clone(), 2, &[Some(&x), Some(&s)]).unwrap();
        assert_eq!(out[0], f(&[2, 2], vec![1.0, 2.0, 7.0, 8.0]));
        assert_eq!(
            out[1],
            f(&[2, 4], vec![3.0, 4.0, 5.0, 6.0, 9.0, 10.0, 11.0, 12.0])
        );
        let a11 = attrs.with("split", AttrValue::Ints(vec![2, 4]));
        assert_eq!(run(11, a11, 2, &[Some(&x)]).unwrap()[0], out[0]);
        let bad = Tensor::from_shape_vec(&[2], vec![2i64, 5]).unwrap();
        let attrs = Attributes::new().with("axis", AttrValue::Int(1));
        assert!(matches!(
            run(13, attrs, 2, &[Some(&x), Some(&bad)]),
            Err(KernelError::InvalidValue(_))
        ));
    }
}
