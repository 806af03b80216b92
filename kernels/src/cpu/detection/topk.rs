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
    let order = Order { largest };
    // One row per (outer, inner) pair; row r reads data[outer * n * inner + j * inner + inner_i].
    // Row r's elements j0..j1, which lie every `inner` elements from the first.
    let row_values = |r: usize, j0: usize, j1: usize| {
        let (o, i) = (r / inner, r % inner);
        let first = o * n * inner + j0 * inner + i;
        &data[first..first + (j1 - j0 - 1) * inner + 1]
    };
    let mut picked = vec![(T::default(), 0usize); rows * k];
    // One long row (a detector's scores) is cut into a part per thread, each long enough
    // that its best `k` are a small share of it.
    let parts = rayon::current_num_threads().min(n / (16 * k).max(PARALLEL_THRESHOLD));
    if rows == 1 && parts > 1 {
        // Each task keeps its part's best k, then the best k of those are kept.
        let mut best: Vec<(T, usize)> = (0..parts)
            .into_par_iter()
            .flat_map_iter(|p| {
                let (j0, j1) = (p * n / parts, (p + 1) * n / parts);
                order.best(k, row_values(0, j0, j1), 1, j0)
            })
            .collect();
        order.keep_sorted(&mut best, k);
        picked.copy_from_slice(&best);
    } else {
        let row = |r: usize, dst: &mut [(T, usize)]| {
            let mut best = order.best(k, row_values(r, 0, n), inner, 0);
            order.keep_sorted(&mut best, k);
            dst.copy_from_slice(&best);
        };
        if rows > 1 && rows * n >= PARALLEL_THRESHOLD {
            picked
                .par_chunks_mut(k)
                .enumerate()
                .for_each(|(r, dst)| row(r, dst));
        } else {
            for (r, dst) in picked.chunks_mut(k).enumerate() {
                row(r, dst);
            }
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

/// Which of two `(value, index)` pairs TopK puts first: the larger (or smaller) value, NaN
/// above every number, then the lower index.
#[derive(Clone, Copy)]
struct Order {
    largest: bool,
}

impl Order {
    fn cmp<T: PartialOrd>(self, a: &(T, usize), b: &(T, usize)) -> std::cmp::Ordering {
        let by_value = if self.largest {
            nan_greatest_cmp(&b.0, &a.0)
        } else {
            nan_greatest_cmp(&a.0, &b.0)
        };
        by_value.then(a.1.cmp(&b.1))
    }

    /// The first `k` (at least; in no particular order) of the row `values[j · step]`, whose
    /// first element has index `j0`. Candidates are kept only while they beat the `k`-th best
    /// found so far (a later index never beats an equal value); on a contiguous row, blocks
    /// where no value can are skipped after one vectorised comparison.
    // The negated comparisons are meant: they hold for incomparable values (NaN) too.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    fn best<T: Copy + PartialOrd>(
        self,
        k: usize,
        values: &[T],
        step: usize,
        j0: usize,
    ) -> Vec<(T, usize)> {
        let mut kept: Vec<(T, usize)> = Vec::with_capacity(4 * k);
        let mut bar: Option<(T, usize)> = None;
        let mut offer = |pair: (T, usize), bar: &mut Option<(T, usize)>| {
            if bar.is_some_and(|bar| self.cmp(&pair, &bar).is_ge()) {
                return;
            }
            kept.push(pair);
            if kept.len() == 4 * k {
                kept.select_nth_unstable_by(k - 1, |a, b| self.cmp(a, b));
                kept.truncate(k);
                *bar = Some(kept[k - 1]);
            }
        };
        if step == 1 {
            const BLOCK: usize = 32;
            for (b, block) in values.chunks(BLOCK).enumerate() {
                // A superset of the values that beat the bar (NaN included): no short
                // circuit, so that the loop vectorises.
                let skip = bar.is_some_and(|(v, _)| {
                    !block.iter().fold(false, |any, x| {
                        any | if self.largest { !(*x <= v) } else { !(*x >= v) }
                    })
                });
                if !skip {
                    for (i, &x) in block.iter().enumerate() {
                        offer((x, j0 + b * BLOCK + i), &mut bar);
                    }
                }
            }
        } else {
            for (i, &x) in values.iter().step_by(step).enumerate() {
                offer((x, j0 + i), &mut bar);
            }
        }
        kept
    }

    /// Cuts `pairs` to its first `k` (`k ≤ pairs.len()`), sorted.
    fn keep_sorted<T: PartialOrd>(self, pairs: &mut Vec<(T, usize)>, k: usize) {
        if k < pairs.len() {
            pairs.select_nth_unstable_by(k - 1, |a, b| self.cmp(a, b));
            pairs.truncate(k);
        }
        pairs.sort_unstable_by(|a, b| self.cmp(a, b));
    }
}
