//! Convolutions with a 1×r or r×1 window (inception_v3's factorized 1×7 and 7×1, 1×3 and
//! 3×1) by Winograd's 1-D F(4, r) along the window: each run of 4 outputs takes `r + 3`
//! multiply-adds per input and output channel pair where the direct convolution takes `4r`
//! (10 against 28 for r = 7).
//!
//! The transforms' matrices are in `toom_cook.rs`.
//!
//! As for F(4×4, 3×3) (the parent module), per block of tiles: the inputs are transformed
//! into `n` matrices of tiles × input channels, `n` products run against the filters
//! transformed once, and the products are transformed back into the outputs with the bias,
//! then the epilogue. Blocked images only, in and out (`[C / 16][H][W][16]`).

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::toom_cook::{OUTPUT, Transform, transform};
use super::{BLOCK_FLOATS, BLOCK_TILES, LANES, WinogradImage, isa, isa_for, row_blocks};
#[cfg(target_arch = "x86_64")]
use crate::cpu::nn::blocked::vector16::{Vector16, Ymm2, Zmm};
use crate::cpu::nn::epilogue::Epilogue;
use crate::cpu::nn::matrix::SendPtr;
use crate::cpu::nn::packed_gemm::{Isa, PackedA};
use crate::options::{KernelOptions, Winograd};

/// The fewest tiles F(4, r) takes. inception_v3's 1×3 and 3×1 convolutions of 384 channels
/// at 8² (16 tiles) ran 1.04–1.14× the position tiles' time in the model (2 threads), their
/// six transformed filter sets streamed from memory for 16 tiles; its 1×7 and 7×1 at 17²
/// (85 tiles) 0.5–0.6×.
const LEAST_TILES: usize = 64;

/// The axis a window of one row or one column runs along.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Along {
    /// A 1×r window: tiles of 4 outputs along a row.
    Width,
    /// An r×1 window: tiles of 4 outputs down a column.
    Height,
}

/// The window's axis and length when a convolution can run here: a 1×r or r×1 window with
/// r of 3 or 7, unit strides and dilations, input and output channels in whole blocks of
/// 16, on a CPU with AVX2 + FMA or AVX-512.
pub fn applies(
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    c: usize,
    m: usize,
) -> Option<(Along, usize)> {
    fits(kernel, strides, dilations, c, m).filter(|_| isa().is_some())
}

/// [`applies`] but for the instruction set.
fn fits(
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    c: usize,
    m: usize,
) -> Option<(Along, usize)> {
    let (along, r) = match kernel {
        [1, r] => (Along::Width, r),
        [r, 1] => (Along::Height, r),
        _ => return None,
    };
    (matches!(r, 3 | 7)
        && strides == [1, 1]
        && dilations == [1, 1]
        && c.is_multiple_of(LANES)
        && m.is_multiple_of(LANES)
        && c > 0
        && m > 0)
        .then_some((along, r))
}

/// Whether F(4, r) beats the position tiles on a convolution that [`applies`]: at least
/// `LEAST_TILES` (64) tiles to stream the larger filters over, 32 channels in and out (as for
/// F(4×4, 3×3)), and at most 0.7 of the direct multiply-adds once the last tile of each line
/// is counted whole.
pub fn pays(along: Along, r: usize, (c, m): (usize, usize), [oh, ow]: [usize; 2]) -> bool {
    let (line, lines) = match along {
        Along::Width => (ow, oh),
        Along::Height => (oh, ow),
    };
    let tiles = line.div_ceil(OUTPUT) * lines;
    tiles >= LEAST_TILES
        && c >= 32
        && m >= 32
        && 10 * (r + 3) * line.div_ceil(OUTPUT) <= 7 * r * line
}

/// The window's axis when a 2-D convolution (group 1) runs by F(4, r) with `options`: where
/// it [`applies`], `options` leave an instruction set, and, as [`KernelOptions::winograd`]
/// says, where it [`pays`] (`Auto`), always (`Always`) or never (`Never`).
pub fn chooses(
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    (c, m): (usize, usize),
    out: [usize; 2],
    options: &KernelOptions,
) -> Option<Along> {
    isa_for(options)?;
    let (along, r) = fits(kernel, strides, dilations, c, m)?;
    match options.winograd {
        Winograd::Never => false,
        Winograd::Always => true,
        _ => pays(along, r, (c, m), out),
    }
    .then_some(along)
}

