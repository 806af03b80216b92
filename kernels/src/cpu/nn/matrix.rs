//! The matrix core every matrix-shaped kernel (Conv, ConvTranspose, Gemm, MatMul, Einsum) calls:
//! `C = alpha * A * B + beta * C` on strided row/column layouts.
//!
//! `f32` and `f64` go to `matrixmultiply` (chosen by measurement, see
//! `benches/results/matmul-cores-*.md`), except matrix-vector shapes (`n == 1` or `m == 1`),
//! which `matrixmultiply` handles about ten times slower than memory bandwidth allows and which
//! therefore have a dedicated GEMV here. Integer types use a straightforward loop with wrapping
//! arithmetic (numpy's overflow behaviour).

use rayon::prelude::*;

use super::gemv::{gemv_cols, gemv_rows};
use crate::error::{KernelError, Result};

/// Shape and element strides of one matrix operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Distance in elements between two consecutive rows.
    pub rs: usize,
    /// Distance in elements between two consecutive columns.
    pub cs: usize,
}

impl Layout {
    /// A dense row-major `rows x cols` matrix.
    pub fn row_major(rows: usize, cols: usize) -> Self {
        Layout {
            rows,
            cols,
            rs: cols,
            cs: 1,
        }
    }

    /// The same storage read as its transpose.
    pub fn t(self) -> Self {
        Layout {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
        }
    }

    /// Number of slice elements this layout needs (0 for an empty matrix).
    fn span(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            0
        } else {
            (self.rows - 1) * self.rs + (self.cols - 1) * self.cs + 1
        }
    }

    fn check(&self, len: usize, what: &str) -> Result<()> {
        if self.span() > len {
            return Err(KernelError::Shape(format!(
                "matrix {what} needs {} elements, buffer has {len}",
                self.span()
            )));
        }
        Ok(())
    }
}

/// An element type the matrix core can multiply.
pub trait MatElem: Copy + Send + Sync + Default + PartialEq + 'static {
    /// The additive identity.
    const ZERO: Self;
    /// The multiplicative identity.
    const ONE: Self;
    /// `a * b + c` (wrapping for integers).
    fn mul_add(a: Self, b: Self, c: Self) -> Self;
    /// `a * b` (wrapping for integers).
    fn mul(a: Self, b: Self) -> Self;
    /// Multiplies matrices whose layouts have been validated.
    ///
    /// # Safety
    /// Every index reachable through `la`, `lb`, `lc` lies inside the slices.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_unchecked(
        alpha: Self,
        a: &[Self],
        la: Layout,
        b: &[Self],
        lb: Layout,
        beta: Self,
        c: &mut [Self],
        lc: Layout,
    ) {
        unsafe { naive_gemm(alpha, a, la, b, lb, beta, c, lc) }
    }
}

/// `C = alpha * A * B + beta * C`. With `beta == 0`, `C` is overwritten without being read
/// (so stale NaNs in it do not leak into the result).
#[allow(clippy::too_many_arguments)]
pub fn gemm<T: MatElem>(
    alpha: T,
    a: &[T],
    la: Layout,
    b: &[T],
    lb: Layout,
    beta: T,
    c: &mut [T],
    lc: Layout,
) -> Result<()> {
    if la.cols != lb.rows || lc.rows != la.rows || lc.cols != lb.cols {
        return Err(KernelError::Shape(format!(
            "matrix product of {}x{} and {}x{} into {}x{}",
            la.rows, la.cols, lb.rows, lb.cols, lc.rows, lc.cols
        )));
    }
    la.check(a.len(), "A")?;
    lb.check(b.len(), "B")?;
    lc.check(c.len(), "C")?;
    if lc.rows > 1 && lc.cols > 1 && (lc.rs == 0 || lc.cs == 0) {
        return Err(KernelError::Shape(
            "output matrix rows or columns alias".into(),
        ));
    }
    // SAFETY: all three layouts were checked against their slices just above.
    unsafe { T::gemm_unchecked(alpha, a, la, b, lb, beta, c, lc) };
    Ok(())
}

