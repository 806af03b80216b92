//! Transpose: permutes axes.

use ndarray::{ArcArray, IxDyn};

use super::util::{min_opset, view_to_tensor};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Element, Tensor, dispatch_all};

/// Transpose; `perm` defaults to reversing the axes.
#[derive(Debug)]
pub struct Transpose {
    perm: Option<Vec<i64>>,
}

/// Builds [`Transpose`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 1)?;
    spec.attrs.only(&["perm"])?;
    Ok(Box::new(Transpose {
        perm: spec.attrs.opt_ints("perm")?,
    }))
}

/// Checks that `perm` is a permutation of `0..rank`.
pub(crate) fn check_perm(perm: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut seen = vec![false; rank];
    let mut out = Vec::with_capacity(rank);
    for &p in perm {
        let ok = perm.len() == rank && p >= 0 && (p as usize) < rank && !seen[p as usize];
        if !ok {
            return Err(KernelError::Shape(format!(
                "perm {perm:?} is not a permutation of 0..{rank}"
            )));
        }
        seen[p as usize] = true;
        out.push(p as usize);
    }
    if out.len() != rank {
        return Err(KernelError::Shape(format!(
            "perm {perm:?} is not a permutation of 0..{rank}"
        )));
    }
    Ok(out)
}

impl Kernel for Transpose {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let perm = match &self.perm {
            Some(p) => check_perm(p, x.rank())?,
            None => (0..x.rank()).rev().collect(),
        };
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(vec![x.clone()]);
        }
        let out = dispatch_all!(x, a => transpose_typed(a, &perm)?);
        Ok(vec![out])
    }
}

/// Side of the square tiles the inner two axes are copied in (keeps reads and writes in cache).
const TILE: usize = 32;

/// Copies the permuted tensor. When the output's last axis is contiguous in the
/// input, whole runs are copied; otherwise the inner two output axes are copied
/// tile by tile.
fn transpose_typed<T: Element>(a: &ArcArray<T, IxDyn>, perm: &[usize]) -> Result<Tensor> {
    let rank = perm.len();
    let std = a.as_standard_layout();
    let src = std.as_slice().expect("standard layout");
    let mut in_strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        in_strides[i] = in_strides[i + 1] * a.shape()[i + 1];
    }
    let out_shape: Vec<usize> = perm.iter().map(|&p| a.shape()[p]).collect();
    let st: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
    let total: usize = out_shape.iter().product();
    if rank < 2 || st[rank - 1] == 1 || total == 0 {
        return view_to_tensor(std.view().permuted_axes(IxDyn(perm)));
    }
    let (n0, n1, s0, s1) = (
        out_shape[rank - 2],
        out_shape[rank - 1],
        st[rank - 2],
        st[rank - 1],
    );
    let mut out = vec![T::default(); total];
    let mut counter = vec![0usize; rank - 2];
    for block in out.chunks_mut(n0 * n1) {
        let base: usize = counter.iter().zip(&st).map(|(c, s)| c * s).sum();
        for i0 in (0..n0).step_by(TILE) {
            for j0 in (0..n1).step_by(TILE) {
                for i in i0..(i0 + TILE).min(n0) {
                    let row = &mut block[i * n1..(i + 1) * n1];
                    let bi = base + i * s0;
                    for (j, d) in row
                        .iter_mut()
                        .enumerate()
                        .take((j0 + TILE).min(n1))
                        .skip(j0)
                    {
                        *d = src[bi + j * s1].clone();
                    }
                }
            }
        }
        for d in (0..rank - 2).rev() {
            counter[d] += 1;
            if counter[d] < out_shape[d] {
                break;
            }
            counter[d] = 0;
        }
    }
    super::util::tensor_from(&out_shape, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    #[test]
    fn transpose_3d() {
        // numpy: np.arange(6).reshape(1,2,3).transpose(2,0,1).ravel() == [0,3,1,4,2,5]
        let attrs = Attributes::new().with("perm", AttrValue::Ints(vec![2, 0, 1]));
        let spec = NodeSpec {
            op_type: "Transpose",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 1,
            num_outputs: 1,
        };
        let x = Tensor::from_shape_vec(&[1, 2, 3], (0..6).collect::<Vec<i64>>()).unwrap();
        let out = build(&spec).unwrap().run(&[Some(&x)]).unwrap();
        assert_eq!(
            out[0],
            Tensor::from_shape_vec(&[3, 1, 2], vec![0i64, 3, 1, 4, 2, 5]).unwrap()
        );
        let y = Tensor::zeros(crate::DType::F32, &[2, 2]);
        assert!(matches!(
            build(&spec).unwrap().run(&[Some(&y)]),
            Err(KernelError::Shape(_))
        ));
    }

    #[test]
    fn tiled_path_matches_ndarray() {
        // Larger than one tile with the last axis moved: compare with ndarray's own permuted iteration.
        let attrs = Attributes::new().with("perm", AttrValue::Ints(vec![1, 2, 0]));
        let spec = NodeSpec {
            op_type: "Transpose",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 1,
            num_outputs: 1,
        };
        let x =
            Tensor::from_shape_vec(&[37, 3, 70], (0..37 * 3 * 70).collect::<Vec<i32>>()).unwrap();
        let out = build(&spec).unwrap().run(&[Some(&x)]).unwrap().remove(0);
        let exp: Vec<i32> = x
            .view::<i32>()
            .unwrap()
            .permuted_axes(IxDyn(&[1, 2, 0]))
            .iter()
            .copied()
            .collect();
        assert_eq!(out, Tensor::from_shape_vec(&[3, 70, 37], exp).unwrap());
    }

    #[test]
    fn default_perm_reverses() {
        let attrs = Attributes::new();
        let spec = NodeSpec {
            op_type: "Transpose",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 1,
            num_outputs: 1,
        };
        let x = Tensor::from_shape_vec(&[2, 3], (0..6).collect::<Vec<i32>>()).unwrap();
        let out = build(&spec).unwrap().run(&[Some(&x)]).unwrap();
        assert_eq!(
            out[0],
            Tensor::from_shape_vec(&[3, 2], vec![0i32, 3, 1, 4, 2, 5]).unwrap()
        );
    }
}
