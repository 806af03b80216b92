//! Transpose: permutes axes.

use ndarray::{ArcArray, IxDyn};
use rayon::prelude::*;

use super::util::{contiguous_vec, min_opset};
use crate::cpu::transpose_block::transpose_block;
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
pub fn check_perm(perm: &[i64], rank: usize) -> Result<Vec<usize>> {
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

/// Below this many elements a transpose runs on the calling thread.
const PARALLEL_MIN: usize = 1 << 16;

/// Side of the square tiles the inner two axes are copied in (keeps reads and writes in cache).
const TILE: usize = 32;

/// The same permutation on fewer axes: size-1 axes dropped and input axes that stay adjacent
/// and in order in the output merged into one. Returns the merged input shape and the
/// permutation of the merged axes (`[1, 9, 91, 100, 136]` by `[0, 3, 4, 1, 2]`, RetinaNet's
/// head, is the 2-D transpose of `[819, 13600]`).
fn merge_axes(shape: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    // Input axes of other lengths than 1, renumbered in input order.
    let mut renumbered = vec![usize::MAX; shape.len()];
    let mut kept = 0;
    for (axis, &len) in shape.iter().enumerate() {
        if len != 1 {
            renumbered[axis] = kept;
            kept += 1;
        }
    }
    // Runs of consecutive input axes in output order, each one merged axis.
    let mut runs: Vec<(usize, usize)> = Vec::new(); // (first input axis, last input axis)
    for p in perm
        .iter()
        .map(|&p| renumbered[p])
        .filter(|&p| p != usize::MAX)
    {
        match runs.last_mut() {
            Some(run) if run.1 + 1 == p => run.1 = p,
            _ => runs.push((p, p)),
        }
    }
    let lens: Vec<usize> = shape.iter().copied().filter(|&len| len != 1).collect();
    let mut by_input: Vec<usize> = (0..runs.len()).collect();
    by_input.sort_by_key(|&r| runs[r].0);
    let merged_shape = by_input
        .iter()
        .map(|&r| lens[runs[r].0..=runs[r].1].iter().product())
        .collect();
    // Output run r is merged input axis `position of r in by_input`.
    let mut merged_perm = vec![0; runs.len()];
    for (axis, &r) in by_input.iter().enumerate() {
        merged_perm[r] = axis;
    }
    (merged_shape, merged_perm)
}

/// Copies the permuted tensor. Axes are merged first ([`merge_axes`]); when the output's last
/// axis is then contiguous in the input, whole runs are copied; otherwise the inner two output
/// axes are copied tile by tile, blocks of tile rows in parallel.
fn transpose_typed<T: Element>(a: &ArcArray<T, IxDyn>, perm: &[usize]) -> Result<Tensor> {
    let out_shape: Vec<usize> = perm.iter().map(|&p| a.shape()[p]).collect();
    let std = a.as_standard_layout();
    let src = std.as_slice().expect("standard layout");
    let (shape, perm) = merge_axes(a.shape(), perm);
    let rank = perm.len();
    let mut in_strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        in_strides[i] = in_strides[i + 1] * shape[i + 1];
    }
    let merged_out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let st: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
    let total: usize = out_shape.iter().product();
    if rank >= 2 && st[rank - 1] == 1 && merged_out[rank - 1] >= WHOLE_RUN && total > 0 {
        return super::util::tensor_from(&out_shape, copy_runs(src, &merged_out, &st));
    }
    if rank < 2 || st[rank - 1] == 1 || total == 0 {
        let merged = ndarray::ArrayView::from_shape(IxDyn(&shape), src)
            .map_err(|e| KernelError::Shape(e.to_string()))?;
        let data = contiguous_vec(merged.permuted_axes(IxDyn(&perm)));
        return super::util::tensor_from(&out_shape, data);
    }
    let (n0, n1, s0, s1) = (
        merged_out[rank - 2],
        merged_out[rank - 1],
        st[rank - 2],
        st[rank - 1],
    );
    let mut out = crate::output_buffer::overwritable::<T>(0, total);
    // A 2-D transpose of 32-bit values (the output's rows are the input's columns) moves
    // 8 × 8 blocks in registers.
    let words = s0 == 1 && is_word::<T>();
    // TILE output rows of one block (the inner two axes at one outer index).
    let copy_rows = |(b, t, rows): (usize, usize, &mut [T])| {
        // The block's first input element: its outer index in the output's outer axes.
        let mut rest = b;
        let mut base = 0;
        for d in (0..rank - 2).rev() {
            base += rest % merged_out[d] * st[d];
            rest /= merged_out[d];
        }
        let i0 = t * TILE;
        if words {
            // SAFETY: T is f32, i32 or u32 (plain 32-bit values); these output rows
            // i0..i0 + r are input columns base + i0.. of n1 rows at stride s1, which the
            // element-wise walk below reads too.
            unsafe {
                transpose_block(
                    src.as_ptr().add(base + i0).cast(),
                    s1,
                    n1,
                    rows.len() / n1,
                    rows.as_mut_ptr().cast(),
                    n1,
                )
            };
            return;
        }
        for j0 in (0..n1).step_by(TILE) {
            let j1 = (j0 + TILE).min(n1);
            for (r, row) in rows.chunks_mut(n1).enumerate() {
                let bi = base + (i0 + r) * s0;
                for (j, d) in row[j0..j1].iter_mut().enumerate() {
                    *d = src[bi + (j0 + j) * s1].clone();
                }
            }
        }
    };
    if total < PARALLEL_MIN {
        for (b, block) in out.chunks_mut(n0 * n1).enumerate() {
            block
                .chunks_mut(TILE * n1)
                .enumerate()
                .for_each(|(t, rows)| copy_rows((b, t, rows)));
        }
    } else {
        out.par_chunks_mut(n0 * n1)
            .enumerate()
            .flat_map(|(b, block)| {
                block
                    .par_chunks_mut(TILE * n1)
                    .enumerate()
                    .map(move |(t, rows)| (b, t, rows))
            })
            .for_each(copy_rows);
    }
    super::util::tensor_from(&out_shape, out)
}

