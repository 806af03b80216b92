//! ScatterND (opset 11, 13, 16, 18).

use ndarray::{ArcArray, IxDyn};

use super::reduction::{Combine, Reduction};
use super::util::{
    contiguous, index_values, require_opset, resolve_index, strides, tensor_from_vec,
};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Element, Tensor, dispatch_all, dispatch_numeric};

/// `output = data` with whole slices `output[indices[i]] ⊕= updates[i]`.
#[derive(Debug)]
pub(crate) struct ScatterNd {
    reduction: Reduction,
}

/// Builds ScatterND.
pub(crate) fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_opset(spec.opset, 11, "ScatterND")?;
    spec.attrs.only(&["reduction"])?;
    Ok(Box::new(ScatterNd {
        reduction: Reduction::from_attrs(spec.attrs, spec.opset)?,
    }))
}

impl Kernel for ScatterNd {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let data = input(inputs, 0)?;
        let indices = input(inputs, 1)?;
        let updates = input(inputs, 2)?;
        let idx = index_values(indices, 1)?;
        let geo = Geometry::new(data.shape(), indices.shape(), updates.shape())?;
        let out = match self.reduction {
            Reduction::None => {
                dispatch_all!(data, a => scatter(a, updates, &idx, &geo, |o, u| o.clone_from(u)))
            }
            r => {
                dispatch_numeric!(data, a => scatter(a, updates, &idx, &geo, |o, u| *o = o.combine(*u, r)),
                other => Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }))
            }
        }?;
        Ok(vec![out])
    }
}

/// Validated shapes of one call.
struct Geometry {
    data_shape: Vec<usize>,
    data_strides: Vec<usize>,
    /// Length of one index tuple (the last dimension of `indices`).
    depth: usize,
    /// Elements in one updated slice.
    slice: usize,
}

impl Geometry {
    fn new(data: &[usize], indices: &[usize], updates: &[usize]) -> Result<Self> {
        let Some((&depth, batch)) = indices.split_last() else {
            return Err(KernelError::Shape(
                "ScatterND needs indices of rank ≥ 1".into(),
            ));
        };
        if data.is_empty() || depth > data.len() {
            return Err(KernelError::Shape(format!(
                "index tuples of length {depth} do not fit data {data:?}"
            )));
        }
        let expected: Vec<usize> = batch.iter().chain(&data[depth..]).copied().collect();
        if updates != expected.as_slice() {
            return Err(KernelError::Shape(format!(
                "updates {updates:?} must have shape {expected:?} (indices {indices:?}, data {data:?})"
            )));
        }
        Ok(Self {
            data_shape: data.to_vec(),
            data_strides: strides(data),
            depth,
            slice: data[depth..].iter().product(),
        })
    }
}

fn scatter<T: Element>(
    data: &ArcArray<T, IxDyn>,
    updates: &Tensor,
    idx: &[i64],
    geo: &Geometry,
    apply: impl Fn(&mut T, &T),
) -> Result<Tensor> {
    let updates = updates.shared::<T>()?;
    let updates = contiguous(&updates);
    let mut out = contiguous(data).into_owned();
    if geo.depth > 0 && geo.slice > 0 {
        for (tuple, src) in idx
            .chunks_exact(geo.depth)
            .zip(updates.chunks_exact(geo.slice))
        {
            let mut off = 0;
            for (d, &i) in tuple.iter().enumerate() {
                off += resolve_index(i, geo.data_shape[d])? * geo.data_strides[d];
            }
            for (o, u) in out[off..off + geo.slice].iter_mut().zip(src) {
                apply(o, u);
            }
        }
    } else if geo.depth == 0 {
        // Empty index tuples address the whole tensor: every update replaces (or folds into) it.
        for src in updates.chunks_exact(geo.slice.max(1)) {
            for (o, u) in out.iter_mut().zip(src) {
                apply(o, u);
            }
        }
    }
    tensor_from_vec(&geo.data_shape, out)
}
