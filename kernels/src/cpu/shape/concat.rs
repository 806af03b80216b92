//! Concat: joins tensors along one axis.

use std::mem::MaybeUninit;

use ndarray::{ArcArray, IxDyn};
use rayon::prelude::*;

use super::util::{min_opset, norm_axis, tensor_from};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};
use crate::{Element, Tensor, dispatch_copy};

/// Concat (opset 4+; negative axes from 11).
#[derive(Debug)]
pub struct Concat {
    axis: i64,
}

/// Builds [`Concat`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 4)?;
    spec.attrs.only(&["axis"])?;
    Ok(Box::new(Concat {
        axis: spec.attrs.req_int("axis")?,
    }))
}

impl Kernel for Concat {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let present: Vec<&Tensor> = inputs.iter().flatten().copied().collect();
        let first = *present
            .first()
            .ok_or_else(|| KernelError::Arity("Concat needs at least one input".into()))?;
        if let [only] = present[..] {
            // One input is its own concatenation: shared, not copied (torchvision batches
            // its one image so, 1.2 MB for SSDlite).
            super::util::norm_axis(self.axis, only.rank())?;
            return Ok(vec![only.clone()]);
        }
        let out = dispatch_copy!(
            first,
            a => concat_typed(a, &present, self.axis, copy_pieces)?,
            other => match other {
                Tensor::String(a) => concat_typed(a, &present, self.axis, extend_pieces)?,
                _ => {
                    return Err(KernelError::UnsupportedDType {
                        index: 0,
                        dtype: other.dtype(),
                    });
                }
            }
        );
        Ok(vec![out])
    }
}

/// Concatenates `inputs` (all of `first`'s type): `assemble` joins each input's contiguous
/// chunk per outer index, row-major, into `len` elements.
fn concat_typed<T: Element>(
    first: &ArcArray<T, IxDyn>,
    inputs: &[&Tensor],
    axis: i64,
    assemble: fn(&Pieces<'_, T>, usize) -> Vec<T>,
) -> Result<Tensor> {
    let rank = first.ndim();
    let axis = norm_axis(axis, rank)?;
    let mut arrays = Vec::with_capacity(inputs.len());
    for t in inputs {
        arrays.push(t.shared::<T>()?);
    }
    let mut out_shape = first.shape().to_vec();
    out_shape[axis] = 0;
    for a in &arrays {
        let ok = a.ndim() == rank
            && a.shape()
                .iter()
                .zip(first.shape())
                .enumerate()
                .all(|(i, (x, y))| i == axis || x == y);
        if !ok {
            return Err(KernelError::Shape(format!(
                "Concat on axis {axis}: shapes {:?} and {:?} differ off the axis",
                first.shape(),
                a.shape()
            )));
        }
        out_shape[axis] = out_shape[axis]
            .checked_add(a.shape()[axis])
            .ok_or_else(|| {
                KernelError::ResourceLimit(format!("Concat on axis {axis}: the length overflows"))
            })?;
    }
    // Empty inputs may be long on the axis: the output must still be a tensor one may make.
    crate::limits::checked_elements(&out_shape, std::mem::size_of::<T>())?;
    let outer: usize = out_shape[..axis].iter().product();
    let inner: usize = out_shape[axis + 1..].iter().product();
    let layouts: Vec<_> = arrays.iter().map(|a| a.as_standard_layout()).collect();
    let chunks: Vec<(&[T], usize)> = layouts
        .iter()
        .map(|a| {
            (
                a.as_slice().expect("standard layout"),
                a.shape()[axis] * inner,
            )
        })
        .collect();
    let pieces = Pieces { chunks, outer };
    tensor_from(&out_shape, assemble(&pieces, out_shape.iter().product()))
}

/// The inputs of a concatenation: row `o` of the output (`o < outer`) is every input's `o`-th
/// chunk, in order (`chunks[i]`: input `i`'s data and its chunk length).
struct Pieces<'a, T> {
    chunks: Vec<(&'a [T], usize)>,
    outer: usize,
}

impl<'a, T> Pieces<'a, T> {
    /// Elements per output row.
    fn row(&self) -> usize {
        self.chunks.iter().map(|&(_, chunk)| chunk).sum()
    }

    /// The pieces of output rows `rows`, in output order.
    fn of_rows(&self, rows: std::ops::Range<usize>) -> impl Iterator<Item = &'a [T]> + '_ {
        rows.flat_map(move |o| {
            self.chunks
                .iter()
                .map(move |&(data, chunk)| &data[o * chunk..(o + 1) * chunk])
        })
    }
}

/// The pieces (`len` elements in all) one after another, pushed one by one.
fn extend_pieces<T: Clone + 'static>(pieces: &Pieces<'_, T>, len: usize) -> Vec<T> {
    let mut data = crate::output_buffer::empty(0, len);
    for piece in pieces.of_rows(0..pieces.outer) {
        data.extend_from_slice(piece);
    }
    data
}

