//! The transforms of Winograd's F(4×4, 3×3) and F(2×2, 3×3) (Lavin & Gray, "Fast Algorithms
//! for Convolutional Neural Networks", 2016), on the interpolation points 0, ±1, ±2 and ∞,
//! and 0, ±1 and ∞: `Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A` for an input tile `d` (6×6 or 4×4), a
//! 3×3 filter `g` and an output tile `Y` (4×4 or 2×2). Each 1-D transform is written out as
//! its few additions; the 2-D ones apply it down the columns, then along the rows. The input
//! and output transforms work on 16 channels at once, one [`Vector16`] per tile cell (a zmm
//! register on AVX-512, two ymm on AVX2).

#[cfg(target_arch = "x86_64")]
use crate::cpu::nn::blocked::vector16::Vector16;

/// The largest `INPUT` of the tilings: the length of the 1-D transforms' arrays (a smaller
/// tiling uses their first `INPUT` or `OUTPUT` entries).
#[cfg(target_arch = "x86_64")]
const MOST_INPUT: usize = 6;
/// The largest `OUTPUT` of the tilings.
#[cfg(target_arch = "x86_64")]
const MOST_OUTPUT: usize = 4;

/// One Winograd tiling of 3×3 convolutions, F(`OUTPUT`×`OUTPUT`, 3×3) on input tiles of
/// `INPUT`×`INPUT` cells: F(4×4, 3×3) ([`F4x4`]) where an image has tiles enough to stream
/// its filters (four times the original ones) over, F(2×2, 3×3) ([`F2x2`], filters 16/9 the
/// size) on smaller images (`wide` in the parent module). A tiling gives its 1-D transforms;
/// the 2-D ones apply them down the columns, then along the rows.
pub(super) trait Tiling {
    /// Cells along each side of an input tile.
    const INPUT: usize;
    /// Cells along each side of an output tile.
    const OUTPUT: usize;
    /// Products per tile: one per cell of a transformed input tile.
    const PRODUCTS: usize = Self::INPUT * Self::INPUT;

    /// `G g Gᵀ` for a row-major 3×3 filter `g`, row-major, into `u` (`PRODUCTS` values),
    /// rounded to `f32` once at the end.
    fn filter(g: &[f32], u: &mut [f32]);

    /// `Bᵀ d` for one column `d` of an input tile, in the first `INPUT` entries of each.
    ///
    /// # Safety
    /// The CPU has `V`'s instruction set and the caller enables it.
    #[cfg(target_arch = "x86_64")]
    unsafe fn input_1d<V: Vector16>(d: [V; MOST_INPUT]) -> [V; MOST_INPUT];

    /// `Aᵀ m` for one column `m` of a product tile: `INPUT` entries in, `OUTPUT` out.
    ///
    /// # Safety
    /// The CPU has `V`'s instruction set and the caller enables it.
    #[cfg(target_arch = "x86_64")]
    unsafe fn output_1d<V: Vector16>(m: [V; MOST_INPUT]) -> [V; MOST_OUTPUT];

    /// `Bᵀ d B` for one input tile of 16-channel vectors: `cell(r, c)` loads row `r`, column
    /// `c`; `store(i, v)` receives product `i` (row-major). Inlined into its caller, which
    /// enables `V`'s instruction set. (Loops, not `array::from_fn`: closures defined here
    /// would be compiled without the caller's instruction set, each intrinsic an outlined
    /// call.)
    ///
    /// # Safety
    /// The CPU has `V`'s instruction set and the caller enables it.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn input_tile<V: Vector16>(
        cell: impl Fn(usize, usize) -> V,
        mut store: impl FnMut(usize, V),
    ) {
        let n = Self::INPUT;
        // SAFETY: the caller's contract.
        unsafe {
            let zero = V::splat(0.0);
            let mut cols = [[zero; MOST_INPUT]; MOST_INPUT];
            for (c, col) in cols.iter_mut().enumerate().take(n) {
                let mut d = [zero; MOST_INPUT];
                for (r, value) in d.iter_mut().enumerate().take(n) {
                    *value = cell(r, c);
                }
                *col = Self::input_1d(d);
            }
            // `r` indexes the inner axis of `cols`: row `r` gathers one cell of each column.
            for r in 0..n {
                let mut d = [zero; MOST_INPUT];
                for (value, col) in d.iter_mut().zip(&cols).take(n) {
                    *value = col[r];
                }
                for (c, v) in Self::input_1d(d).into_iter().enumerate().take(n) {
                    store(r * n + c, v);
                }
            }
        }
    }

    /// `Aᵀ m A + bias` for one product tile of 16-channel vectors: `product(i)` loads product
    /// `i` (row-major); returns the outputs, row-major, in the first `OUTPUT` rows and
    /// columns. Inlined like [`Tiling::input_tile`].
    ///
    /// # Safety
    /// The CPU has `V`'s instruction set and the caller enables it.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn output_tile<V: Vector16>(
        product: impl Fn(usize) -> V,
        bias: V,
    ) -> [[V; MOST_OUTPUT]; MOST_OUTPUT] {
        let n = Self::INPUT;
        // SAFETY: the caller's contract.
        unsafe {
            let zero = V::splat(0.0);
            let mut cols = [[zero; MOST_OUTPUT]; MOST_INPUT];
            for (c, col) in cols.iter_mut().enumerate().take(n) {
                let mut m = [zero; MOST_INPUT];
                for (r, value) in m.iter_mut().enumerate().take(n) {
                    *value = product(r * n + c);
                }
                *col = Self::output_1d(m);
            }
            let mut out = [[zero; MOST_OUTPUT]; MOST_OUTPUT];
            for (r, row) in out.iter_mut().enumerate().take(Self::OUTPUT) {
                let mut m = [zero; MOST_INPUT];
                for (value, col) in m.iter_mut().zip(&cols).take(n) {
                    *value = col[r];
                }
                for (o, v) in row.iter_mut().zip(Self::output_1d(m)).take(Self::OUTPUT) {
                    *o = v.add(bias);
                }
            }
            out
        }
    }
}

