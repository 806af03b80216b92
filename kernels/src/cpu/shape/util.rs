//! Helpers shared by the shape kernels: axis normalisation, opset checks and
//! copying strided views into contiguous buffers.

use ndarray::{ArrayViewD, Axis, Ix2, IxDyn};

use crate::cpu::binary::broadcast::map_into;
use crate::error::{KernelError, Result};
use crate::kernel::NodeSpec;
use crate::output_buffer;
use crate::{Element, Tensor};

/// Maps a possibly negative `axis` into `0..rank`.
pub(crate) fn norm_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(KernelError::Shape(format!(
            "axis {axis} is out of range for rank {rank}"
        )));
    }
    Ok(a as usize)
}

/// Normalises a list of axes, rejecting out-of-range and repeated ones.
pub(crate) fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = norm_axis(a, rank)?;
        if out.contains(&n) {
            return Err(KernelError::Shape(format!(
                "axis {a} is repeated in {axes:?}"
            )));
        }
        out.push(n);
    }
    Ok(out)
}

/// Fails with [`KernelError::UnsupportedOpset`] below opset 7 (older versions
/// differ in ways we do not implement).
pub(crate) fn min_opset(spec: &NodeSpec<'_>, min: i64) -> Result<()> {
    if spec.opset < min {
        return Err(KernelError::UnsupportedOpset {
            opset: spec.opset,
            reason: format!("{} is implemented from opset {min}", spec.op_type),
        });
    }
    Ok(())
}

/// Reads non-negative dimensions (a shape, repeats, sizes) from `values`.
pub(crate) fn to_dims(values: &[i64], what: &str) -> Result<Vec<usize>> {
    values
        .iter()
        .map(|&v| {
            usize::try_from(v).map_err(|_| {
                KernelError::InvalidValue(format!("{what} has a negative entry: {values:?}"))
            })
        })
        .collect()
}

/// Lanes shorter than this are copied element by element ([`contiguous_vec`]).
const SHORT_LANE: usize = 16;

/// Copies any (strided, permuted, broadcast) view into a row-major `Vec`.
///
/// Trailing axes that are contiguous in memory are merged first, so a view with
/// long contiguous rows (a slice or concat along an outer axis) is copied run by run.
pub(crate) fn contiguous_vec<T: Clone>(view: ArrayViewD<'_, T>) -> Vec<T> {
    if let Some(s) = view.as_slice() {
        return s.to_vec();
    }
    let mut v = view;
    let rank = v.ndim();
    if v.is_empty() || rank == 0 {
        return v.iter().cloned().collect();
    }
    let last = rank - 1;
    for ax in (0..last).rev() {
        if !v.merge_axes(Axis(ax), Axis(last)) {
            break;
        }
    }
    let mut out = Vec::with_capacity(v.len());
    // Short lanes (columns of a detector's boxes) cost more to walk one by one than their
    // elements do; as a matrix (once unit axes are gone), they are read element by element.
    if v.shape()[last] < SHORT_LANE {
        let mut m = v.view();
        for ax in (0..m.ndim()).rev() {
            if m.ndim() > 2 && m.shape()[ax] == 1 {
                m = m.remove_axis(Axis(ax));
            }
        }
        if let Ok(m) = m.into_dimensionality::<Ix2>() {
            let (rows, cols) = m.dim();
            for r in 0..rows {
                out.extend((0..cols).map(|c| m[[r, c]].clone()));
            }
            return out;
        }
    }
    for lane in v.lanes(Axis(last)) {
        match lane.as_slice() {
            Some(s) => out.extend_from_slice(s),
            None => out.extend(lane.iter().cloned()),
        }
    }
    out
}

/// Builds a tensor from a row-major buffer.
pub(crate) fn tensor_from<T: Element>(shape: &[usize], data: Vec<T>) -> Result<Tensor> {
    let array = ndarray::ArcArray::from_shape_vec(IxDyn(shape), data)
        .map_err(|e| KernelError::Shape(format!("{shape:?}: {e}")))?;
    Ok(T::into_tensor(array))
}

/// Copies a view into a tensor of the same shape for output `index`: a contiguous view into the
/// output's offered or pooled buffer (in parallel when long), a strided one into new memory.
pub(crate) fn view_to_tensor<T: Element>(view: ArrayViewD<'_, T>, index: usize) -> Result<Tensor> {
    let shape = view.shape().to_vec();
    let data = match view.as_slice() {
        Some(src) => output_buffer::build(index, src.len(), |dst| map_into(src, dst, &T::clone)),
        None => contiguous_vec(view),
    };
    tensor_from(&shape, data)
}

/// Reads an optional 1-D integer input as `Vec<i64>`.
pub(crate) fn opt_ints(t: Option<&Tensor>) -> Result<Option<Vec<i64>>> {
    t.map(Tensor::to_i64_vec).transpose()
}

/// Reads a scalar (or one-element) integer input.
pub(crate) fn scalar_i64(t: &Tensor, what: &str) -> Result<i64> {
    let v = t.to_i64_vec()?;
    match v.as_slice() {
        [x] => Ok(*x),
        _ => Err(KernelError::Shape(format!(
            "{what} must hold one value, got {} values",
            v.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{ArrayD, s};

    #[test]
    fn contiguous_vec_of_strided_views() {
        let a = ArrayD::from_shape_vec(IxDyn(&[2, 3, 4]), (0..24).collect::<Vec<i32>>()).unwrap();
        let v = a.slice(s![.., 1..3, ..]);
        assert_eq!(
            contiguous_vec(v.into_dyn()),
            vec![4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23]
        );
        let t = a.view().permuted_axes(IxDyn(&[2, 0, 1]));
        let exp: Vec<i32> = t.iter().copied().collect();
        assert_eq!(contiguous_vec(t), exp);
        let r = a.slice(s![.., ..;-1, 1]);
        assert_eq!(contiguous_vec(r.into_dyn()), vec![9, 5, 1, 21, 17, 13]);
        // Short lanes under unit axes: the first two of every box's four coordinates.
        let boxes =
            ArrayD::from_shape_vec(IxDyn(&[1, 3, 1, 4]), (0..12).collect::<Vec<i32>>()).unwrap();
        let xy = boxes.slice(s![.., .., .., 0..2]);
        assert_eq!(contiguous_vec(xy.into_dyn()), vec![0, 1, 4, 5, 8, 9]);
    }

    #[test]
    fn long_contiguous_views_are_copied_whole() {
        // Rows 3.. of a 5 × 300000 array: 600000 values, copied in parallel chunks.
        let a = ArrayD::from_shape_vec(IxDyn(&[5, 300_000]), (0..1_500_000).collect::<Vec<i32>>())
            .unwrap();
        let t = view_to_tensor(a.slice(s![3.., ..]).into_dyn(), 0).unwrap();
        assert_eq!(t.shape(), &[2, 300_000]);
        let want: Vec<i32> = (900_000..1_500_000).collect();
        assert_eq!(
            t.to_i64_vec().unwrap(),
            want.iter().map(|&v| v as i64).collect::<Vec<_>>()
        );
    }

    #[test]
    fn axes_are_normalised() {
        assert_eq!(norm_axis(-1, 3).unwrap(), 2);
        assert!(norm_axis(3, 3).is_err());
        assert!(norm_axes(&[0, -3], 3).is_err());
    }
}