/// The filters `w` (`m × c × r`: a 1×r or r×1 window's taps, which lie the same way in
/// both) transformed and packed: `U_ξ = G g` for each of the `r + 3` products. `None`
/// without AVX2 or AVX-512, or for an `r` F(4, r) does not take.
pub fn pack_filters(w: &[f32], m: usize, c: usize, r: usize) -> Option<Vec<PackedA>> {
    pack_filters_for(w, m, c, r, &KernelOptions::default())
}

/// [`pack_filters`] for the instruction set `options` choose (`None` where they leave none).
pub fn pack_filters_for(
    w: &[f32],
    m: usize,
    c: usize,
    r: usize,
    options: &KernelOptions,
) -> Option<Vec<PackedA>> {
    let t = transform(r)?;
    let isa = isa_for(options)?;
    if w.len() < m * c * r {
        return None;
    }
    let mut u = vec![0f32; t.n * m * c];
    for (pair, taps) in w.chunks_exact(r).take(m * c).enumerate() {
        for (xi, g) in t.g.chunks_exact(r).enumerate() {
            let value: f64 = g.iter().zip(taps).map(|(g, &w)| g * f64::from(w)).sum();
            u[xi * m * c + pair] = value as f32;
        }
    }
    Some(
        u.chunks_exact(m * c)
            .map(|u| PackedA::with_isa(u, m, c, isa))
            .collect(),
    )
}

/// How the tiles of an output lie: in strips whose outputs are whole output rows, each strip
/// `per_strip` tiles (a row of tiles along the width, or a tile per column down 4 rows).
#[derive(Debug, Clone, Copy)]
struct Strips {
    along: Along,
    out: [usize; 2],
    pads: [usize; 2],
    /// Inputs per tile.
    n: usize,
    per_strip: usize,
    count: usize,
}

impl Strips {
    fn new(along: Along, n: usize, out: [usize; 2], pads: [usize; 2]) -> Self {
        let [oh, ow] = out;
        let (per_strip, count) = match along {
            Along::Width => (ow.div_ceil(OUTPUT), oh),
            Along::Height => (ow, oh.div_ceil(OUTPUT)),
        };
        Strips {
            along,
            out,
            pads,
            n,
            per_strip,
            count,
        }
    }

    /// The output rows of strip `s`.
    fn rows(&self, s: usize) -> (usize, usize) {
        match self.along {
            Along::Width => (s, s + 1),
            Along::Height => (OUTPUT * s, (OUTPUT * s + OUTPUT).min(self.out[0])),
        }
    }

    /// The output cell (row, column) of output `k` of tile `i` of strip `s`, `None` past
    /// the image.
    fn output(&self, s: usize, i: usize, k: usize) -> Option<(usize, usize)> {
        let (y, x) = match self.along {
            Along::Width => (s, OUTPUT * i + k),
            Along::Height => (OUTPUT * s + k, i),
        };
        (y < self.out[0] && x < self.out[1]).then_some((y, x))
    }

    /// Rows and width of the band of input cells strip `s` reads, and the image cell (row,
    /// column; negative or past the image in the padding) of its first cell.
    fn band(&self, s: usize) -> ([usize; 2], [isize; 2]) {
        let [top, left] = self.pads.map(|p| p as isize);
        match self.along {
            Along::Width => (
                [1, OUTPUT * self.per_strip + self.n - OUTPUT],
                [s as isize - top, -left],
            ),
            Along::Height => ([self.n, self.out[1]], [(OUTPUT * s) as isize - top, -left]),
        }
    }

    /// The band cell (row, column) of input `j` of tile `i`.
    fn band_cell(&self, i: usize, j: usize) -> (usize, usize) {
        match self.along {
            Along::Width => (0, OUTPUT * i + j),
            Along::Height => (j, i),
        }
    }
}

