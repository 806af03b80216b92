//! [`RnnFloat`]: what the recurrent cells need of their element type beyond [`Real`] — the
//! vectorized sigmoid and tanh and the packed GEMM, which only `f32` has.

use std::mem::MaybeUninit;

use super::super::common::Real;
use super::super::packed_gemm::{BSource, Isa, PackedA};
use crate::KernelOptions;
use crate::cpu::transpose_block::transpose_parallel;

/// A float type the recurrent cells compute in (`f32`, `f64`; half types are widened).
pub trait RnnFloat: Real + Copy {
    /// `xs[i] ← tanh(xs[i])`.
    fn tanh_slice(xs: &mut [Self]) {
        xs.iter_mut().for_each(|x| *x = x.tanh());
    }

    /// `xs[i] ← 1 / (1 + e^-xs[i])`.
    fn sigmoid_slice(xs: &mut [Self]) {
        xs.iter_mut()
            .for_each(|x| *x = Self::one() / (Self::one() + (-*x).exp()));
    }

    /// The row-major `rows × cols` matrix `a` packed for the packed GEMM; `None` where there
    /// is none (this type, or this CPU).
    fn pack(_a: &[Self], _rows: usize, _cols: usize, _options: &KernelOptions) -> Option<PackedA> {
        None
    }

    /// `out = x · aᵀ (+ bias per column)` with `a` packed by [`RnnFloat::pack`]: `x` is
    /// row-major `n × a.cols()`, `out` row-major `n × a.rows()`.
    fn multiply_packed(
        _a: &PackedA,
        _x: &[Self],
        _n: usize,
        _out: &mut [Self],
        _bias: Option<&[Self]>,
    ) {
        unreachable!("only types that pack multiply packed")
    }
}

impl RnnFloat for f64 {}

impl RnnFloat for f32 {
    fn tanh_slice(xs: &mut [f32]) {
        super::tanh::tanh_in_place(xs);
    }

    fn sigmoid_slice(xs: &mut [f32]) {
        crate::cpu::unary::vector_exp::sigmoid_in_place(xs);
    }

    fn pack(a: &[f32], rows: usize, cols: usize, options: &KernelOptions) -> Option<PackedA> {
        PackedA::with_options(a, rows, cols, options)
    }

    fn multiply_packed(a: &PackedA, x: &[f32], n: usize, out: &mut [f32], bias: Option<&[f32]>) {
        let (m, k) = (a.rows(), a.cols());
        let out = &mut out[..n * m];
        // Token-major on AVX-512, as `Gemm` does where it was measured against the transpose.
        if a.takes_token_major() && a.isa() == Isa::Avx512 {
            // SAFETY: `MaybeUninit<f32>` has the layout of `f32`, and the product writes every
            // element, so the slice holds initialised floats throughout.
            let uninit = unsafe { &mut *(out as *mut [f32] as *mut [MaybeUninit<f32>]) };
            a.multiply_token_major(x, n, uninit, bias);
            return;
        }
        let mut transposed = vec![0.0f32; m * n];
        a.multiply(
            BSource::Transposed { data: x, ld: k },
            n,
            &mut transposed,
            n,
            bias,
            None,
        );
        transpose_parallel(&transposed, m, n, out);
    }
}
