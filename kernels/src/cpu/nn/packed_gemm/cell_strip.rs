//! Strips of AVX2 position tiles over a blocked image's cells: for a 1×1 window on an image
//! in blocks of 16 channels whose output positions are adjacent cells (see
//! [`cell_tile`](super::cell_tile)), one call computes a whole run of positions against one
//! channel panel, tile after tile of [`AVX2_HEIGHT`]. Each tile's broadcasts are at fixed
//! distances from one pointer per block of 16 depth rows, so no register holds a position
//! and no depth row loads its offset; and the tile loop's bookkeeping (positions, weights to
//! prefetch, where the outputs go) is done once per strip, not once per tile of 6 × 16 —
//! a tile of 64 depth rows is only about 400 cycles of multiply-adds.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
use super::avx2_tile::{position_tile_avx2, store_avx2};
#[cfg(target_arch = "x86_64")]
use super::position_tile::{
    AVX2_HEIGHT, POSITIONS, PositionTile, TileFinish, TileOut, TilePositions,
};

/// Channels per block of a blocked image: the depth rows one cell holds.
const CELL: usize = 16;

/// [`position_tile_avx2`] over a strip of `live_pos` positions (any count): position `i` at
/// `pos.now[0] + 16·i` in the image, its outputs `i·step` floats from `c` (and from
/// `finish.z`); depth rows `16·b .. 16·b + 16` of every block `b < kc / 16` at consecutive
/// offsets (`offsets[16·b + j] = offsets[16·b] + j`), the rows past the last whole block taken
/// one by one. `pos.ahead_lines` lines from `pos.ahead` are prefetched into L2, spread over
/// the strip's tiles and each tile's blocks. With `PREFETCH`, each tile fetches the next tile's cells block by block:
/// the strip's own, and after its last tile those from `pos.next[0]` on. The last tile, when
/// partly filled, runs as a general tile.
///
/// # Safety
/// As [`position_tile_avx2`]'s, for every position of the strip; the layout above holds, and
/// when `PREFETCH`, `pos.next[0]` is a position of the image.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
pub unsafe fn cell_strip_avx2<const NV: usize, const BLOCKED: bool, const PREFETCH: bool>(
    kc: usize,
    w: *const f32,
    img: *const f32,
    offsets: *const usize,
    pos: &TilePositions,
    c: *mut f32,
    (ldc, step): (usize, usize),
    (live_ch, live_pos): (usize, usize),
    accumulate: bool,
    bias: Option<&[f32]>,
    finish: Option<TileFinish>,
) {
    const H: usize = AVX2_HEIGHT;
    let first = pos.now[0];
    let whole = live_pos / H;
    let tiles = live_pos.div_ceil(H);
    let per = pos.ahead_lines.div_ceil(tiles.max(1));
    let blocks = kc / CELL;
    let mut line = 0;
    // SAFETY: every access stays inside the operands (caller's contract).
    unsafe {
        for t in 0..tiles {
            let start = first + CELL * H * t;
            // This tile's share of the lines ahead, spread over its blocks.
            let (mine, end) = (per.min(pos.ahead_lines - line), line);
            let per_block = mine.div_ceil(blocks.max(1));
            let end = end + mine;
            let next = match t + 1 < tiles {
                true => start + CELL * H,
                false => pos.next[0],
            };
            let out = TileOut {
                c: c.wrapping_add(t * H * step),
                strides: (ldc, step),
                live: (live_ch, (live_pos - t * H).min(H)),
                accumulate,
                finish: finish.map(|f| f.shifted(t * H * step)),
            };
            if t == whole {
                // The last tile, partly filled: its empty lanes repeat its last position.
                let last = live_pos - t * H - 1;
                let part = TilePositions {
                    now: std::array::from_fn(|i| start + CELL * i.min(last)),
                    next: [next; POSITIONS],
                    ahead: std::ptr::null(),
                    ahead_lines: 0,
                };
                let tile = position_tile_avx2::<NV, H, BLOCKED, PREFETCH>;
                let (strides, live) = (out.strides, out.live);
                tile(
                    kc, w, img, offsets, &part, out.c, strides, live, accumulate, bias, out.finish,
                );
                break;
            }
            let mut acc = [[_mm256_setzero_ps(); H]; NV];
            if let Some(bias) = bias {
                for (v, row) in acc.iter_mut().enumerate() {
                    *row = [_mm256_loadu_ps(bias.as_ptr().add(v * 8)); H];
                }
            }
            let row = |acc: &mut [[__m256; H]; NV], cell: *const f32, p: usize| {
                let wp = w.add(p * NV * 8);
                let wv: [__m256; NV] = std::array::from_fn(|v| _mm256_loadu_ps(wp.add(v * 8)));
                for i in 0..H {
                    let x = _mm256_broadcast_ss(&*cell.add(CELL * i));
                    for v in 0..NV {
                        acc[v][i] = _mm256_fmadd_ps(x, wv[v], acc[v][i]);
                    }
                }
            };
            for b in 0..blocks {
                let p0 = b * CELL;
                let at = *offsets.add(p0);
                let base = img.add(at + start);
                for _ in 0..per_block.min(end - line) {
                    _mm_prefetch::<_MM_HINT_T1>(pos.ahead.wrapping_add(line * 16).cast::<i8>());
                    line += 1;
                }
                let mut j = 0;
                if PREFETCH {
                    // The next tile's H cells of this block, one every other row.
                    for i in 0..H {
                        let cell = img.wrapping_add(at + next + CELL * i);
                        _mm_prefetch::<_MM_HINT_T0>(cell.cast::<i8>());
                        row(&mut acc, base.add(j), p0 + j);
                        row(&mut acc, base.add(j + 1), p0 + j + 1);
                        j += 2;
                    }
                }
                for j in j..CELL {
                    row(&mut acc, base.add(j), p0 + j);
                }
            }
            for p in blocks * CELL..kc {
                row(&mut acc, img.add(*offsets.add(p) + start), p);
            }
            store_avx2::<NV, H, BLOCKED>(&acc, &out);
        }
        for l in line..pos.ahead_lines {
            _mm_prefetch::<_MM_HINT_T1>(pos.ahead.wrapping_add(l * 16).cast::<i8>());
        }
    }
}

/// The strip of `vectors` (1 or 2) vectors of channels, in blocks of 16 channels or channel
/// rows (`blocked`), prefetching the next tile's cells when `prefetch`.
#[cfg(target_arch = "x86_64")]
pub fn kernel_for(vectors: usize, blocked: bool, prefetch: bool) -> PositionTile {
    match (vectors, blocked, prefetch) {
        (2, false, false) => cell_strip_avx2::<2, false, false>,
        (2, true, false) => cell_strip_avx2::<2, true, false>,
        (2, false, true) => cell_strip_avx2::<2, false, true>,
        (2, true, true) => cell_strip_avx2::<2, true, true>,
        (1, false, false) => cell_strip_avx2::<1, false, false>,
        (1, true, false) => cell_strip_avx2::<1, true, false>,
        (1, false, true) => cell_strip_avx2::<1, false, true>,
        (1, true, true) => cell_strip_avx2::<1, true, true>,
        (v, ..) => unreachable!("AVX2 cell strips of {v} vectors"),
    }
}

/// Off x86-64 there are no cell strips.
#[cfg(not(target_arch = "x86_64"))]
pub fn kernel_for(_: usize, _: bool, _: bool) -> super::position_tile::PositionTile {
    unreachable!("no cell strips off x86-64")
}