/// `y = conv(x, w) + bias`, then `epilogue`, for one blocked image (`image.blocked`) with a
/// 1×r (`along` the width) or r×1 window and `filters` from [`pack_filters`]; `y` blocked,
/// `[M / 16][OH][OW][16]`. `y` may start uninitialized; every element is written.
///
/// # Panics
/// If the filters are not `r + 3` packings for this CPU for an `r` of 3 or 7, the image is
/// not blocked, the channels are not whole blocks of 16, or an operand is too short
/// (internal contracts: callers check [`applies`] and the shapes).
pub fn convolve(
    filters: &[PackedA],
    along: Along,
    image: &WinogradImage<'_>,
    y: &mut [MaybeUninit<f32>],
    bias: Option<&[f32]>,
    epilogue: Option<&Epilogue<'_, f32>>,
) {
    let (c, m) = (image.channels, filters[0].rows());
    let [oh, ow] = image.out;
    let t = filters
        .len()
        .checked_sub(OUTPUT - 1)
        .and_then(transform)
        .filter(|t| t.n == filters.len());
    let Some(t) = t else {
        panic!(
            "line::convolve: {} filters, not F(4, 3)'s or F(4, 7)'s",
            filters.len()
        );
    };
    assert!(image.blocked, "line::convolve: a blocked image");
    super::check_operands("line::convolve", filters, image, y.len(), bias, epilogue);
    if oh * ow == 0 {
        return;
    }
    let strips = Strips::new(along, t.n, image.out, image.pads);
    let per_block = (BLOCK_FLOATS / (t.n * strips.per_strip * (c + m)))
        .max(BLOCK_TILES.div_ceil(strips.per_strip))
        .clamp(1, strips.count);
    let mut zero_bias = Vec::new();
    let bias = bias.unwrap_or_else(|| {
        zero_bias.resize(m, 0.0);
        &zero_bias
    });
    let y = SendPtr(y.as_mut_ptr().cast::<f32>());
    let most = per_block * strips.per_strip * t.n;
    super::with_scratch(most * c, most * m, |v, products| {
        for s0 in (0..strips.count).step_by(per_block) {
            let block = (s0, (s0 + per_block).min(strips.count));
            let tiles = (block.1 - block.0) * strips.per_strip;
            let (v, products) = (&mut v[..tiles * t.n * c], &mut products[..tiles * t.n * m]);
            transform_inputs(t, &strips, image, block, v, filters[0].isa());
            super::multiply(filters, v, products, tiles);
            let out = Outputs {
                isa: filters[0].isa(),
                t,
                strips: &strips,
                y,
                m,
                bias,
                epilogue,
            };
            out.transform(products, block);
        }
    });
}

/// Transforms the input tiles of strips `block.0..block.1` into `v`: `v[ξ][t][channel]`, `t`
/// counted from the block's first tile, in vectors of `isa`.
fn transform_inputs(
    t: &Transform,
    strips: &Strips,
    image: &WinogradImage<'_>,
    block: (usize, usize),
    v: &mut [f32],
    isa: Isa,
) {
    let blocks = image.channels / LANES;
    let ([rows, width], _) = strips.band(block.0);
    let v_ptr = SendPtr(v.as_mut_ptr());
    let tiles = (block.1 - block.0) * strips.per_strip;
    row_blocks(block, blocks).for_each_init(
        || vec![0f32; rows * width * LANES],
        |band, (s, cb)| {
            let (_, first_cell) = strips.band(s);
            fill_band(image, cb, first_cell, [rows, width], band);
            let first = (s - block.0) * strips.per_strip;
            let at = (
                &band[..],
                width,
                v_ptr.get(),
                (first, tiles),
                image.channels,
                cb,
            );
            // SAFETY: the CPU has `isa` (checked by `convolve`); each (strip, channel block)
            // writes its own entries of `v`.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                match (isa, t.n) {
                    (Isa::Avx512, 6) => transform_band_avx512::<6>(t, strips, at),
                    (Isa::Avx512, _) => transform_band_avx512::<10>(t, strips, at),
                    (Isa::Avx2, 6) => transform_band_avx2::<6>(t, strips, at),
                    (Isa::Avx2, _) => transform_band_avx2::<10>(t, strips, at),
                }
            };
        },
    );
}

