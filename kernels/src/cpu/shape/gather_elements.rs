//! GatherElements: element-wise gather along one axis (numpy `take_along_axis`).

use ndarray::{ArcArray, IxDyn};

use super::gather::checked_indices;
use super::util::{min_opset, norm_axis, tensor_from};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Element, Tensor, dispatch_all};

/// GatherElements (opset 11+).
#[derive(Debug)]
pub struct GatherElements {
    axis: i64,
}

/// Builds [`GatherElements`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 11)?;
    spec.attrs.only(&["axis"])?;
    Ok(Box::new(GatherElements {
        axis: spec.attrs.int("axis", 0)?,
    }))
}

impl Kernel for GatherElements {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let data = input(inputs, 0)?;
        let indices = input(inputs, 1)?;
        let rank = data.rank();
        let axis = norm_axis(self.axis, rank)?;
        let ishape = indices.shape();
        let fits = ishape.len() == rank
            && ishape
                .iter()
                .zip(data.shape())
                .enumerate()
                .all(|(i, (x, d))| i == axis || x <= d);
        if !fits {
            return Err(KernelError::Shape(format!(
                "GatherElements: indices {ishape:?} do not fit data {:?} on axis {axis}",
                data.shape()
            )));
        }
        let idx = checked_indices(&indices.to_i64_vec()?, data.shape()[axis])?;
        let out = dispatch_all!(data, a => gather_elements_typed(a, axis, &idx, ishape)?);
        Ok(vec![out])
    }
}

fn gather_elements_typed<T: Element>(
    a: &ArcArray<T, IxDyn>,
    axis: usize,
    idx: &[usize],
    ishape: &[usize],
) -> Result<Tensor> {
    let std = a.as_standard_layout();
    let src = std.as_slice().expect("standard layout");
    let rank = ishape.len();
    let mut strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * a.shape()[i + 1];
    }
    let mut counter = vec![0usize; rank];
    let mut data = Vec::with_capacity(idx.len());
    for &k in idx {
        let off: usize = counter
            .iter()
            .enumerate()
            .map(|(d, &c)| {
                if d == axis {
                    k * strides[d]
                } else {
                    c * strides[d]
                }
            })
            .sum();
        data.push(src[off].clone());
        for d in (0..rank).rev() {
            counter[d] += 1;
            if counter[d] < ishape[d] {
                break;
            }
            counter[d] = 0;
        }
    }
    tensor_from(ishape, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    fn run(axis: i64, data: &Tensor, idx: &Tensor) -> Result<Tensor> {
        let attrs = Attributes::new().with("axis", AttrValue::Int(axis));
        let spec = NodeSpec {
            op_type: "GatherElements",
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
    fn gather_elements_axis1() {
        // onnx docs example: data [[1,2],[3,4]], indices [[0,0],[1,0]], axis 1 -> [[1,1],[4,3]]
        let d = Tensor::from_shape_vec(&[2, 2], vec![1.0f32, 2., 3., 4.]).unwrap();
        let i = Tensor::from_shape_vec(&[2, 2], vec![0i64, 0, 1, 0]).unwrap();
        assert_eq!(
            run(1, &d, &i).unwrap(),
            Tensor::from_shape_vec(&[2, 2], vec![1.0f32, 1., 4., 3.]).unwrap()
        );
    }

    #[test]
    fn gather_elements_axis0_negative() {
        // onnx test_gather_elements_negative_indices: [[1,2,3],[4,5,6],[7,8,9]], [[-1,-2,0],[-2,0,0]] -> [[7,5,3],[4,2,3]]
        let d = Tensor::from_shape_vec(&[3, 3], (1..=9).map(|v| v as f32).collect()).unwrap();
        let i = Tensor::from_shape_vec(&[2, 3], vec![-1i64, -2, 0, -2, 0, 0]).unwrap();
        assert_eq!(
            run(0, &d, &i).unwrap(),
            Tensor::from_shape_vec(&[2, 3], vec![7.0f32, 5., 3., 4., 2., 3.]).unwrap()
        );
        let bad = Tensor::from_shape_vec(&[1, 1], vec![3i64]).unwrap();
        assert!(matches!(
            run(0, &d, &bad),
            Err(KernelError::InvalidValue(_))
        ));
    }
}
