//! Axis handling shared by the reductions: normalising negative axes, and viewing a
//! tensor as `[outer, reduced, inner]` so every reduction is a loop over contiguous rows.

use ndarray::{ArrayViewD, CowArray, IxDyn};

use crate::error::{KernelError, Result};

/// Normalises one possibly negative axis against `rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(KernelError::InvalidValue(format!(
            "axis {axis} is out of range for rank {rank}"
        )));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

/// Normalises, sorts and de-duplicates a list of axes.
pub fn normalize_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = axes
        .iter()
        .map(|&a| normalize_axis(a, rank))
        .collect::<Result<Vec<_>>>()?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The shape after reducing `axes` (sorted), with or without the reduced dimensions.
pub fn reduced_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// A tensor laid out as `outer × reduced × inner` contiguous elements.
pub struct Blocked<'a, T> {
    /// The elements, row-major over `[outer, reduced, inner]`.
    pub data: CowArray<'a, T, IxDyn>,
    /// Product of the kept dimensions before the reduced block.
    pub outer: usize,
    /// Product of the reduced dimensions.
    pub reduced: usize,
    /// Product of the kept dimensions after the reduced block.
    pub inner: usize,
}

impl<T> Blocked<'_, T> {
    /// The elements as one slice.
    pub fn slice(&self) -> &[T] {
        self.data
            .as_slice()
            .expect("blocked data is in standard layout")
    }
}

/// Arranges `a` so that the (sorted) `axes` form one contiguous block. When the axes are
/// already adjacent this is free; otherwise the kept axes are moved in front (one copy).
pub fn blocked<'a, T: Clone>(a: &'a ArrayViewD<'a, T>, axes: &[usize]) -> Blocked<'a, T> {
    let shape = a.shape();
    let adjacent = axes.windows(2).all(|w| w[1] == w[0] + 1);
    if adjacent {
        let (first, last) = match (axes.first(), axes.last()) {
            (Some(&f), Some(&l)) => (f, l + 1),
            _ => (shape.len(), shape.len()),
        };
        return Blocked {
            data: a.as_standard_layout(),
            outer: shape[..first].iter().product(),
            reduced: shape[first..last].iter().product(),
            inner: shape[last..].iter().product(),
        };
    }
    let mut order: Vec<usize> = (0..shape.len()).filter(|i| !axes.contains(i)).collect();
    let outer = order.iter().map(|&i| shape[i]).product();
    order.extend_from_slice(axes);
    let permuted = a.clone().permuted_axes(IxDyn(&order));
    let data = CowArray::from(permuted.as_standard_layout().into_owned());
    Blocked {
        data,
        outer,
        reduced: axes.iter().map(|&i| shape[i]).product(),
        inner: 1,
    }
}
