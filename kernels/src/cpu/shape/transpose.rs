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

fn transpose_typed<T: Element>(a: &ArcArray<T, IxDyn>, perm: &[usize]) -> Result<Tensor> {
    view_to_tensor(a.view().permuted_axes(IxDyn(perm)))
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