/// Reference triple loop, used for integers and for tiny or degenerate shapes.
#[allow(clippy::too_many_arguments)]
unsafe fn naive_gemm<T: MatElem>(
    alpha: T,
    a: &[T],
    la: Layout,
    b: &[T],
    lb: Layout,
    beta: T,
    c: &mut [T],
    lc: Layout,
) {
    for i in 0..lc.rows {
        for j in 0..lc.cols {
            let mut acc = T::ZERO;
            for p in 0..la.cols {
                // SAFETY: the caller guarantees the layouts fit the slices.
                unsafe {
                    acc = T::mul_add(
                        *a.get_unchecked(i * la.rs + p * la.cs),
                        *b.get_unchecked(p * lb.rs + j * lb.cs),
                        acc,
                    );
                }
            }
            let dst = i * lc.rs + j * lc.cs;
            // SAFETY: as above.
            unsafe {
                let old = *c.get_unchecked(dst);
                let scaled = if beta == T::ZERO {
                    T::ZERO
                } else {
                    T::mul(beta, old)
                };
                *c.get_unchecked_mut(dst) = T::mul_add(alpha, acc, scaled);
            }
        }
    }
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl MatElem for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            fn mul_add(a: Self, b: Self, c: Self) -> Self {
                a.wrapping_mul(b).wrapping_add(c)
            }
            fn mul(a: Self, b: Self) -> Self {
                a.wrapping_mul(b)
            }
        }
    )*};
}
int_elem!(i8, u8, i16, u16, i32, i64, u32, u64);

macro_rules! float_elem {
    ($t:ty, $mm:path) => {
        impl MatElem for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn mul_add(a: Self, b: Self, c: Self) -> Self {
                a * b + c
            }
            fn mul(a: Self, b: Self) -> Self {
                a * b
            }
            unsafe fn gemm_unchecked(
                alpha: Self,
                a: &[Self],
                la: Layout,
                b: &[Self],
                lb: Layout,
                beta: Self,
                c: &mut [Self],
                lc: Layout,
            ) {
                let (m, k, n) = (la.rows, la.cols, lb.cols);
                if m == 0 || n == 0 {
                    return;
                }
                if k == 0 {
                    // SAFETY: lc fits c (checked by the caller).
                    unsafe { naive_gemm(alpha, a, la, b, lb, beta, c, lc) };
                    return;
                }
                if n == 1 && la.cs == 1 && lc.rows > 0 {
                    // y = A x with A row-contiguous: one dot product per row.
                    unsafe { gemv_rows(alpha, a, la, b, lb.rs, beta, c, lc.rs) };
                    return;
                }
                if m == 1 && lb.cs == 1 && lc.cs == 1 {
                    // y^T = x^T B with B row-contiguous: accumulate scaled rows of B.
                    unsafe { gemv_cols(alpha, a, la.cs, b, lb, beta, c) };
                    return;
                }
                if m == 1 && lb.rs == 1 {
                    // y^T = x^T B with B = W^T, W row-contiguous (Gemm transB): y = W x.
                    unsafe { gemv_rows(alpha, b, lb.t(), a, la.cs, beta, c, lc.cs) };
                    return;
                }
                if n == 1 && la.rs == 1 && lc.rs == 1 {
                    // y = A x with A = V^T, V row-contiguous (Gemm transA): y^T = x^T V.
                    unsafe { gemv_cols(alpha, b, lb.rs, a, la.t(), beta, c) };
                    return;
                }
                // SAFETY: layouts checked by the caller.
                unsafe { parallel_gemm($mm, alpha, a, la, b, lb, beta, c, lc) }
            }
        }
    };
}
float_elem!(f32, matrixmultiply::sgemm);
float_elem!(f64, matrixmultiply::dgemm);

