//! Expand: broadcasts a tensor to a shape (numpy multidirectional rules).

use ndarray::{ArcArray, IxDyn};

use super::util::{min_opset, to_dims, view_to_tensor};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Element, Tensor, dispatch_all};

/// Expand (opset 8+).
#[derive(Debug)]
pub struct Expand;

/// Builds [`Expand`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 8)?;
    spec.attrs.only(&[])?;
    Ok(Box::new(Expand))
}

/// The numpy broadcast of two shapes.
pub(crate) fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let rank = a.len().max(b.len());
    let at = |s: &[usize], i: usize| {
        if i + s.len() >= rank {
            s[i + s.len() - rank]
        } else {
            1
        }
    };
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            _ => Err(KernelError::Shape(format!(
                "shapes {a:?} and {b:?} do not broadcast"
            ))),
        })
        .collect()
}

impl Kernel for Expand {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let target = to_dims(&input(inputs, 1)?.to_i64_vec()?, "Expand shape")?;
        let shape = broadcast_shapes(x.shape(), &target)?;
        if shape == x.shape() {
            return Ok(vec![x.clone()]);
        }
        let out = dispatch_all!(x, a => expand_typed(a, &shape)?);
        Ok(vec![out])
    }
}

fn expand_typed<T: Element>(a: &ArcArray<T, IxDyn>, shape: &[usize]) -> Result<Tensor> {
    let view = a.broadcast(IxDyn(shape)).ok_or_else(|| {
        KernelError::Shape(format!("cannot broadcast {:?} to {shape:?}", a.shape()))
    })?;
    view_to_tensor(view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attributes;

    fn run(x: &Tensor, shape: &[i64]) -> Result<Tensor> {
        let attrs = Attributes::new();
        let spec = NodeSpec {
            op_type: "Expand",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 2,
            num_outputs: 1,
        };
        let s = Tensor::from_shape_vec(&[shape.len()], shape.to_vec()).unwrap();
        Ok(build(&spec)?.run(&[Some(x), Some(&s)])?.remove(0))
    }

    #[test]
    fn expand_dim_changed() {
        // onnx test_expand_dim_changed: [[1],[2],[3]] to (2,1,6) -> shape (2,3,6)
        let x = Tensor::from_shape_vec(&[3, 1], vec![1.0f32, 2., 3.]).unwrap();
        let out = run(&x, &[2, 1, 6]).unwrap();
        assert_eq!(out.shape(), &[2, 3, 6]);
        let v = out.view::<f32>().unwrap();
        assert_eq!(v[[1, 2, 5]], 3.0);
        assert_eq!(v[[0, 1, 0]], 2.0);
        // smaller target broadcasts the other way (numpy rule): (3,1) with (1,) stays (3,1)
        assert_eq!(run(&x, &[1]).unwrap().shape(), &[3, 1]);
        assert!(matches!(run(&x, &[2, 2]), Err(KernelError::Shape(_))));
        assert!(matches!(run(&x, &[-1]), Err(KernelError::InvalidValue(_))));
    }
}
