//! A recurrent weight tensor (`W` or `R`, `[directions, rows, cols]`) ready to multiply: its
//! matrices packed once per session when the tensor stays the same (constant weights), else a
//! strided product on the matrices as they are.

use std::borrow::Cow;

use super::super::common::contiguous;
use super::super::matrix::{Layout, gemm};
use super::super::packed_gemm::PackedA;
use super::super::packed_weights::WeightCache;
use super::element::RnnFloat;
use crate::Tensor;
use crate::error::Result;

/// Products with row blocks ("parts") of each direction's matrix.
pub(super) struct Weights<'a, T: RnnFloat> {
    data: Cow<'a, [T]>,
    rows: usize,
    cols: usize,
    /// `(first row, rows)` of each part of a direction's matrix.
    parts: &'a [(usize, usize)],
    /// Direction `d`'s part `p` at `d * parts.len() + p`.
    packed: Option<Cow<'a, [PackedA]>>,
}

impl<'a, T: RnnFloat> Weights<'a, T> {
    /// The `[directions, rows, cols]` tensor `w` (of element type `T`), cut into `parts`,
    /// packed through `cache` (kept there when `cacheable`: `w` is the kernel's input itself).
    pub(super) fn new(
        w: &'a Tensor,
        cache: &'a WeightCache,
        cacheable: bool,
        parts: &'a [(usize, usize)],
    ) -> Result<Self> {
        let (dirs, rows, cols) = (w.shape()[0], w.shape()[1], w.shape()[2]);
        let data = contiguous::<T>(w)?;
        let packed = cache.get_or_pack(w, cacheable, || {
            let mut all = Vec::with_capacity(dirs * parts.len());
            for d in 0..dirs {
                for &(first, count) in parts {
                    let at = (d * rows + first) * cols;
                    all.push(T::pack(
                        &data[at..at + count * cols],
                        count,
                        cols,
                        cache.options(),
                    )?);
                }
            }
            Some(all)
        });
        Ok(Weights {
            data,
            rows,
            cols,
            parts,
            packed,
        })
    }

    /// `out = x · Mᵀ (+ bias per column)` for part `part` of direction `dir`'s matrix `M`
    /// (`count × cols`): `x` is row-major `n × cols`, `out` row-major `n × count`.
    pub(super) fn product(
        &self,
        dir: usize,
        part: usize,
        x: &[T],
        n: usize,
        out: &mut [T],
        bias: Option<&[T]>,
    ) -> Result<()> {
        let (first, count) = self.parts[part];
        let out = &mut out[..n * count];
        // One row of `x` is a matrix-vector product, which the strided GEMM does at memory
        // speed; more rows go to the packed matrices where there are some.
        if n > 1
            && let Some(packed) = &self.packed
        {
            T::multiply_packed(&packed[dir * self.parts.len() + part], x, n, out, bias);
            return Ok(());
        }
        let at = (dir * self.rows + first) * self.cols;
        let m = &self.data[at..at + count * self.cols];
        let beta = match bias {
            Some(b) => {
                out.chunks_exact_mut(count)
                    .for_each(|row| row.copy_from_slice(&b[..count]));
                T::ONE
            }
            None => T::ZERO,
        };
        gemm(
            T::ONE,
            x,
            Layout::row_major(n, self.cols),
            m,
            Layout::row_major(count, self.cols).t(),
            beta,
            out,
            Layout::row_major(n, count),
        )
    }
}
