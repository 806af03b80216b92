//! Slice: strided sub-ranges along some axes (attributes before opset 10, inputs after).

use ndarray::{ArcArray, IxDyn, Slice as NdSlice};

use super::util::{min_opset, norm_axes, opt_ints, view_to_tensor};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{Element, Tensor, dispatch_all};

/// Opset 1–9 attributes: `(starts, ends, axes)`.
type SliceAttrs = (Vec<i64>, Vec<i64>, Option<Vec<i64>>);

/// Slice. `attrs` holds `(starts, ends, axes)` for opsets 1–9; from 10 they are inputs.
#[derive(Debug)]
pub struct Slice {
    attrs: Option<SliceAttrs>,
}

/// Builds [`Slice`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 1)?;
    if spec.opset >= 10 {
        spec.attrs.only(&[])?;
        return Ok(Box::new(Slice { attrs: None }));
    }
    let a = spec.attrs;
    a.only(&["starts", "ends", "axes"])?;
    let starts = a
        .opt_ints("starts")?
        .ok_or_else(|| KernelError::BadAttribute {
            name: "starts".into(),
            reason: "required".into(),
        })?;
    let ends = a
        .opt_ints("ends")?
        .ok_or_else(|| KernelError::BadAttribute {
            name: "ends".into(),
            reason: "required".into(),
        })?;
    Ok(Box::new(Slice {
        attrs: Some((starts, ends, a.opt_ints("axes")?)),
    }))
}

impl Kernel for Slice {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        if x.shape().is_empty() {
            return Err(KernelError::Shape(
                "data is a scalar: it has no axes to slice".into(),
            ));
        }
        let (starts, ends, axes, steps) = match &self.attrs {
            Some((s, e, a)) => (s.clone(), e.clone(), a.clone(), None),
            None => (
                input(inputs, 1)?.to_i64_vec()?,
                input(inputs, 2)?.to_i64_vec()?,
                opt_ints(opt_input(inputs, 3))?,
                opt_ints(opt_input(inputs, 4))?,
            ),
        };
        let ranges = slice_ranges(x.shape(), &starts, &ends, axes.as_deref(), steps.as_deref())?;
        let out = dispatch_all!(x, a => slice_typed(a, &ranges)?);
        Ok(vec![out])
    }
}