/// Elements per parallel copy: large pieces are cut to this size, short rows grouped to it.
const COPY_GRAIN: usize = 16 * 1024;

/// The pieces (`len` elements in all) one after another, copied by all threads when there are
/// many (a cell's `Concat` in NASNet or Inception joins megabytes). Long rows are cut into
/// pieces of at most [`COPY_GRAIN`]; short ones (a detector's boxes, joined one coordinate
/// per row: 13 000 pieces of one float took 60 µs as separate copies) are copied in blocks
/// of rows.
fn copy_pieces<T: Copy + Send + Sync + 'static>(pieces: &Pieces<'_, T>, len: usize) -> Vec<T> {
    let parallel = len >= 4 * COPY_GRAIN;
    crate::output_buffer::build(0, len, |out| {
        let row = pieces.row();
        if row == 0 {
            return;
        }
        if row < COPY_GRAIN {
            let rows_per_block = COPY_GRAIN.div_ceil(row);
            let block = |(b, dst): (usize, &mut [MaybeUninit<T>])| {
                let first = b * rows_per_block;
                let rows = first..first + dst.len() / row;
                let mut rest = dst;
                for piece in pieces.of_rows(rows) {
                    let (head, tail) = rest.split_at_mut(piece.len());
                    copy_piece(piece, head);
                    rest = tail;
                }
            };
            let size = rows_per_block * row;
            if parallel {
                out.par_chunks_mut(size).enumerate().for_each(block);
            } else {
                out.chunks_mut(size).enumerate().for_each(block);
            }
            return;
        }
        let mut jobs: Vec<(&mut [MaybeUninit<T>], &[T])> = Vec::new();
        let mut rest = out;
        for piece in pieces.of_rows(0..pieces.outer) {
            for part in piece.chunks(COPY_GRAIN) {
                let (dst, after) = rest.split_at_mut(part.len());
                jobs.push((dst, part));
                rest = after;
            }
        }
        let copy = |(dst, src): (&mut [MaybeUninit<T>], &[T])| copy_piece(src, dst);
        if parallel {
            jobs.into_par_iter().for_each(copy);
        } else {
            jobs.into_iter().for_each(copy);
        }
    })
}

