//! Expand: broadcasts a tensor to a shape (numpy multidirectional rules).

use std::mem::MaybeUninit;

use ndarray::{ArcArray, IxDyn};
use rayon::prelude::*;

use super::util::{min_opset, tensor_from, to_dims};
use crate::cpu::binary::broadcast::PAR_THRESHOLD;
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
        crate::limits::checked_elements(&shape, x.dtype().size_of())?;
        if shape == x.shape() {
            return Ok(vec![x.clone()]);
        }
        let out = dispatch_all!(x, a => expand_typed(a, &shape)?);
        Ok(vec![out])
    }
}

fn expand_typed<T: Element>(a: &ArcArray<T, IxDyn>, shape: &[usize]) -> Result<Tensor> {
    let a = a.as_standard_layout();
    let src = a
        .as_slice()
        .ok_or_else(|| KernelError::Shape("Expand input is not contiguous".into()))?;
    let layout = Broadcast::new(a.shape(), shape);
    let total: usize = shape.iter().product();
    let data = crate::output_buffer::build(0, total, |out| {
        if total == 0 {
            return;
        }
        if total >= PAR_THRESHOLD && shape.len() > 1 && shape[0] > 1 {
            let rows = out.len() / shape[0];
            out.par_chunks_mut(rows)
                .enumerate()
                .for_each(|(i, o)| layout.write(1, i * layout.strides[0], src, o));
        } else {
            layout.write(0, 0, src, out);
        }
    });
    tensor_from(shape, data)
}

/// Where each output element of a broadcast comes from: per output axis, the input's stride
/// (0 where the input is broadcast), and per suffix of axes, whether it is all broadcast (a
/// fill) or all equal to the input's (a copy).
struct Broadcast<'s> {
    shape: &'s [usize],
    strides: Vec<usize>,
    /// `fills[d]`: every axis from `d` on is broadcast.
    fills: Vec<bool>,
    /// `copies[d]`: every axis from `d` on is the input's own.
    copies: Vec<bool>,
}

impl<'s> Broadcast<'s> {
    fn new(input: &[usize], shape: &'s [usize]) -> Self {
        let rank = shape.len();
        let offset = rank - input.len();
        let mut strides = vec![0; rank];
        let mut acc = 1;
        for i in (0..input.len()).rev() {
            if input[i] != 1 {
                strides[offset + i] = acc;
            }
            acc *= input[i];
        }
        let (mut fills, mut copies) = (vec![true; rank + 1], vec![true; rank + 1]);
        for d in (0..rank).rev() {
            fills[d] = fills[d + 1] && (strides[d] == 0 || shape[d] == 1);
            let own = d >= offset && input[d - offset] == shape[d];
            copies[d] = copies[d + 1] && own;
        }
        Broadcast {
            shape,
            strides,
            fills,
            copies,
        }
    }

    /// Writes the output block of axes `dim..` whose first element reads `src[at]`.
    fn write<T: Clone>(&self, dim: usize, at: usize, src: &[T], out: &mut [MaybeUninit<T>]) {
        if self.fills[dim] {
            out.iter_mut().for_each(|o| {
                o.write(src[at].clone());
            });
        } else if self.copies[dim] {
            let n = out.len();
            out.iter_mut().zip(&src[at..at + n]).for_each(|(o, v)| {
                o.write(v.clone());
            });
        } else {
            let block = out.len() / self.shape[dim];
            for (i, o) in out.chunks_exact_mut(block).enumerate() {
                self.write(dim + 1, at + i * self.strides[dim], src, o);
            }
        }
    }
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
            options: Default::default(),
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

    /// Every mix of broadcast, copied and new axes, small and (in parallel) large, equals
    /// ndarray's broadcast.
    #[test]
    fn expand_matches_ndarray_broadcast() {
        let cases: [(&[usize], &[usize]); 5] = [
            (&[20, 1, 1, 1], &[20, 256, 7, 7]),
            (&[3, 1, 4], &[2, 3, 5, 4]),
            (&[1, 6], &[7000, 6]),
            (&[5], &[2, 0, 5]),
            (&[1], &[1]),
        ];
        for (from, to) in cases {
            let n: usize = from.iter().product();
            let x = Tensor::from_shape_vec(from, (0..n as i64).collect::<Vec<_>>()).unwrap();
            let dims: Vec<i64> = to.iter().map(|&d| d as i64).collect();
            let got = run(&x, &dims).unwrap();
            let want = x
                .view::<i64>()
                .unwrap()
                .broadcast(IxDyn(to))
                .unwrap()
                .to_owned();
            assert_eq!(
                got.view::<i64>().unwrap(),
                want.view(),
                "{from:?} -> {to:?}"
            );
        }
    }
}
