//! The reduction loop: folds the `reduced` rows of a [`Blocked`] tensor with an
//! accumulator, in parallel for large tensors. Rows are folded in eight independent
//! lanes so the loop is not one long dependency chain.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::axes::Blocked;
use crate::cpu::binary::broadcast::{PAR_THRESHOLD, build_vec};

/// Output elements per rayon task when the reduced dimension is not innermost.
const INNER_CHUNK: usize = 4096;

/// How to reduce: `init` must be the identity of `step`/`merge`.
pub struct Fold<A, S, M, F> {
    /// The identity accumulator.
    pub init: A,
    /// Adds one element to an accumulator.
    pub step: S,
    /// Combines two accumulators.
    pub merge: M,
    /// Turns an accumulator into the output value.
    pub finish: F,
}

fn fold_row<T, A: Copy, S: Fn(A, &T) -> A, M: Fn(A, A) -> A>(
    row: &[T],
    init: A,
    step: &S,
    merge: &M,
) -> A {
    let mut lanes = [init; 8];
    let chunks = row.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (l, x) in lanes.iter_mut().zip(c) {
            *l = step(*l, x);
        }
    }
    let mut acc = lanes[0];
    for l in &lanes[1..] {
        acc = merge(acc, *l);
    }
    for x in rest {
        acc = step(acc, x);
    }
    acc
}

/// Reduces `b` to `outer × inner` values.
pub fn reduce<T, A, O, S, M, F>(b: &Blocked<'_, T>, fold: &Fold<A, S, M, F>) -> Vec<O>
where
    T: Sync,
    A: Copy + Send + Sync,
    O: Send + 'static,
    S: Fn(A, &T) -> A + Sync,
    M: Fn(A, A) -> A + Sync,
    F: Fn(A) -> O + Sync,
{
    let data = b.slice();
    let (outer, r, inner) = (b.outer, b.reduced, b.inner);
    let n_out = outer * inner;
    if n_out == 0 {
        return Vec::new();
    }
    let big = data.len() >= PAR_THRESHOLD;
    if inner == 1 {
        let row = |o: usize| &data[o * r..(o + 1) * r];
        if big && outer == 1 {
            let acc = data
                .par_chunks(PAR_THRESHOLD)
                .map(|c| fold_row(c, fold.init, &fold.step, &fold.merge))
                .reduce(|| fold.init, &fold.merge);
            return vec![(fold.finish)(acc)];
        }
        let fill = |first: usize, out: &mut [MaybeUninit<O>]| {
            for (i, o) in out.iter_mut().enumerate() {
                o.write((fold.finish)(fold_row(
                    row(first + i),
                    fold.init,
                    &fold.step,
                    &fold.merge,
                )));
            }
        };
        return build_vec(n_out, |out| {
            if big {
                let per = PAR_THRESHOLD.div_ceil(r.max(1)).max(1);
                out.par_chunks_mut(per)
                    .enumerate()
                    .for_each(|(c, o)| fill(c * per, o));
            } else {
                fill(0, out);
            }
        });
    }
    // Reduced block in the middle: accumulate whole rows of `inner` values at a time.
    let piece = |o: usize, k0: usize, out: &mut [MaybeUninit<O>]| {
        let mut acc = vec![fold.init; out.len()];
        for j in 0..r {
            let start = (o * r + j) * inner + k0;
            for (a, x) in acc.iter_mut().zip(&data[start..start + out.len()]) {
                *a = (fold.step)(*a, x);
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            o.write((fold.finish)(a));
        }
    };
    build_vec(n_out, |out| {
        if big {
            out.par_chunks_mut(inner).enumerate().for_each(|(o, row)| {
                row.par_chunks_mut(INNER_CHUNK)
                    .enumerate()
                    .for_each(|(c, p)| piece(o, c * INNER_CHUNK, p));
            });
        } else {
            for (o, row) in out.chunks_mut(inner).enumerate() {
                piece(o, 0, row);
            }
        }
    })
}
