//! TopK (opset 1 with attribute `k`, 10 with input `k`, 11 and 24 with `largest` / `sorted`).

use ndarray::{ArcArray, IxDyn};
use rayon::prelude::*;

use super::util::{contiguous, nan_greatest_cmp, normalize_axis, require_opset, tensor_from_vec};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{Element, Tensor, dispatch_numeric};

/// Below this many compared elements TopK runs on the calling thread.
const PARALLEL_THRESHOLD: usize = 1 << 15;

/// The `k` largest (or smallest) elements along an axis and their int64 indices, sorted.
///
/// Equal values keep the lower index first, as ONNX Runtime does; NaN compares above every
/// number. Output is always sorted, which `sorted = 0` permits.
#[derive(Debug)]
pub(crate) struct TopK {
    axis: i64,
    largest: bool,
    /// `k` from the attribute (opset 1); from the second input otherwise.
    k_attr: Option<i64>,
    /// How many outputs the node lists (1 when it only wants the values).
    num_outputs: usize,
}

/// Builds TopK.
pub(crate) fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_opset(spec.opset, 1, "TopK")?;
    let a = spec.attrs;
    let (k_attr, largest) = match spec.opset {
        ..10 => {
            a.only(&["axis", "k"])?;
            (Some(a.req_int("k")?), true)
        }
        10 => {
            a.only(&["axis"])?;
            (None, true)
        }
        _ => {
            a.only(&["axis", "largest", "sorted"])?;
            (None, a.int("largest", 1)? != 0)
        }
    };
    Ok(Box::new(TopK {
        axis: a.int("axis", -1)?,
        largest,
        k_attr,
        num_outputs: spec.num_outputs.clamp(1, 2),
    }))
}

impl Kernel for TopK {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let k = match self.k_attr {
            Some(k) => k,
            None => match input(inputs, 1)?.to_i64_vec()?.as_slice() {
                [k] => *k,
                other => {
                    return Err(KernelError::Shape(format!(
                        "TopK needs a single k, got {} values",
                        other.len()
                    )));
                }
            },
        };
        if x.rank() == 0 {
            return Err(KernelError::Shape("TopK needs an input of rank ≥ 1".into()));
        }
        let axis = normalize_axis(self.axis, x.rank())?;
        let n = x.shape()[axis];
        let k = usize::try_from(k).ok().filter(|&k| k <= n).ok_or_else(|| {
            KernelError::InvalidValue(format!("k = {k} is outside [0, {n}] on axis {axis}"))
        })?;
        let mut out = dispatch_numeric!(x, a => topk(a, axis, k, self.largest),
            other => Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }))?;
        out.truncate(self.num_outputs);
        Ok(out)
    }
}

fn topk<T: Element + Copy + PartialOrd>(
    x: &ArcArray<T, IxDyn>,
    axis: usize,
    k: usize,
    largest: bool,
) -> Result<Vec<Tensor>> {
    let shape = x.shape();
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let rows: usize = shape.iter().product::<usize>() / n.max(1);
    let mut out_shape = shape.to_vec();
    out_shape[axis] = k;
    if k == 0 || rows == 0 {
        return Ok(vec![
            tensor_from_vec::<T>(&out_shape, Vec::new())?,
            tensor_from_vec::<i64>(&out_shape, Vec::new())?,
        ]);
    }
    let data = contiguous(x);
    // One row per (outer, inner) pair; row r reads data[outer * n * inner + j * inner + inner_i].
    let row = |r: usize, buf: &mut Vec<(T, usize)>, dst: &mut [(T, usize)]| {
        let (o, i) = (r / inner, r % inner);
        let base = o * n * inner + i;
        buf.clear();
        buf.extend((0..n).map(|j| (data[base + j * inner], j)));
        let before = |a: &(T, usize), b: &(T, usize)| {
            let by_value = if largest {
                nan_greatest_cmp(&b.0, &a.0)
            } else {
                nan_greatest_cmp(&a.0, &b.0)
            };
            by_value.then(a.1.cmp(&b.1))
        };
        if k < n {
            buf.select_nth_unstable_by(k - 1, before);
        }
        let top = &mut buf[..k];
        top.sort_unstable_by(before);
        dst.copy_from_slice(top);
    };
    let mut picked = vec![(T::default(), 0usize); rows * k];
    if rows > 1 && rows * n >= PARALLEL_THRESHOLD {
        picked
            .par_chunks_mut(k)
            .enumerate()
            .for_each_init(|| Vec::with_capacity(n), |buf, (r, dst)| row(r, buf, dst));
    } else {
        let mut buf = Vec::with_capacity(n);
        for (r, dst) in picked.chunks_mut(k).enumerate() {
            row(r, &mut buf, dst);
        }
    }
    // picked is laid out [outer, inner, k]; the outputs are [outer, k, inner].
    let total = rows * k;
    let mut values = Vec::with_capacity(total);
    let mut indices = Vec::with_capacity(total);
    let outer = rows / inner;
    for o in 0..outer {
        for j in 0..k {
            for i in 0..inner {
                let (v, idx) = picked[(o * inner + i) * k + j];
                values.push(v);
                indices.push(idx as i64);
            }
        }
    }
    Ok(vec![
        tensor_from_vec(&out_shape, values)?,
        tensor_from_vec(&out_shape, indices)?,
    ])
}
