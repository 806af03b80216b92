//! The three transforms of Winograd's F(4×4, 3×3) (Lavin & Gray, "Fast Algorithms for
//! Convolutional Neural Networks", 2016), on the interpolation points 0, ±1, ±2 and ∞:
//! `Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A` for a 6×6 input tile `d`, a 3×3 filter `g` and a 4×4
//! output tile `Y`. Each 1-D transform is written out as its few additions; the 2-D ones
//! apply it down the columns, then along the rows. The input and output transforms work on
//! 16 channels at once, one AVX-512 vector per tile cell.

use std::arch::x86_64::*;

use super::{INPUT, OUTPUT, PRODUCTS};

/// `G g` for one column `g` of a filter, in `f64`:
/// `G = [[1/4, 0, 0], [-1/6, -1/6, -1/6], [-1/6, 1/6, -1/6], [1/24, 1/12, 1/6],
/// [1/24, -1/12, 1/6], [0, 0, 1]]`.
fn filter_1d([g0, g1, g2]: [f64; 3]) -> [f64; INPUT] {
    [
        g0 / 4.0,
        -(g0 + g1 + g2) / 6.0,
        -(g0 - g1 + g2) / 6.0,
        (g0 / 4.0 + g1 / 2.0 + g2) / 6.0,
        (g0 / 4.0 - g1 / 2.0 + g2) / 6.0,
        g2,
    ]
}

/// `G g Gᵀ` for a row-major 3×3 filter, row-major 6×6, rounded to `f32` once at the end.
pub fn filter(g: &[f32]) -> [f32; PRODUCTS] {
    let g = |r: usize, c: usize| f64::from(g[r * 3 + c]);
    // Down each of the three columns, then along each of the six rows.
    let cols: [[f64; INPUT]; 3] = std::array::from_fn(|c| filter_1d([g(0, c), g(1, c), g(2, c)]));
    let mut u = [0f32; PRODUCTS];
    for r in 0..INPUT {
        let row = filter_1d([cols[0][r], cols[1][r], cols[2][r]]);
        for (c, v) in row.into_iter().enumerate() {
            u[r * INPUT + c] = v as f32;
        }
    }
    u
}

/// `Bᵀ d` for one column `d` of an input tile:
/// `Bᵀ = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
/// [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]`.
#[target_feature(enable = "avx512f,fma")]
#[inline]
fn input_1d(d: [__m512; INPUT]) -> [__m512; INPUT] {
    let (four, five, two) = (
        _mm512_set1_ps(4.0),
        _mm512_set1_ps(-5.0),
        _mm512_set1_ps(2.0),
    );
    let d12 = _mm512_add_ps(d[1], d[2]);
    let d34 = _mm512_add_ps(d[3], d[4]);
    let m12 = _mm512_sub_ps(d[1], d[2]);
    let m43 = _mm512_sub_ps(d[4], d[3]);
    let d42 = _mm512_sub_ps(d[4], d[2]);
    let m31 = _mm512_sub_ps(d[3], d[1]);
    [
        _mm512_fmadd_ps(four, d[0], _mm512_fmadd_ps(five, d[2], d[4])),
        _mm512_fnmadd_ps(four, d12, d34),
        _mm512_fmadd_ps(four, m12, m43),
        _mm512_fmadd_ps(two, m31, d42),
        _mm512_fnmadd_ps(two, m31, d42),
        _mm512_fmadd_ps(four, d[1], _mm512_fmadd_ps(five, d[3], d[5])),
    ]
}

/// `Bᵀ d B` for one 6×6 tile of 16-channel vectors: `cell(r, c)` loads row `r`, column `c`;
/// `store(i, v)` receives product `i` (row-major). (Loops, not `array::from_fn`: closures
/// defined here would be compiled without AVX-512, each intrinsic an outlined call.)
#[target_feature(enable = "avx512f,fma")]
#[inline]
pub fn input_tile(cell: impl Fn(usize, usize) -> __m512, mut store: impl FnMut(usize, __m512)) {
    let mut cols = [[_mm512_setzero_ps(); INPUT]; INPUT];
    for (c, col) in cols.iter_mut().enumerate() {
        let mut d = [_mm512_setzero_ps(); INPUT];
        for (r, cell_value) in d.iter_mut().enumerate() {
            *cell_value = cell(r, c);
        }
        *col = input_1d(d);
    }
    // `r` indexes the inner axis of `cols`: row `r` gathers one cell of each column.
    #[allow(clippy::needless_range_loop)]
    for r in 0..INPUT {
        let mut d = [_mm512_setzero_ps(); INPUT];
        for (c, value) in d.iter_mut().enumerate() {
            *value = cols[c][r];
        }
        for (c, v) in input_1d(d).into_iter().enumerate() {
            store(r * INPUT + c, v);
        }
    }
}

/// `Aᵀ m` for one column `m` of a product tile:
/// `Aᵀ = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]`.
#[target_feature(enable = "avx512f,fma")]
#[inline]
fn output_1d(m: [__m512; INPUT]) -> [__m512; OUTPUT] {
    let s12 = _mm512_add_ps(m[1], m[2]);
    let s34 = _mm512_add_ps(m[3], m[4]);
    let d12 = _mm512_sub_ps(m[1], m[2]);
    let d34 = _mm512_sub_ps(m[3], m[4]);
    [
        _mm512_add_ps(_mm512_add_ps(m[0], s12), s34),
        _mm512_fmadd_ps(_mm512_set1_ps(2.0), d34, d12),
        _mm512_fmadd_ps(_mm512_set1_ps(4.0), s34, s12),
        _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.0), d34, d12), m[5]),
    ]
}

/// `Aᵀ m A + bias` for one 6×6 product tile of 16-channel vectors: `product(i)` loads product
/// `i` (row-major); returns the 4×4 outputs, row-major.
#[target_feature(enable = "avx512f,fma")]
#[inline]
pub fn output_tile(product: impl Fn(usize) -> __m512, bias: __m512) -> [[__m512; OUTPUT]; OUTPUT] {
    let mut cols = [[_mm512_setzero_ps(); OUTPUT]; INPUT];
    for (c, col) in cols.iter_mut().enumerate() {
        let mut m = [_mm512_setzero_ps(); INPUT];
        for (r, value) in m.iter_mut().enumerate() {
            *value = product(r * INPUT + c);
        }
        *col = output_1d(m);
    }
    let mut out = [[_mm512_setzero_ps(); OUTPUT]; OUTPUT];
    for (r, row) in out.iter_mut().enumerate() {
        let mut m = [_mm512_setzero_ps(); INPUT];
        for (c, value) in m.iter_mut().enumerate() {
            *value = cols[c][r];
        }
        for (o, v) in row.iter_mut().zip(output_1d(m)) {
            *o = _mm512_add_ps(v, bias);
        }
    }
    out
}