/// Per-axis ndarray slices implementing ONNX's clamping rules (numpy semantics).
pub(crate) fn slice_ranges(
    shape: &[usize],
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> Result<Vec<NdSlice>> {
    let n = starts.len();
    if ends.len() != n || axes.is_some_and(|a| a.len() != n) || steps.is_some_and(|s| s.len() != n)
    {
        return Err(KernelError::Shape(format!(
            "Slice: starts ({n}), ends ({}), axes and steps must have equal lengths",
            ends.len()
        )));
    }
    let axes = match axes {
        Some(a) => norm_axes(a, shape.len())?,
        None => (0..n).collect(),
    };
    if axes.iter().any(|&a| a >= shape.len()) {
        return Err(KernelError::Shape(format!(
            "Slice: {n} starts for rank {}",
            shape.len()
        )));
    }
    let mut out: Vec<NdSlice> = shape.iter().map(|_| NdSlice::from(..)).collect();
    for (i, &axis) in axes.iter().enumerate() {
        let step = steps.map_or(1, |s| s[i]);
        if step == 0 {
            return Err(KernelError::InvalidValue("Slice: a step is 0".into()));
        }
        let dim = shape[axis] as i128;
        let fix = |v: i64| if v < 0 { v as i128 + dim } else { v as i128 };
        let (start, end) = (fix(starts[i]), fix(ends[i]));
        out[axis] = if step > 0 {
            let (s, e) = (start.clamp(0, dim), end.clamp(0, dim));
            if e <= s {
                NdSlice::new(0, Some(0), 1)
            } else {
                NdSlice::new(s as isize, Some(e as isize), step as isize)
            }
        } else if dim == 0 {
            // Nothing to walk (and `clamp(0, dim - 1)` would have its bounds reversed).
            NdSlice::new(0, Some(0), 1)
        } else {
            let (s, e) = (start.clamp(0, dim - 1), end.clamp(-1, dim - 1));
            // ndarray walks [e+1, s+1) backwards from s when the step is negative.
            if s <= e {
                NdSlice::new(0, Some(0), 1)
            } else {
                NdSlice::new((e + 1) as isize, Some((s + 1) as isize), step as isize)
            }
        };
    }
    Ok(out)
}

fn slice_typed<T: Element>(a: &ArcArray<T, IxDyn>, ranges: &[NdSlice]) -> Result<Tensor> {
    let view = a.slice_each_axis(|d| ranges[d.axis.index()]);
    view_to_tensor(view, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    fn i64s(v: &[i64]) -> Tensor {
        Tensor::from_shape_vec(&[v.len()], v.to_vec()).unwrap()
    }

    fn run10(
        x: &Tensor,
        s: &[i64],
        e: &[i64],
        axes: Option<&[i64]>,
        steps: Option<&[i64]>,
    ) -> Result<Tensor> {
        let attrs = Attributes::new();
        let spec = NodeSpec {
            op_type: "Slice",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 5,
            num_outputs: 1,
            options: Default::default(),
        };
        let (s, e) = (i64s(s), i64s(e));
        let a = axes.map(i64s);
        let st = steps.map(i64s);
        Ok(build(&spec)?
            .run(&[Some(x), Some(&s), Some(&e), a.as_ref(), st.as_ref()])?
            .remove(0))
    }

    fn x34() -> Tensor {
        Tensor::from_shape_vec(&[3, 4], (0..12).collect::<Vec<i32>>()).unwrap()
    }

    #[test]
    fn negative_steps_and_clamping() {
        // numpy: x[::-1, 3:0:-2] (ends -INT_MAX style clamp) -> [[11, 9], [7, 5], [3, 1]]
        let out = run10(&x34(), &[-1, 10], &[i64::MIN, 0], None, Some(&[-1, -2])).unwrap();
        assert_eq!(
            out,
            Tensor::from_shape_vec(&[3, 2], vec![11, 9, 7, 5, 3, 1]).unwrap()
        );
        // numpy: x[:, 1:i64::MAX] on axis -1
        let out = run10(&x34(), &[1], &[i64::MAX], Some(&[-1]), None).unwrap();
        assert_eq!(
            out,
            Tensor::from_shape_vec(&[3, 3], vec![1, 2, 3, 5, 6, 7, 9, 10, 11]).unwrap()
        );
        // empty: x[2:1]
        let out = run10(&x34(), &[2], &[1], None, None).unwrap();
        assert_eq!(out.shape(), &[0, 4]);
    }

    /// A negative step over an empty axis gives an empty slice (it panicked: found by the
    /// `graph_gen` fuzz target).
    #[test]
    fn negative_step_on_an_empty_axis() {
        let x = Tensor::from_shape_vec(&[2, 0], Vec::<f32>::new()).unwrap();
        let out = run10(&x, &[-1], &[i64::MIN], Some(&[1]), Some(&[-1])).unwrap();
        assert_eq!(out.shape(), &[2, 0]);
    }

    #[test]
    fn opset1_attributes() {
        let attrs = Attributes::new()
            .with("starts", AttrValue::Ints(vec![1]))
            .with("ends", AttrValue::Ints(vec![3]))
            .with("axes", AttrValue::Ints(vec![1]));
        let spec = NodeSpec {
            op_type: "Slice",
            domain: "",
            opset: 9,
            attrs: &attrs,
            num_inputs: 1,
            num_outputs: 1,
            options: Default::default(),
        };
        let out = build(&spec).unwrap().run(&[Some(&x34())]).unwrap();
        assert_eq!(
            out[0],
            Tensor::from_shape_vec(&[3, 2], vec![1, 2, 5, 6, 9, 10]).unwrap()
        );
    }

    #[test]
    fn slice_errors() {
        assert!(matches!(
            run10(&x34(), &[0], &[1], None, Some(&[0])),
            Err(KernelError::InvalidValue(_))
        ));
        assert!(matches!(
            run10(&x34(), &[0], &[1], Some(&[2]), None),
            Err(KernelError::Shape(_))
        ));
        assert!(matches!(
            run10(&x34(), &[0, 0], &[1], None, None),
            Err(KernelError::Shape(_))
        ));
    }
}
