//! Gather: picks slices along one axis by (possibly negative) indices.

use ndarray::{ArcArray, IxDyn};

use super::util::{min_opset, norm_axis, tensor_from};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Element, Tensor, dispatch_all};

/// Gather (opset 1+; negative indices from 11, accepted for every version).
#[derive(Debug)]
pub struct Gather {
    axis: i64,
}

/// Builds [`Gather`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 1)?;
    spec.attrs.only(&["axis"])?;
    Ok(Box::new(Gather {
        axis: spec.attrs.int("axis", 0)?,
    }))
}

impl Kernel for Gather {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let data = input(inputs, 0)?;
        let indices = input(inputs, 1)?;
        let axis = norm_axis(self.axis, data.rank())?;
        let idx = checked_indices(&indices.to_i64_vec()?, data.shape()[axis])?;
        let mut out_shape = data.shape()[..axis].to_vec();
        out_shape.extend_from_slice(indices.shape());
        out_shape.extend_from_slice(&data.shape()[axis + 1..]);
        let out = dispatch_all!(data, a => gather_typed(a, axis, &idx, &out_shape)?);
        Ok(vec![out])
    }
}

/// Resolves negative indices against `dim`, failing on any out of `[-dim, dim)`.
pub(crate) fn checked_indices(raw: &[i64], dim: usize) -> Result<Vec<usize>> {
    raw.iter()
        .map(|&i| {
            let j = if i < 0 { i + dim as i64 } else { i };
            if j < 0 || j >= dim as i64 {
                Err(KernelError::InvalidValue(format!(
                    "index {i} is out of range for a dimension of {dim}"
                )))
            } else {
                Ok(j as usize)
            }
        })
        .collect()
}

fn gather_typed<T: Element>(
    a: &ArcArray<T, IxDyn>,
    axis: usize,
    idx: &[usize],
    out_shape: &[usize],
) -> Result<Tensor> {
    let std = a.as_standard_layout();
    let src = std.as_slice().expect("standard layout");
    let outer: usize = a.shape()[..axis].iter().product();
    let dim = a.shape()[axis];
    let inner: usize = a.shape()[axis + 1..].iter().product();
    let mut data = crate::output_buffer::empty(0, out_shape.iter().product());
    // An empty axis or rows gather nothing (`chunks_exact` wants a length above zero).
    let planes = src.chunks_exact((dim * inner).max(1)).take(outer);
    for plane in planes.filter(|_| dim * inner > 0) {
        if inner == 1 {
            // Element by element: a copy call per element would cost more than the element.
            data.extend(idx.iter().map(|&i| plane[i].clone()));
        } else {
            for &i in idx {
                data.extend_from_slice(&plane[i * inner..(i + 1) * inner]);
            }
        }
    }
    tensor_from(out_shape, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    fn run(axis: i64, data: &Tensor, idx: &Tensor) -> Result<Tensor> {
        let attrs = Attributes::new().with("axis", AttrValue::Int(axis));
        let spec = NodeSpec {
            op_type: "Gather",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 2,
            num_outputs: 1,
            options: Default::default(),
        };
        Ok(build(&spec)?.run(&[Some(data), Some(idx)])?.remove(0))
    }

    #[test]
    fn gather_axis1_2d_negative_indices() {
        // numpy: np.take([[1,2,3],[4,5,6]], [[2,-3]], axis=1) -> shape (2,1,2) [[[3,1]],[[6,4]]]
        let d = Tensor::from_shape_vec(&[2, 3], vec![1.0f32, 2., 3., 4., 5., 6.]).unwrap();
        let i = Tensor::from_shape_vec(&[1, 2], vec![2i32, -3]).unwrap();
        let out = run(1, &d, &i).unwrap();
        assert_eq!(
            out,
            Tensor::from_shape_vec(&[2, 1, 2], vec![3.0f32, 1., 6., 4.]).unwrap()
        );
    }

    #[test]
    fn gather_scalar_index_drops_axis() {
        let d = Tensor::from_shape_vec(&[3, 2], vec![1i64, 2, 3, 4, 5, 6]).unwrap();
        let out = run(0, &d, &Tensor::scalar(-1i64)).unwrap();
        assert_eq!(out, Tensor::from_shape_vec(&[2], vec![5i64, 6]).unwrap());
    }

    #[test]
    fn gather_out_of_range_is_invalid_value() {
        let d = Tensor::from_shape_vec(&[3], vec![1i64, 2, 3]).unwrap();
        let i = Tensor::from_shape_vec(&[1], vec![3i64]).unwrap();
        assert!(matches!(run(0, &d, &i), Err(KernelError::InvalidValue(_))));
        let i = Tensor::from_shape_vec(&[1], vec![-4i64]).unwrap();
        assert!(matches!(run(0, &d, &i), Err(KernelError::InvalidValue(_))));
        assert!(matches!(
            run(1, &d, &Tensor::scalar(0i64)),
            Err(KernelError::Shape(_))
        ));
    }
}