/// A `matrixmultiply` entry point (`sgemm` or `dgemm`).
type MmGemm<T> = unsafe fn(
    usize,
    usize,
    usize,
    T,
    *const T,
    isize,
    isize,
    *const T,
    isize,
    isize,
    T,
    *mut T,
    isize,
    isize,
);

/// Multiply-adds below which a GEMM stays on the calling thread.
const GEMM_PARALLEL_WORK: usize = 1 << 18;
/// The narrowest row or column block a thread takes.
const GEMM_MIN_BLOCK: usize = 32;

/// A pointer handed to the threads that each write their own block of `C`.
#[derive(Clone, Copy)]
pub(super) struct SendPtr<T>(pub(super) *mut T);
// SAFETY: each thread writes a disjoint block through it (see `parallel_gemm`).
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so closures capture the whole `Send` wrapper).
    pub(super) fn get(self) -> *mut T {
        self.0
    }
}

/// `matrixmultiply` on the calling thread, or — for large products inside a rayon pool of
/// several threads — on blocks of `C` spread over the pool. (Its own `threading` feature
/// would start a second pool that competes with rayon's for the same cores.) Every block
/// packs its slice of one operand and the whole other one, so `C` is cut along its longer
/// side: row blocks repack `B` (`k × n`), column blocks repack `A` (`m × k`).
///
/// # Safety
/// The layouts fit the slices (checked by the caller).
#[allow(clippy::too_many_arguments)]
unsafe fn parallel_gemm<T: MatElem>(
    mm: MmGemm<T>,
    alpha: T,
    a: &[T],
    la: Layout,
    b: &[T],
    lb: Layout,
    beta: T,
    c: &mut [T],
    lc: Layout,
) {
    let (m, k, n) = (la.rows, la.cols, lb.cols);
    let threads = rayon::current_num_threads();
    let by_rows = m > n;
    let long = if by_rows { m } else { n };
    let blocks = if m * k * n < GEMM_PARALLEL_WORK || threads < 2 {
        1
    } else {
        (2 * threads).min(long / GEMM_MIN_BLOCK).max(1)
    };
    let c_ptr = SendPtr(c.as_mut_ptr());
    // Rows i0..i1 and columns j0..j1 of C.
    let block = |(i0, i1): (usize, usize), (j0, j1): (usize, usize)| {
        // SAFETY: the block's rows of A, columns of B and cells of C lie inside their slices
        // (layouts checked by the caller); blocks are disjoint, so no two threads write the
        // same element of C; strides fit isize for any real buffer.
        unsafe {
            mm(
                i1 - i0,
                k,
                j1 - j0,
                alpha,
                a.as_ptr().add(i0 * la.rs),
                la.rs as isize,
                la.cs as isize,
                b.as_ptr().add(j0 * lb.cs),
                lb.rs as isize,
                lb.cs as isize,
                beta,
                c_ptr.get().add(i0 * lc.rs + j0 * lc.cs),
                lc.rs as isize,
                lc.cs as isize,
            )
        }
    };
    if blocks == 1 {
        block((0, m), (0, n));
        return;
    }
    // Block edges on multiples of 16 (the micro-kernels' widths divide it).
    let width = long.div_ceil(blocks).next_multiple_of(16);
    (0..long.div_ceil(width)).into_par_iter().for_each(|i| {
        let span = (i * width, ((i + 1) * width).min(long));
        if by_rows {
            block(span, (0, n));
        } else {
            block((0, m), span);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    fn data(len: usize, seed: u64) -> Vec<f64> {
        (0..len)
            .map(|i| ((i as u64 * 2654435761 + seed) % 97) as f64 / 17.0 - 2.5)
            .collect()
    }

    #[test]
    fn shapes_agree_with_triple_loop() {
        for &(m, k, n) in &[
            (3, 4, 5),
            (1, 37, 19),
            (41, 33, 1),
            (1, 1, 1),
            (17, 0, 3),
            (70, 300, 1),
            (300, 300, 1),
            (1, 300, 600),
        ] {
            let a = data(m * k, 1);
            let b = data(k * n, 7);
            let want = reference(&a, &b, m, k, n);
            let mut c = vec![f64::NAN; m * n];
            gemm(
                1.0,
                &a,
                Layout::row_major(m, k),
                &b,
                Layout::row_major(k, n),
                0.0,
                &mut c,
                Layout::row_major(m, n),
            )
            .unwrap();
            for (x, y) in c.iter().zip(&want) {
                assert!((x - y).abs() < 1e-9, "{m}x{k}x{n}: {x} vs {y}");
            }
            let af: Vec<f32> = a.iter().map(|&v| v as f32).collect();
            let bf: Vec<f32> = b.iter().map(|&v| v as f32).collect();
            let mut cf = vec![1.0f32; m * n];
            gemm(
                2.0,
                &af,
                Layout::row_major(m, k),
                &bf,
                Layout::row_major(k, n),
                0.5,
                &mut cf,
                Layout::row_major(m, n),
            )
            .unwrap();
            for (x, y) in cf.iter().zip(&want) {
                assert!((*x as f64 - (2.0 * y + 0.5)).abs() < 1e-3, "{m}x{k}x{n}");
            }
        }
    }

    #[test]
    fn transposed_vector_shapes() {
        // x^T W^T (Gemm transB with one row) and V^T x (Gemm transA with one column).
        let (k, n) = (37, 23);
        let w = data(n * k, 3);
        let x = data(k, 5);
        let want: Vec<f64> = (0..n)
            .map(|j| (0..k).map(|p| x[p] * w[j * k + p]).sum())
            .collect();
        let mut c = vec![0.0; n];
        gemm(
            1.0,
            &x,
            Layout::row_major(1, k),
            &w,
            Layout::row_major(n, k).t(),
            0.0,
            &mut c,
            Layout::row_major(1, n),
        )
        .unwrap();
        assert!(c.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-9));
        let mut c = vec![0.0; n];
        gemm(
            1.0,
            &w,
            Layout::row_major(k, n).t(),
            &x,
            Layout::row_major(k, 1),
            0.0,
            &mut c,
            Layout::row_major(n, 1),
        )
        .unwrap();
        let want2: Vec<f64> = (0..n)
            .map(|j| (0..k).map(|p| x[p] * w[p * n + j]).sum())
            .collect();
        assert!(c.iter().zip(&want2).all(|(a, b)| (a - b).abs() < 1e-9));
    }

    #[test]
    fn transposed_and_integer_operands() {
        // A = [[1,2],[3,4]] stored transposed; B = [[5],[6]].
        let at = [1i64, 3, 2, 4];
        let b = [5i64, 6];
        let mut c = [0i64; 2];
        gemm(
            1,
            &at,
            Layout::row_major(2, 2).t(),
            &b,
            Layout::row_major(2, 1),
            0,
            &mut c,
            Layout::row_major(2, 1),
        )
        .unwrap();
        assert_eq!(c, [17, 39]);
    }

    #[test]
    fn mismatched_shapes_are_errors() {
        let a = [0f32; 6];
        let mut c = [0f32; 4];
        let r = gemm(
            1.0,
            &a,
            Layout::row_major(2, 3),
            &a,
            Layout::row_major(2, 3),
            0.0,
            &mut c,
            Layout::row_major(2, 2),
        );
        assert!(matches!(r, Err(KernelError::Shape(_))));
        let r = gemm(
            1.0,
            &a,
            Layout::row_major(2, 4),
            &a,
            Layout::row_major(4, 2),
            0.0,
            &mut c,
            Layout::row_major(2, 2),
        );
        assert!(matches!(r, Err(KernelError::Shape(_))));
    }
}
