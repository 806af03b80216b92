//! Matrix-vector products (`n == 1` or `m == 1`) for the matrix core: `matrixmultiply` handles
//! these shapes about ten times slower than memory bandwidth allows.

use rayon::prelude::*;

use super::matrix::{Layout, MatElem};

/// Work (multiply-adds) below which a GEMV stays on the calling thread.
const GEMV_PARALLEL_WORK: usize = 1 << 16;

/// Dot product of a contiguous row with a strided vector, with eight independent accumulators
/// so that the compiler vectorises it.
///
/// # Safety
/// `x[(row.len() - 1) * xs]` must be in bounds.
#[inline]
unsafe fn dot<T: MatElem + std::ops::Add<Output = T>>(row: &[T], x: &[T], xs: usize) -> T {
    let mut acc = [T::ZERO; 8];
    let chunks = row.len() / 8;
    if xs == 1 {
        for ch in 0..chunks {
            for (l, a) in acc.iter_mut().enumerate() {
                let p = ch * 8 + l;
                // SAFETY: p < row.len(), and x has at least row.len() elements (caller).
                unsafe {
                    *a = T::mul_add(*row.get_unchecked(p), *x.get_unchecked(p), *a);
                }
            }
        }
    } else {
        for ch in 0..chunks {
            for (l, a) in acc.iter_mut().enumerate() {
                let p = ch * 8 + l;
                // SAFETY: as above with stride xs.
                unsafe {
                    *a = T::mul_add(*row.get_unchecked(p), *x.get_unchecked(p * xs), *a);
                }
            }
        }
    }
    let mut tail = T::ZERO;
    for p in chunks * 8..row.len() {
        // SAFETY: as above.
        unsafe { tail = T::mul_add(*row.get_unchecked(p), *x.get_unchecked(p * xs), tail) };
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// [`dot`] compiled for AVX2 + FMA.
///
/// # Safety
/// As [`dot`], and the CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2<T: MatElem + std::ops::Add<Output = T>>(row: &[T], x: &[T], xs: usize) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { dot(row, x, xs) }
}

/// [`dot`] with the widest vector instructions the CPU has.
///
/// # Safety
/// As [`dot`].
#[inline]
unsafe fn dot_dispatch<T: MatElem + std::ops::Add<Output = T>>(row: &[T], x: &[T], xs: usize) -> T {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: features checked just above; bounds forwarded from the caller.
        return unsafe { dot_avx2(row, x, xs) };
    }
    // SAFETY: forwarded from the caller.
    unsafe { dot(row, x, xs) }
}

/// `c[i * cs] = alpha * dot(A[i, :], x) + beta * c[i * cs]` for a row-contiguous A.
///
/// # Safety
/// The layouts fit the slices (checked by [`gemm`]).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemv_rows<T: MatElem + std::ops::Add<Output = T>>(
    alpha: T,
    a: &[T],
    la: Layout,
    x: &[T],
    xs: usize,
    beta: T,
    c: &mut [T],
    cs: usize,
) {
    let k = la.cols;
    let one_row = |i: usize, out: &mut T| {
        let row = &a[i * la.rs..i * la.rs + k];
        // SAFETY: x spans (k - 1) * xs + 1 elements (layout checked).
        let d = unsafe { dot_dispatch(row, x, xs) };
        let scaled = if beta == T::ZERO {
            T::ZERO
        } else {
            T::mul(beta, *out)
        };
        *out = T::mul_add(alpha, d, scaled);
    };
    if cs == 1 {
        let out = &mut c[..la.rows];
        if la.rows * k >= GEMV_PARALLEL_WORK {
            let rows_per_task = (GEMV_PARALLEL_WORK / k.max(1)).max(4);
            out.par_chunks_mut(rows_per_task)
                .enumerate()
                .for_each(|(t, chunk)| {
                    for (r, o) in chunk.iter_mut().enumerate() {
                        one_row(t * rows_per_task + r, o);
                    }
                });
        } else {
            for (i, o) in out.iter_mut().enumerate() {
                one_row(i, o);
            }
        }
    } else {
        for i in 0..la.rows {
            one_row(i, &mut c[i * cs]);
        }
    }
}

/// `c[j] = alpha * sum_p x[p] * B[p, j] + beta * c[j]` for a row-contiguous B and contiguous c.
///
/// # Safety
/// The layouts fit the slices (checked by [`gemm`]).
pub(super) unsafe fn gemv_cols<T: MatElem>(
    alpha: T,
    x: &[T],
    xs: usize,
    b: &[T],
    lb: Layout,
    beta: T,
    c: &mut [T],
) {
    let n = lb.cols;
    let columns = |j0: usize, out: &mut [T]| {
        let w = out.len();
        let mut acc = vec![T::ZERO; w];
        for p in 0..lb.rows {
            let xp = x[p * xs];
            let row = &b[p * lb.rs + j0..p * lb.rs + j0 + w];
            for (a, &v) in acc.iter_mut().zip(row) {
                *a = T::mul_add(xp, v, *a);
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            let scaled = if beta == T::ZERO {
                T::ZERO
            } else {
                T::mul(beta, *o)
            };
            *o = T::mul_add(alpha, a, scaled);
        }
    };
    let out = &mut c[..n];
    const BLOCK: usize = 512;
    if n * lb.rows >= GEMV_PARALLEL_WORK {
        out.par_chunks_mut(BLOCK)
            .enumerate()
            .for_each(|(t, chunk)| columns(t * BLOCK, chunk));
    } else {
        for (t, chunk) in out.chunks_mut(BLOCK).enumerate() {
            columns(t * BLOCK, chunk);
        }
    }
}
