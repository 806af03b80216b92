//! Step 1 of a Winograd block: its input tiles gathered band by band (one tile row, one
//! block of 16 channels) and transformed into the matrices `V_ξ` of tiles × input channels.

use rayon::prelude::*;

use super::transform::Tiling;
use super::{LANES, WinogradImage, row_blocks};
#[cfg(target_arch = "x86_64")]
use crate::cpu::nn::blocked::vector16::{Vector16, Ymm2, Zmm};
use crate::cpu::nn::matrix::SendPtr;
use crate::cpu::nn::packed_gemm::Isa;

/// Transforms the input tiles of tile rows `rows.0..rows.1` (`tw` tiles each) into `v`:
/// `v[ξ][t][channel]`, `t` counted from the block's first tile, in vectors of `isa`.
pub(super) fn transform_inputs<T: Tiling>(
    image: &WinogradImage<'_>,
    rows: (usize, usize),
    tw: usize,
    v: &mut [f32],
    isa: Isa,
) {
    let blocks = image.channels / LANES;
    let band_width = T::OUTPUT * tw + 2;
    let v_ptr = SendPtr(v.as_mut_ptr());
    row_blocks(rows, blocks).for_each_init(
        || vec![0f32; T::INPUT * band_width * LANES],
        |band, (ty, cb)| {
            fill_band(image, T::OUTPUT * ty, cb, band_width, band);
            let band = Band {
                band,
                width: band_width,
                tw,
                v: v_ptr.get(),
                first: (ty - rows.0) * tw,
                tiles: (rows.1 - rows.0) * tw,
                channels: image.channels,
                cb,
            };
            // SAFETY: the CPU has `isa` (checked by `convolve`); each (tile row, channel
            // block) writes its own entries of `v`.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                match isa {
                    Isa::Avx512 => band.transform_avx512::<T>(),
                    Isa::Avx2 => band.transform_avx2::<T>(),
                }
            };
        },
    );
}

/// Fills `band` (`[rows][band_width][16]`, rows the tiling's `INPUT`) with the input rows of
/// the tile row whose first output row is `oy`, for channel block `cb`: band cell `(i, j)` is
/// image cell `(oy + i − pad_top, j − pad_left)`, zero outside.
fn fill_band(image: &WinogradImage<'_>, oy: usize, cb: usize, band_width: usize, band: &mut [f32]) {
    let [h, w] = image.size;
    let [pt, pl] = image.pads;
    // Band columns `cols.0..cols.1` are image columns `cols.0 − pl ..`.
    let cols = (pl.min(band_width), (pl + w).min(band_width));
    for (i, row) in band.chunks_exact_mut(band_width * LANES).enumerate() {
        let yy = (oy + i).checked_sub(pt).filter(|&yy| yy < h);
        let Some(yy) = yy.filter(|_| cols.0 < cols.1) else {
            row.fill(0.0);
            continue;
        };
        row[..cols.0 * LANES].fill(0.0);
        row[cols.1 * LANES..].fill(0.0);
        let inside = &mut row[cols.0 * LANES..cols.1 * LANES];
        let first = cols.0 - pl;
        match image.blocked {
            true => {
                let at = ((cb * h + yy) * w + first) * LANES;
                inside.copy_from_slice(&image.x[at..at + inside.len()]);
            }
            false => {
                for (l, plane) in image.x[cb * LANES * h * w..]
                    .chunks(h * w)
                    .take(LANES)
                    .enumerate()
                {
                    let src = &plane[yy * w + first..][..cols.1 - cols.0];
                    for (cell, &value) in inside.chunks_exact_mut(LANES).zip(src) {
                        cell[l] = value;
                    }
                }
            }
        }
    }
}

/// One band's input transform: its input rows (one tile row, one channel block) and where its
/// tiles go in `v`.
struct Band<'a> {
    /// `[rows][width][16]`, from [`fill_band`].
    band: &'a [f32],
    width: usize,
    /// Tiles in the band.
    tw: usize,
    /// The transformed inputs, `v[ξ][t][channel]` for `tiles` tiles.
    v: *mut f32,
    /// The band's first tile in `v`.
    first: usize,
    tiles: usize,
    channels: usize,
    /// The band's channel block.
    cb: usize,
}

impl Band<'_> {
    /// [`Band::transform`] on AVX-512.
    ///
    /// # Safety
    /// As [`Band::transform`], on a CPU with AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn transform_avx512<T: Tiling>(&self) {
        // SAFETY: the caller's contract.
        unsafe { self.transform::<T, Zmm>() }
    }

    /// [`Band::transform`] on AVX2.
    ///
    /// # Safety
    /// As [`Band::transform`], on a CPU with AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn transform_avx2<T: Tiling>(&self) {
        // SAFETY: the caller's contract.
        unsafe { self.transform::<T, Ymm2>() }
    }

    /// The input transform of every tile of the band, in vectors `V`; inlined into the
    /// functions that enable their instruction set.
    ///
    /// # Safety
    /// The caller enables `V`'s instruction set; `v` holds `T::PRODUCTS · tiles · channels`
    /// floats; `first + tw ≤ tiles`.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn transform<T: Tiling, V: Vector16>(&self) {
        let (band, width, v) = (self.band.as_ptr(), self.width, self.v);
        let (tiles, channels, cb) = (self.tiles, self.channels, self.cb);
        for tx in 0..self.tw {
            let t = self.first + tx;
            // SAFETY: band cells `(r, OUTPUT·tx + c)` lie inside the band; `v`'s entries
            // `[ξ][t][cb·16..]` inside `v`.
            unsafe {
                T::input_tile(
                    |r, col| V::load(band.add((r * width + T::OUTPUT * tx + col) * LANES)),
                    |xi, value: V| value.store(v.add((xi * tiles + t) * channels + cb * LANES)),
                )
            };
        }
    }
}
