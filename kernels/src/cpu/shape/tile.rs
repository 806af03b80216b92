//! Tile: repeats a tensor along each axis.

use ndarray::{ArcArray, IxDyn};

use super::util::{contiguous_vec, min_opset, tensor_from, to_dims};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Element, Tensor, dispatch_all};

/// Tile (opset 6+).
#[derive(Debug)]
pub struct Tile;

/// Builds [`Tile`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 6)?;
    spec.attrs.only(&[])?;
    Ok(Box::new(Tile))
}

impl Kernel for Tile {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let repeats = to_dims(&input(inputs, 1)?.to_i64_vec()?, "Tile repeats")?;
        if repeats.len() != x.rank() {
            return Err(KernelError::Shape(format!(
                "Tile: {} repeats for rank {}",
                repeats.len(),
                x.rank()
            )));
        }
        let tiled: Option<Vec<usize>> = x
            .shape()
            .iter()
            .zip(&repeats)
            .map(|(&d, &r)| d.checked_mul(r))
            .collect();
        let tiled = tiled.unwrap_or_else(|| vec![usize::MAX]);
        crate::limits::checked_elements(&tiled, x.dtype().size_of())?;
        let out = dispatch_all!(x, a => tile_typed(a, &repeats)?);
        Ok(vec![out])
    }
}

/// Views `[d0, d1, ..]` as `[1, d0, 1, d1, ..]`, broadcasts to `[r0, d0, r1, d1, ..]`
/// and copies; the row-major result is the tiled tensor.
fn tile_typed<T: Element>(a: &ArcArray<T, IxDyn>, repeats: &[usize]) -> Result<Tensor> {
    let std = a.as_standard_layout();
    let inter: Vec<usize> = a.shape().iter().flat_map(|&d| [1, d]).collect();
    let target: Vec<usize> = a
        .shape()
        .iter()
        .zip(repeats)
        .flat_map(|(&d, &r)| [r, d])
        .collect();
    let shaped = std
        .view()
        .into_shape_with_order(IxDyn(&inter))
        .map_err(|e| KernelError::Shape(e.to_string()))?;
    let view = shaped
        .broadcast(IxDyn(&target))
        .ok_or_else(|| KernelError::Shape("Tile broadcast failed".into()))?;
    let out_shape: Vec<usize> = a
        .shape()
        .iter()
        .zip(repeats)
        .map(|(&d, &r)| d * r)
        .collect();
    tensor_from(&out_shape, contiguous_vec(view))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attributes;

    fn run(x: &Tensor, reps: &[i64]) -> Result<Tensor> {
        let attrs = Attributes::new();
        let spec = NodeSpec {
            op_type: "Tile",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 2,
            num_outputs: 1,
            options: Default::default(),
        };
        let r = Tensor::from_shape_vec(&[reps.len()], reps.to_vec()).unwrap();
        Ok(build(&spec)?.run(&[Some(x), Some(&r)])?.remove(0))
    }

    #[test]
    fn tile_precomputed() {
        // onnx test_tile_precomputed: [[0,1],[2,3]] tiled (2,2)
        let x = Tensor::from_shape_vec(&[2, 2], vec![0.0f32, 1., 2., 3.]).unwrap();
        let exp = vec![
            0.0f32, 1., 0., 1., 2., 3., 2., 3., 0., 1., 0., 1., 2., 3., 2., 3.,
        ];
        assert_eq!(
            run(&x, &[2, 2]).unwrap(),
            Tensor::from_shape_vec(&[4, 4], exp).unwrap()
        );
        assert_eq!(run(&x, &[0, 1]).unwrap().shape(), &[0, 2]);
        assert!(matches!(run(&x, &[2]), Err(KernelError::Shape(_))));
        assert!(matches!(
            run(&x, &[2, -1]),
            Err(KernelError::InvalidValue(_))
        ));
    }
}
