//! ScatterElements (opset 11, 13, 16, 18) and its deprecated opset-9 form Scatter.

use ndarray::{ArcArray, IxDyn};

use super::reduction::{Combine, Reduction};
use super::util::{
    contiguous, index_values, normalize_axis, require_opset, resolve_index, strides,
    tensor_from_vec,
};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Element, Tensor, dispatch_all, dispatch_numeric, output_buffer};

/// `output = data` with `output[..., indices[i..], ...] ⊕= updates[i..]` along `axis`.
#[derive(Debug)]
pub(crate) struct ScatterElements {
    axis: i64,
    reduction: Reduction,
}

/// Builds ScatterElements (opset ≥ 11) or Scatter (opset 9–10).
pub(crate) fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    let reduction = if spec.op_type == "Scatter" {
        require_opset(spec.opset, 9, "Scatter")?;
        if spec.opset >= 11 {
            return Err(KernelError::UnsupportedOpset {
                opset: spec.opset,
                reason: "Scatter was removed at opset 11 (use ScatterElements)".into(),
            });
        }
        spec.attrs.only(&["axis"])?;
        Reduction::None
    } else {
        require_opset(spec.opset, 11, "ScatterElements")?;
        spec.attrs.only(&["axis", "reduction"])?;
        Reduction::from_attrs(spec.attrs, spec.opset)?
    };
    Ok(Box::new(ScatterElements {
        axis: spec.attrs.int("axis", 0)?,
        reduction,
    }))
}

impl Kernel for ScatterElements {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let data = input(inputs, 0)?;
        let indices = input(inputs, 1)?;
        let updates = input(inputs, 2)?;
        let idx = index_values(indices, 1)?;
        let geo = Geometry::new(data.shape(), indices.shape(), updates.shape(), self.axis)?;
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
    index_shape: Vec<usize>,
    axis: usize,
}

impl Geometry {
    fn new(data: &[usize], indices: &[usize], updates: &[usize], axis: i64) -> Result<Self> {
        if data.is_empty() {
            return Err(KernelError::Shape(
                "ScatterElements needs data of rank ≥ 1".into(),
            ));
        }
        let axis = normalize_axis(axis, data.len())?;
        if indices.len() != data.len() {
            return Err(KernelError::Shape(format!(
                "indices {indices:?} must have the rank of data {data:?}"
            )));
        }
        if updates != indices {
            return Err(KernelError::Shape(format!(
                "updates {updates:?} must have the shape of indices {indices:?}"
            )));
        }
        if let Some(d) = (0..data.len()).find(|&d| d != axis && indices[d] > data[d]) {
            return Err(KernelError::Shape(format!(
                "indices {indices:?} exceed data {data:?} in dimension {d}"
            )));
        }
        Ok(Self {
            data_shape: data.to_vec(),
            data_strides: strides(data),
            index_shape: indices.to_vec(),
            axis,
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
    let source = contiguous(data);
    // The output starts as a copy of `data`, in memory offered for it (detectors scatter
    // tens of MiB per call).
    let mut out = output_buffer::build(0, source.len(), |o| {
        for (o, v) in o.iter_mut().zip(source.iter()) {
            o.write(v.clone());
        }
    });
    let rank = geo.index_shape.len();
    let axis_dim = geo.data_shape[geo.axis];
    let axis_stride = geo.data_strides[geo.axis];
    // Row by row over the indices' last dimension: the offset of a row's first element from
    // its coordinates, then one step of the last dimension's stride per element (the index
    // moves along `axis` instead when `axis` is the last dimension).
    let row = geo.index_shape[rank - 1];
    let (last, last_stride) = (rank - 1, geo.data_strides[rank - 1]);
    let step = if geo.axis == last { 0 } else { last_stride };
    let mut coord = vec![0usize; rank];
    for (idx, upd) in idx
        .chunks_exact(row.max(1))
        .zip(updates.chunks_exact(row.max(1)))
    {
        let base: usize = (0..last)
            .filter(|&d| d != geo.axis)
            .map(|d| coord[d] * geo.data_strides[d])
            .sum();
        for (j, (&i, u)) in idx.iter().zip(upd).enumerate() {
            let off = base + j * step + resolve_index(i, axis_dim)? * axis_stride;
            apply(&mut out[off], u);
        }
        // Advance the row-major odometer over the indices' shape, without the last dimension.
        for d in (0..last).rev() {
            coord[d] += 1;
            if coord[d] < geo.index_shape[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    tensor_from_vec(&geo.data_shape, out)
}
