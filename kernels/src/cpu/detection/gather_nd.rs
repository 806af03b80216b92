//! GatherND (opset 11, 12 with `batch_dims`, 13).

use ndarray::{ArcArray, IxDyn};

use super::util::{
    contiguous, index_values, require_opset, resolve_index, strides, tensor_from_vec,
};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Element, Tensor, dispatch_all};

/// Gathers slices of `data` addressed by the index tuples in the last dimension of `indices`.
#[derive(Debug)]
pub(crate) struct GatherNd {
    batch_dims: usize,
}

/// Builds GatherND.
pub(crate) fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_opset(spec.opset, 11, "GatherND")?;
    if spec.opset >= 12 {
        spec.attrs.only(&["batch_dims"])?;
    } else {
        spec.attrs.only(&[])?;
    }
    let batch_dims = spec.attrs.int("batch_dims", 0)?;
    let batch_dims = usize::try_from(batch_dims).map_err(|_| KernelError::BadAttribute {
        name: "batch_dims".into(),
        reason: format!("{batch_dims} is negative"),
    })?;
    Ok(Box::new(GatherNd { batch_dims }))
}

impl Kernel for GatherNd {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let data = input(inputs, 0)?;
        let indices = input(inputs, 1)?;
        let idx = index_values(indices, 1)?;
        let geo = Geometry::new(data.shape(), indices.shape(), self.batch_dims)?;
        let out = dispatch_all!(data, a => gather(a, &idx, &geo))?;
        Ok(vec![out])
    }
}

/// Validated shapes of one call.
struct Geometry {
    /// Shape of `data` after the batch dimensions.
    inner_shape: Vec<usize>,
    inner_strides: Vec<usize>,
    /// Length of one index tuple.
    depth: usize,
    /// Product of the batch dimensions.
    batches: usize,
    /// Index tuples per batch.
    tuples: usize,
    /// Elements of `data` per batch.
    block: usize,
    /// Elements in one gathered slice.
    slice: usize,
    out_shape: Vec<usize>,
}

impl Geometry {
    fn new(data: &[usize], indices: &[usize], b: usize) -> Result<Self> {
        let (r, q) = (data.len(), indices.len());
        if r == 0 || q == 0 || b >= r.min(q) {
            return Err(KernelError::Shape(format!(
                "GatherND needs batch_dims {b} < min(rank of data {data:?}, rank of indices {indices:?})"
            )));
        }
        if data[..b] != indices[..b] {
            return Err(KernelError::Shape(format!(
                "the first {b} dimensions of data {data:?} and indices {indices:?} must agree"
            )));
        }
        let depth = indices[q - 1];
        if depth > r - b {
            return Err(KernelError::Shape(format!(
                "index tuples of length {depth} do not fit data {data:?} with batch_dims {b}"
            )));
        }
        let inner_shape = data[b..].to_vec();
        let out_shape: Vec<usize> = data[..b]
            .iter()
            .chain(&indices[b..q - 1])
            .chain(&data[b + depth..])
            .copied()
            .collect();
        Ok(Self {
            inner_strides: strides(&inner_shape),
            batches: data[..b].iter().product(),
            tuples: indices[b..q - 1].iter().product(),
            block: inner_shape.iter().product(),
            slice: data[b + depth..].iter().product(),
            inner_shape,
            depth,
            out_shape,
        })
    }
}

fn gather<T: Element>(data: &ArcArray<T, IxDyn>, idx: &[i64], geo: &Geometry) -> Result<Tensor> {
    let data = contiguous(data);
    // Where each tuple's slice starts (checked).
    let offsets = (0..geo.batches)
        .map(|batch| {
            if geo.depth == 0 {
                // Empty tuples each address the whole batch.
                return Ok(vec![batch * geo.block; geo.tuples]);
            }
            let tuples = &idx[batch * geo.tuples * geo.depth..][..geo.tuples * geo.depth];
            tuples
                .chunks_exact(geo.depth)
                .map(|tuple| {
                    let mut dims = tuple.iter().zip(&geo.inner_shape).zip(&geo.inner_strides);
                    dims.try_fold(batch * geo.block, |off, ((&i, &dim), &stride)| {
                        Ok(off + resolve_index(i, dim)? * stride)
                    })
                })
                .collect::<Result<Vec<usize>>>()
        })
        .collect::<Result<Vec<_>>>()?
        .concat();
    let mut out = Vec::with_capacity(geo.out_shape.iter().product());
    if geo.slice == 1 {
        out.extend(offsets.iter().map(|&off| data[off].clone()));
    } else {
        for off in offsets {
            out.extend_from_slice(&data[off..off + geo.slice]);
        }
    }
    tensor_from_vec(&geo.out_shape, out)
}