/// Copies `src` into `dst` (of the same length): element by element when short, where a call
/// to `memcpy` would cost more than the copy.
fn copy_piece<T: Copy>(src: &[T], dst: &mut [MaybeUninit<T>]) {
    if src.len() <= 8 {
        dst.iter_mut().zip(src).for_each(|(d, &s)| {
            d.write(s);
        });
        return;
    }
    // SAFETY: `dst` and `src` have the same length (split from the output by the piece's
    // length) and do not overlap (`dst` is the new output's).
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<T>(), src.len()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;
    use crate::Attributes;

    fn run(axis: i64, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let attrs = Attributes::new().with("axis", AttrValue::Int(axis));
        let spec = NodeSpec {
            op_type: "Concat",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: inputs.len(),
            num_outputs: 1,
            options: Default::default(),
        };
        let k = build(&spec)?;
        let ins: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
        k.run(&ins)
    }

    #[test]
    fn concat_inner_axis() {
        // numpy: np.concatenate([[[1,2],[3,4]], [[5],[6]]], axis=-1) == [[1,2,5],[3,4,6]]
        let a = Tensor::from_shape_vec(&[2, 2], vec![1i64, 2, 3, 4]).unwrap();
        let b = Tensor::from_shape_vec(&[2, 1], vec![5i64, 6]).unwrap();
        let out = run(-1, &[&a, &b]).unwrap();
        assert_eq!(
            out[0],
            Tensor::from_shape_vec(&[2, 3], vec![1i64, 2, 5, 3, 4, 6]).unwrap()
        );
    }

    #[test]
    fn many_short_rows_are_joined_in_blocks() {
        // 40 000 rows of 1 + 12 floats (longer than a short piece): blocks of rows in
        // parallel, the last one partial; each output row by definition.
        let rows = 40_000;
        let a: Vec<f32> = (0..rows).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..rows * 12).map(|i| -(i as f32)).collect();
        let ta = Tensor::from_shape_vec(&[rows, 1], a.clone()).unwrap();
        let tb = Tensor::from_shape_vec(&[rows, 12], b.clone()).unwrap();
        let out = run(1, &[&ta, &tb]).unwrap();
        let want: Vec<f32> = (0..rows)
            .flat_map(|r| std::iter::once(a[r]).chain(b[r * 12..(r + 1) * 12].iter().copied()))
            .collect();
        assert_eq!(out[0], Tensor::from_shape_vec(&[rows, 13], want).unwrap());
    }

    #[test]
    fn concat_strings_outer_axis() {
        let a = Tensor::from_shape_vec(&[1], vec!["a".to_string()]).unwrap();
        let b = Tensor::from_shape_vec(&[2], vec!["b".to_string(), "c".to_string()]).unwrap();
        let out = run(0, &[&a, &b]).unwrap();
        assert_eq!(out[0].shape(), &[3]);
        assert_eq!(
            out[0]
                .view::<String>()
                .unwrap()
                .iter()
                .cloned()
                .collect::<Vec<_>>(),
            vec!["a", "b", "c"]
        );
    }

    #[test]
    fn concat_errors() {
        let a = Tensor::from_shape_vec(&[2, 2], vec![1f32; 4]).unwrap();
        let b = Tensor::from_shape_vec(&[3, 1], vec![1f32; 3]).unwrap();
        assert!(matches!(run(1, &[&a, &b]), Err(KernelError::Shape(_))));
        let c = Tensor::from_shape_vec(&[2, 2], vec![1i32; 4]).unwrap();
        assert!(matches!(
            run(0, &[&a, &c]),
            Err(KernelError::DTypeMismatch(_))
        ));
        assert!(matches!(run(2, &[&a, &a]), Err(KernelError::Shape(_))));
        assert!(run(2, &[&a]).is_err(), "one input, its axis still checked");
        // Empty inputs whose lengths on the axis add up past usize (an overflow, once).
        let long = Tensor::from_shape_vec(&[0, 1 << 62], Vec::<f32>::new()).unwrap();
        let r = run(1, &[&long; 5]);
        assert!(matches!(r, Err(KernelError::ResourceLimit(_))), "{r:?}");
    }

    #[test]
    fn one_input_is_shared() {
        let a = Tensor::from_shape_vec(&[1, 3], vec![1f32, 2.0, 3.0]).unwrap();
        let out = run(-2, &[&a]).unwrap();
        assert_eq!(out[0], a);
        let (x, y) = (a.shared::<f32>().unwrap(), out[0].shared::<f32>().unwrap());
        assert_eq!(x.as_ptr(), y.as_ptr(), "not copied");
    }
}