/// Whether `T` is a plain 32-bit value whose bits a transpose may move as floats.
fn is_word<T: 'static>() -> bool {
    use std::any::TypeId;
    let t = TypeId::of::<T>();
    t == TypeId::of::<f32>() || t == TypeId::of::<i32>() || t == TypeId::of::<u32>()
}

/// The shortest contiguous run [`copy_runs`] takes; shorter ones are read element by element
/// as a matrix (`contiguous_vec`).
const WHOLE_RUN: usize = 16;

/// The permuted tensor when the output's last axis is contiguous in the input: each output
/// row of `out[rank − 1]` elements is one run of the input, copied whole into the output's
/// offered buffer (rows in parallel for large tensors). `out` and `strides` are the merged
/// output shape and each output axis's input stride. BERT's attention heads
/// (`[128, 12, 64]` by `[1, 0, 2]`) took 34–38 µs walked lane by lane into new memory.
fn copy_runs<T: Element>(src: &[T], out: &[usize], strides: &[usize]) -> Vec<T> {
    let rank = out.len();
    let run = out[rank - 1];
    let total: usize = out.iter().product();
    let mut data = crate::output_buffer::overwritable::<T>(0, total);
    let copy_run = |(row, dst): (usize, &mut [T])| {
        // The row's first input element, from its index over the outer output axes.
        let (mut rest, mut base) = (row, 0);
        for d in (0..rank - 1).rev() {
            base += rest % out[d] * strides[d];
            rest /= out[d];
        }
        dst.clone_from_slice(&src[base..base + run]);
    };
    if total < PARALLEL_MIN {
        data.chunks_mut(run).enumerate().for_each(copy_run);
    } else {
        data.par_chunks_mut(run).enumerate().for_each(copy_run);
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AttrValue, Attributes};

    /// Runs `Transpose` (opset 13) with `perm` (or none) on `x`.
    fn transpose(perm: Option<&[i64]>, x: &Tensor) -> Result<Tensor> {
        let attrs = match perm {
            Some(p) => Attributes::new().with("perm", AttrValue::Ints(p.to_vec())),
            None => Attributes::new(),
        };
        let spec = NodeSpec {
            op_type: "Transpose",
            domain: "",
            opset: 13,
            attrs: &attrs,
            num_inputs: 1,
            num_outputs: 1,
            options: Default::default(),
        };
        Ok(build(&spec)?.run(&[Some(x)])?.remove(0))
    }

    #[test]
    fn transpose_3d() {
        // numpy: np.arange(6).reshape(1,2,3).transpose(2,0,1).ravel() == [0,3,1,4,2,5]
        let x = Tensor::from_shape_vec(&[1, 2, 3], (0..6).collect::<Vec<i64>>()).unwrap();
        assert_eq!(
            transpose(Some(&[2, 0, 1]), &x).unwrap(),
            Tensor::from_shape_vec(&[3, 1, 2], vec![0i64, 3, 1, 4, 2, 5]).unwrap()
        );
        let y = Tensor::zeros(crate::DType::F32, &[2, 2]);
        assert!(matches!(
            transpose(Some(&[2, 0, 1]), &y),
            Err(KernelError::Shape(_))
        ));
    }

    #[test]
    fn default_perm_reverses() {
        let x = Tensor::from_shape_vec(&[2, 3], (0..6).collect::<Vec<i32>>()).unwrap();
        assert_eq!(
            transpose(None, &x).unwrap(),
            Tensor::from_shape_vec(&[3, 2], vec![0i32, 3, 1, 4, 2, 5]).unwrap()
        );
    }

    #[test]
    fn permutations_match_ndarray() {
        // Larger than one tile with the last axis moved, RetinaNet's head layout, size-1 axes
        // between merged ones, an identity after merging, a batch of 2-D transposes, empty
        // axes, sizes over the parallel threshold, and contiguous runs: every output against
        // ndarray's permuted iteration of the same input.
        let cases: &[(&[usize], &[i64])] = &[
            (&[37, 3, 70], &[1, 2, 0]),
            (&[1, 3, 5, 7, 11], &[0, 3, 4, 1, 2]),
            (&[2, 1, 3, 1, 40], &[0, 4, 1, 2, 3]),
            (&[4, 1, 6], &[1, 0, 2]),
            (&[3, 33, 35], &[0, 2, 1]),
            (&[5, 1, 1, 37], &[3, 2, 0, 1]),
            (&[0, 1, 7, 3], &[0, 2, 3, 1]),
            (&[2, 0, 3], &[2, 1, 0]),
            (&[1, 9, 13, 40, 41], &[0, 3, 4, 1, 2]),
            (&[3, 70, 400], &[0, 2, 1]),
            // Contiguous runs of 16 or more copied whole: BERT's attention heads (over the
            // parallel threshold), a small batch, and runs under reordered outer axes.
            (&[1, 128, 12, 64], &[0, 2, 1, 3]),
            (&[3, 5, 16], &[1, 0, 2]),
            (&[2, 7, 3, 20], &[2, 0, 1, 3]),
        ];
        for &(shape, perm) in cases {
            let len = shape.iter().product::<usize>() as i32;
            let x = Tensor::from_shape_vec(shape, (0..len).collect::<Vec<i32>>()).unwrap();
            let out = transpose(Some(perm), &x).unwrap();
            let axes: Vec<usize> = perm.iter().map(|&p| p as usize).collect();
            let view = x.view::<i32>().unwrap().permuted_axes(IxDyn(&axes));
            let exp: Vec<i32> = view.iter().copied().collect();
            assert_eq!(
                out,
                Tensor::from_shape_vec(view.shape(), exp).unwrap(),
                "shape {shape:?} perm {perm:?}"
            );
        }
    }
}