/// Fills `band` (`[rows][width][16]`) with channel block `cb`'s cells of the blocked image
/// from `(row, column)` on, zero outside the image.
fn fill_band(
    image: &WinogradImage<'_>,
    cb: usize,
    [row, column]: [isize; 2],
    [rows, width]: [usize; 2],
    band: &mut [f32],
) {
    let [h, w] = image.size.map(|s| s as isize);
    // Band columns `cols.0..cols.1` hold image columns `column + cols.0 ..`.
    let cols = (
        (-column).clamp(0, width as isize) as usize,
        (w - column).clamp(0, width as isize) as usize,
    );
    for (i, cells) in band.chunks_exact_mut(width * LANES).take(rows).enumerate() {
        let yy = row + i as isize;
        if yy < 0 || yy >= h || cols.0 >= cols.1 {
            cells.fill(0.0);
            continue;
        }
        cells[..cols.0 * LANES].fill(0.0);
        cells[cols.1 * LANES..].fill(0.0);
        let inside = &mut cells[cols.0 * LANES..cols.1 * LANES];
        let at = ((cb as isize * h + yy) * w + column + cols.0 as isize) as usize * LANES;
        inside.copy_from_slice(&image.x[at..at + inside.len()]);
    }
}

/// Where one band's transformed tiles go: the band (`[rows][width][16]`), its width, `v`,
/// the band's first tile and the tiles in `v`, the channels and the band's channel block.
type BandAt<'a> = (&'a [f32], usize, *mut f32, (usize, usize), usize, usize);

/// [`transform_band`] on AVX-512.
///
/// # Safety
/// As [`transform_band`]'s, on a CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn transform_band_avx512<const N: usize>(t: &Transform, strips: &Strips, at: BandAt<'_>) {
    // SAFETY: the caller's contract.
    unsafe { transform_band::<N, Zmm>(t, strips, at) }
}

/// [`transform_band`] on AVX2.
///
/// # Safety
/// As [`transform_band`]'s, on a CPU with AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn transform_band_avx2<const N: usize>(t: &Transform, strips: &Strips, at: BandAt<'_>) {
    // SAFETY: the caller's contract.
    unsafe { transform_band::<N, Ymm2>(t, strips, at) }
}

/// The input transform of every tile of one band (one strip, one channel block), `N` inputs
/// per tile (`t.n`), in vectors `V`: for each input, its multiple added to each of the `N`
/// transformed values (`N` accumulators, no chain of dependent additions). Inlined into the
/// functions that enable `V`'s instruction set.
///
/// # Safety
/// The caller enables `V`'s instruction set; `v` holds `n · tiles.1 · channels` floats;
/// `tiles.0 + per_strip ≤ tiles.1`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transform_band<const N: usize, V: Vector16>(
    t: &Transform,
    strips: &Strips,
    (band, width, v, (first, tiles), channels, cb): BandAt<'_>,
) {
    // SAFETY: every tile's cells lie inside its band; entry `[ξ][first + i][cb·16..]` lies
    // inside `v`.
    unsafe {
        for i in 0..strips.per_strip {
            let mut sums = [V::splat(0.0); N];
            for j in 0..N {
                let (row, col) = strips.band_cell(i, j);
                let d = V::load(band.as_ptr().add((row * width + col) * LANES));
                for (xi, sum) in sums.iter_mut().enumerate() {
                    *sum = V::splat(t.bt[xi][j]).mul_add(d, *sum);
                }
            }
            for (xi, &sum) in sums.iter().enumerate() {
                sum.store(v.add((xi * tiles + first + i) * channels + cb * LANES));
            }
        }
    }
}

/// One strip of a block's outputs: the block's strips, the strip, its output channel block.
type StripAt = ((usize, usize), usize, usize);

/// Where a block's products go: the output image and what finishes it.
struct Outputs<'a> {
    /// The instruction set of the transform's vectors.
    isa: Isa,
    t: &'a Transform,
    strips: &'a Strips,
    y: SendPtr<f32>,
    m: usize,
    bias: &'a [f32],
    epilogue: Option<&'a Epilogue<'a, f32>>,
}

