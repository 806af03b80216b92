//! Step 3 of a Winograd block: its products transformed back into outputs, 16 output
//! channels at a time, with the bias, then the epilogue.

use rayon::prelude::*;

use super::transform::Tiling;
use super::{LANES, row_blocks};
#[cfg(target_arch = "x86_64")]
use crate::cpu::nn::blocked::vector16::{Vector16, Ymm2, Zmm};
use crate::cpu::nn::epilogue::Epilogue;
use crate::cpu::nn::matrix::SendPtr;
use crate::cpu::nn::packed_gemm::Isa;

/// A tile row of a block: the block's tile rows, tiles per row, the row, its channel block.
type TileRow = ((usize, usize), usize, usize, usize);

/// Where a block's products go: the output image and what finishes it.
pub(super) struct Outputs<'a> {
    /// The instruction set of the transform's vectors.
    pub(super) isa: Isa,
    /// The output image, `m` channels of `out` (height, width).
    pub(super) y: SendPtr<f32>,
    pub(super) m: usize,
    pub(super) out: [usize; 2],
    /// Whether `y` is in blocks of 16 channels (`[m / 16][height][width][16]`), not planes.
    pub(super) blocked: bool,
    pub(super) bias: &'a [f32],
    pub(super) epilogue: Option<&'a Epilogue<'a, f32>>,
}

impl Outputs<'_> {
    /// Transforms the products of tile rows `rows.0..rows.1` (`products[ξ][t][m]`) into
    /// their outputs, each (tile row, output channel block) on its own task.
    pub(super) fn transform<T: Tiling>(&self, products: &[f32], rows: (usize, usize), tw: usize) {
        let blocks = self.m / LANES;
        row_blocks(rows, blocks).for_each(|(ty, cb)| {
            let row = (rows, tw, ty, cb);
            // SAFETY: the CPU has `isa` (checked by `convolve`); each task writes its own
            // rows of its own channels.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                match self.isa {
                    Isa::Avx512 => self.tile_row_avx512::<T>(products, row),
                    Isa::Avx2 => self.tile_row_avx2::<T>(products, row),
                }
            };
        });
    }

    /// [`Outputs::tile_row`] on AVX-512.
    ///
    /// # Safety
    /// As [`Outputs::tile_row`], on a CPU with AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn tile_row_avx512<T: Tiling>(&self, products: &[f32], row: TileRow) {
        // SAFETY: the caller's contract.
        unsafe { self.tile_row::<T, Zmm>(products, row) }
    }

    /// [`Outputs::tile_row`] on AVX2.
    ///
    /// # Safety
    /// As [`Outputs::tile_row`], on a CPU with AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile_row_avx2<T: Tiling>(&self, products: &[f32], row: TileRow) {
        // SAFETY: the caller's contract.
        unsafe { self.tile_row::<T, Ymm2>(products, row) }
    }

    /// The outputs of tile row `ty` (of the block's `rows`, `tw` tiles each) for output
    /// channel block `cb`, then their epilogue, in vectors `V`. A clamp (none, `Relu`,
    /// `Clip`) finishes in registers, with its residual where the outputs are blocked (a
    /// residual is laid out like the outputs); other epilogues in a pass over the tile row
    /// after. Inlined into the functions that enable `V`'s instruction set.
    ///
    /// # Safety
    /// The caller enables `V`'s instruction set; no other thread writes these outputs.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn tile_row<T: Tiling, V: Vector16>(
        &self,
        products: &[f32],
        (rows, tw, ty, cb): TileRow,
    ) {
        let [oh, ow] = self.out;
        let (m, plane) = (self.m, oh * ow);
        let tiles = (rows.1 - rows.0) * tw;
        let first = (ty - rows.0) * tw;
        let y = self.y.get();
        let p = products.as_ptr();
        let oy = (T::OUTPUT * ty, (T::OUTPUT * ty + T::OUTPUT).min(oh));
        let clamp = self
            .epilogue
            .filter(|e| self.blocked || e.add.is_none())
            .and_then(Epilogue::clamp);
        let ((lo, hi), add) = clamp.unwrap_or(((f32::NEG_INFINITY, f32::INFINITY), None));
        // SAFETY: products `[ξ][t][cb·16..]` lie inside `products`; outputs (and residuals,
        // which cover the output) are touched only at cells inside the image and channels of
        // this block.
        unsafe {
            let (lo, hi) = (V::splat(lo), V::splat(hi));
            let bias = V::load(self.bias.as_ptr().add(cb * LANES));
            for tx in 0..tw {
                let t = first + tx;
                let tile =
                    T::output_tile(|xi| V::load(p.add((xi * tiles + t) * m + cb * LANES)), bias);
                for (i, row) in tile.iter().enumerate().take(oy.1 - oy.0) {
                    let yy = oy.0 + i;
                    let columns = T::OUTPUT.min(ow - (T::OUTPUT * tx).min(ow));
                    for (j, &value) in row.iter().enumerate().take(columns) {
                        let xx = T::OUTPUT * tx + j;
                        let mut value = value;
                        match self.blocked {
                            true => {
                                let at = cb * LANES * plane + (yy * ow + xx) * LANES;
                                if let Some(z) = add {
                                    value = value.add(V::load(z.as_ptr().add(at)));
                                }
                                hi.min(lo.max(value)).store(y.add(at));
                            }
                            false => {
                                value = hi.min(lo.max(value));
                                let mut lanes = [0f32; LANES];
                                value.store(lanes.as_mut_ptr());
                                for (l, &v) in lanes.iter().enumerate() {
                                    *y.add((cb * LANES + l) * plane + yy * ow + xx) = v;
                                }
                            }
                        }
                    }
                }
            }
            let Some(e) = self.epilogue.filter(|_| clamp.is_none()) else {
                return;
            };
            let span = (oy.1 - oy.0) * ow;
            match self.blocked {
                true => {
                    let at = cb * LANES * plane + oy.0 * ow * LANES;
                    e.finish(std::slice::from_raw_parts_mut(y.add(at), span * LANES), at);
                }
                false => {
                    for l in 0..LANES {
                        let at = (cb * LANES + l) * plane + oy.0 * ow;
                        e.finish(std::slice::from_raw_parts_mut(y.add(at), span), at);
                    }
                }
            }
        }
    }
}