/// F(4×4, 3×3): 36 products per 16 outputs.
pub(super) struct F4x4;

/// F(2×2, 3×3): 16 products per 4 outputs.
pub(super) struct F2x2;

/// `G g Gᵀ` for a row-major 3×3 filter `g` and the 1-D `G` of a tiling (`filter_1d`, in
/// `f64`), into `u` (`I × I`, row-major), rounded to `f32` once at the end.
fn filter_2d<const I: usize>(g: &[f32], u: &mut [f32], filter_1d: fn([f64; 3]) -> [f64; I]) {
    let g = |r: usize, c: usize| f64::from(g[r * 3 + c]);
    // Down each of the three columns, then along each of the rows.
    let cols: [[f64; I]; 3] = std::array::from_fn(|c| filter_1d([g(0, c), g(1, c), g(2, c)]));
    for r in 0..I {
        let row = filter_1d([cols[0][r], cols[1][r], cols[2][r]]);
        for (c, v) in row.into_iter().enumerate() {
            u[r * I + c] = v as f32;
        }
    }
}

/// `G g` for one column `g` of a filter, in `f64`:
/// `G = [[1/4, 0, 0], [-1/6, -1/6, -1/6], [-1/6, 1/6, -1/6], [1/24, 1/12, 1/6],
/// [1/24, -1/12, 1/6], [0, 0, 1]]`.
fn filter_1d([g0, g1, g2]: [f64; 3]) -> [f64; 6] {
    [
        g0 / 4.0,
        -(g0 + g1 + g2) / 6.0,
        -(g0 - g1 + g2) / 6.0,
        (g0 / 4.0 + g1 / 2.0 + g2) / 6.0,
        (g0 / 4.0 - g1 / 2.0 + g2) / 6.0,
        g2,
    ]
}

impl Tiling for F4x4 {
    const INPUT: usize = 6;
    const OUTPUT: usize = 4;

    fn filter(g: &[f32], u: &mut [f32]) {
        filter_2d(g, u, filter_1d);
    }

    /// `Bᵀ = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
    /// [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]`.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn input_1d<V: Vector16>(d: [V; 6]) -> [V; 6] {
        // SAFETY: the caller's contract.
        unsafe {
            let (four, five, two) = (V::splat(4.0), V::splat(-5.0), V::splat(2.0));
            let d12 = d[1].add(d[2]);
            let d34 = d[3].add(d[4]);
            let m12 = d[1].sub(d[2]);
            let m43 = d[4].sub(d[3]);
            let d42 = d[4].sub(d[2]);
            let m31 = d[3].sub(d[1]);
            [
                four.mul_add(d[0], five.mul_add(d[2], d[4])),
                four.neg_mul_add(d12, d34),
                four.mul_add(m12, m43),
                two.mul_add(m31, d42),
                two.neg_mul_add(m31, d42),
                four.mul_add(d[1], five.mul_add(d[3], d[5])),
            ]
        }
    }

    /// `Aᵀ = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
    /// [0, 1, -1, 8, -8, 1]]`.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn output_1d<V: Vector16>(m: [V; 6]) -> [V; 4] {
        // SAFETY: the caller's contract.
        unsafe {
            let s12 = m[1].add(m[2]);
            let s34 = m[3].add(m[4]);
            let d12 = m[1].sub(m[2]);
            let d34 = m[3].sub(m[4]);
            [
                m[0].add(s12).add(s34),
                V::splat(2.0).mul_add(d34, d12),
                V::splat(4.0).mul_add(s34, s12),
                V::splat(8.0).mul_add(d34, d12).add(m[5]),
            ]
        }
    }
}

/// `G g` of F(2×2, 3×3) for one column `g` of a filter, in `f64`:
/// `G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]`.
fn filter_1d_small([g0, g1, g2]: [f64; 3]) -> [f64; 4] {
    [g0, (g0 + g1 + g2) / 2.0, (g0 - g1 + g2) / 2.0, g2]
}

impl Tiling for F2x2 {
    const INPUT: usize = 4;
    const OUTPUT: usize = 2;

    fn filter(g: &[f32], u: &mut [f32]) {
        filter_2d(g, u, filter_1d_small);
    }

    /// `Bᵀ = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]` (the last two
    /// entries out are unused).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn input_1d<V: Vector16>([d0, d1, d2, d3, _, _]: [V; 6]) -> [V; 6] {
        // SAFETY: the caller's contract.
        unsafe { [d0.sub(d2), d1.add(d2), d2.sub(d1), d1.sub(d3), d0, d0] }
    }

    /// `Aᵀ = [[1, 1, 1, 0], [0, 1, -1, -1]]` (the last two entries out are unused).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn output_1d<V: Vector16>([m0, m1, m2, m3, _, _]: [V; 6]) -> [V; 4] {
        // SAFETY: the caller's contract.
        unsafe {
            let (first, second) = (m0.add(m1).add(m2), m1.sub(m2).sub(m3));
            [first, second, first, second]
        }
    }
}