impl Outputs<'_> {
    /// Transforms the products of strips `block.0..block.1` (`products[ξ][t][m]`) into their
    /// outputs, each (strip, output channel block) on its own task.
    fn transform(&self, products: &[f32], block: (usize, usize)) {
        row_blocks(block, self.m / LANES).for_each(|(s, cb)| {
            let strip = (block, s, cb);
            // SAFETY: the CPU has `isa` (checked by `convolve`); each task writes its own
            // rows of its own channels.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                match (self.isa, self.t.n) {
                    (Isa::Avx512, 6) => self.strip_avx512::<6>(products, strip),
                    (Isa::Avx512, _) => self.strip_avx512::<10>(products, strip),
                    (Isa::Avx2, 6) => self.strip_avx2::<6>(products, strip),
                    (Isa::Avx2, _) => self.strip_avx2::<10>(products, strip),
                }
            };
        });
    }

    /// [`Outputs::strip`] on AVX-512.
    ///
    /// # Safety
    /// As [`Outputs::strip`]'s, on a CPU with AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn strip_avx512<const N: usize>(&self, products: &[f32], strip: StripAt) {
        // SAFETY: the caller's contract.
        unsafe { self.strip::<N, Zmm>(products, strip) }
    }

    /// [`Outputs::strip`] on AVX2.
    ///
    /// # Safety
    /// As [`Outputs::strip`]'s, on a CPU with AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn strip_avx2<const N: usize>(&self, products: &[f32], strip: StripAt) {
        // SAFETY: the caller's contract.
        unsafe { self.strip::<N, Ymm2>(products, strip) }
    }

    /// The outputs of strip `s` (of the block's strips `block`) for output channel block
    /// `cb`, then their epilogue, `N` products per tile (`self.t.n`), in vectors `V`. A clamp
    /// (none, `Relu`, `Clip`) and its residual finish in registers; other activations in a
    /// pass over the strip after. Inlined into the functions that enable `V`'s instruction
    /// set.
    ///
    /// # Safety
    /// The caller enables `V`'s instruction set; no other thread writes these outputs.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn strip<const N: usize, V: Vector16>(&self, products: &[f32], (block, s, cb): StripAt) {
        let (m, strips) = (self.m, self.strips);
        let [oh, ow] = strips.out;
        let plane = oh * ow;
        let tiles = (block.1 - block.0) * strips.per_strip;
        let first = (s - block.0) * strips.per_strip;
        let (y, p) = (self.y.get(), products.as_ptr());
        let clamp = self.epilogue.and_then(Epilogue::clamp);
        let ((lo, hi), add) = clamp.unwrap_or(((f32::NEG_INFINITY, f32::INFINITY), None));
        // SAFETY: products `[ξ][t][cb·16..]` lie inside `products`; outputs (and residuals,
        // which cover the output) are touched only at cells inside the image and channels of
        // this block.
        unsafe {
            let (lo, hi) = (V::splat(lo), V::splat(hi));
            let bias = V::load(self.bias.as_ptr().add(cb * LANES));
            for i in 0..strips.per_strip {
                let t = first + i;
                let mut sums = [bias; OUTPUT];
                for xi in 0..N {
                    let product = V::load(p.add((xi * tiles + t) * m + cb * LANES));
                    for (k, sum) in sums.iter_mut().enumerate() {
                        *sum = V::splat(self.t.at[k][xi]).mul_add(product, *sum);
                    }
                }
                for (k, &sum) in sums.iter().enumerate() {
                    let Some((yy, xx)) = strips.output(s, i, k) else {
                        break;
                    };
                    let at = cb * LANES * plane + (yy * ow + xx) * LANES;
                    let mut value = sum;
                    if let Some(z) = add {
                        value = value.add(V::load(z.as_ptr().add(at)));
                    }
                    hi.min(lo.max(value)).store(y.add(at));
                }
            }
            let Some(e) = self.epilogue.filter(|_| clamp.is_none()) else {
                return;
            };
            let rows = strips.rows(s);
            let at = cb * LANES * plane + rows.0 * ow * LANES;
            let span = (rows.1 - rows.0) * ow * LANES;
            e.finish(std::slice::from_raw_parts_mut(y.add(at), span), at);
        }
    }
}
