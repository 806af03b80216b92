//! Strips of AVX2 position tiles over a blocked image's cells: where every 16 depth rows of
//! the product are one cell's 16 consecutive floats — a 1×1 window on an image in blocks of
//! 16 channels, or a wider window with its depth rows tap by tap within each block
//! ([`PackedA::transposed_by_taps`](super::PackedA)) — one call computes a whole run of
//! positions against one channel panel, tile after tile of [`AVX2_HEIGHT`]. Each tile's
//! broadcasts are at fixed distances from one pointer per block of 16 depth rows, plus the
//! position (a constant too where the positions are adjacent cells), so no depth row loads
//! its offset; and the tile loop's bookkeeping (positions, weights to prefetch, where the
//! outputs go) is done once per strip, not once per tile of 6 × 16 — a tile of 64 depth rows
//! is only about 400 cycles of multiply-adds.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
use super::avx2_tile::{self, store_avx2};
#[cfg(target_arch = "x86_64")]
use super::position_tile::{
    AVX2_HEIGHT, POSITIONS, PositionTile, TileFinish, TileOut, TilePositions,
};

/// Channels per block of a blocked image: the depth rows one cell holds.
const CELL: usize = 16;

/// [`position_tile_avx2`] over a strip of `live_pos` positions (any count), its outputs
/// `i·step` floats apart from `c` (and from `finish.z`): with `ADJACENT`, position `i` at
/// `pos.now[0] + 16·i` in the image; else tile `t`'s positions at `pos.table[8·t..]`
/// ([`POSITIONS`] entries per tile, the last tile's empty lanes repeating its last position).
/// Depth rows `16·b .. 16·b + 16` of every block `b < kc / 16` are at consecutive offsets
/// (`offsets[16·b + j] = offsets[16·b] + j`: one cell's channels), the rows past the last
/// whole block taken one by one. `pos.ahead_lines` lines from `pos.ahead` are prefetched
/// into L2, spread over the strip's tiles and each tile's blocks. With `PREFETCH`, each tile
/// fetches the next tile's cells block by block: the strip's own, and after its last tile
/// those at `pos.next`. The last tile, when partly filled, runs as a general tile.
///
/// # Safety
/// As [`position_tile_avx2`]'s, for every position of the strip; the layout above holds, and
/// when `PREFETCH`, `pos.next` holds positions of the image.
///
/// [`position_tile_avx2`]: avx2_tile::position_tile_avx2
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
pub unsafe fn cell_strip_avx2<
    const NV: usize,
    const BLOCKED: bool,
    const PREFETCH: bool,
    const ADJACENT: bool,
>(
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
    let whole = live_pos / H;
    let tiles = live_pos.div_ceil(H);
    let per = pos.ahead_lines.div_ceil(tiles.max(1));
    let blocks = kc / CELL;
    let mut line = 0;
    // SAFETY: every access stays inside the operands (caller's contract).
    unsafe {
        // Tile `t`'s positions (`t < tiles`), and the next tile's after the last.
        let positions = |t: usize| -> [usize; POSITIONS] {
            match (ADJACENT, t < tiles) {
                (true, true) => std::array::from_fn(|i| pos.now[0] + CELL * (H * t + i)),
                (true, false) => std::array::from_fn(|i| pos.next[0] + CELL * i),
                (false, true) => *pos.table.add(t * POSITIONS).cast::<[usize; POSITIONS]>(),
                (false, false) => pos.next,
            }
        };
        for t in 0..tiles {
            let now = positions(t);
            let next = match PREFETCH {
                true => positions(t + 1),
                false => now,
            };
            // This tile's share of the lines ahead, spread over its blocks.
            let (mine, end) = (per.min(pos.ahead_lines - line), line);
            let per_block = mine.div_ceil(blocks.max(1));
            let end = end + mine;
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
                    now: std::array::from_fn(|i| now[i.min(last)]),
                    next,
                    ..TilePositions::default()
                };
                let tile = avx2_tile::position_tile_avx2::<NV, H, BLOCKED, PREFETCH>;
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
            // Position `i` from the tile's first: a constant for adjacent cells, which the
            // broadcasts then take as their displacement (as a register, the 1×1
            // convolutions ran up to 25 % slower).
            let (first, apart): (usize, [usize; H]) = match ADJACENT {
                true => (now[0], std::array::from_fn(|i| CELL * i)),
                false => (0, std::array::from_fn(|i| now[i])),
            };
            // Depth row `p`, its cell of position `i` at `cell + apart[i]`.
            let row = |acc: &mut [[__m256; H]; NV], cell: *const f32, p: usize| {
                let wp = w.add(p * NV * 8);
                let wv: [__m256; NV] = std::array::from_fn(|v| _mm256_loadu_ps(wp.add(v * 8)));
                for i in 0..H {
                    let x = _mm256_broadcast_ss(&*cell.add(apart[i]));
                    for v in 0..NV {
                        acc[v][i] = _mm256_fmadd_ps(x, wv[v], acc[v][i]);
                    }
                }
            };
            for b in 0..blocks {
                let p0 = b * CELL;
                let at = *offsets.add(p0);
                let base = img.add(at + first);
                for _ in 0..per_block.min(end - line) {
                    _mm_prefetch::<_MM_HINT_T1>(pos.ahead.wrapping_add(line * 16).cast::<i8>());
                    line += 1;
                }
                let mut j = 0;
                if PREFETCH {
                    // The next tile's H cells of this block, one every other row.
                    for i in 0..H {
                        let cell = img.wrapping_add(at + next[i]);
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
                row(&mut acc, img.add(*offsets.add(p) + first), p);
            }
            store_avx2::<NV, H, BLOCKED>(&acc, &out);
        }
        for l in line..pos.ahead_lines {
            _mm_prefetch::<_MM_HINT_T1>(pos.ahead.wrapping_add(l * 16).cast::<i8>());
        }
    }
}

/// The strip of `vectors` (1 or 2) vectors of channels, in blocks of 16 channels or channel
/// rows (`blocked`), prefetching the next tile's cells when `prefetch`, over adjacent cells
/// or the positions of a table (`adjacent`).
#[cfg(target_arch = "x86_64")]
pub fn kernel_for(vectors: usize, blocked: bool, prefetch: bool, adjacent: bool) -> PositionTile {
    match vectors {
        2 => strip::<2>(blocked, prefetch, adjacent),
        1 => strip::<1>(blocked, prefetch, adjacent),
        v => unreachable!("AVX2 cell strips of {v} vectors"),
    }
}

/// [`kernel_for`] for `NV` vectors.
#[cfg(target_arch = "x86_64")]
fn strip<const NV: usize>(blocked: bool, prefetch: bool, adjacent: bool) -> PositionTile {
    match (blocked, prefetch, adjacent) {
        (false, false, false) => cell_strip_avx2::<NV, false, false, false>,
        (true, false, false) => cell_strip_avx2::<NV, true, false, false>,
        (false, true, false) => cell_strip_avx2::<NV, false, true, false>,
        (true, true, false) => cell_strip_avx2::<NV, true, true, false>,
        (false, false, true) => cell_strip_avx2::<NV, false, false, true>,
        (true, false, true) => cell_strip_avx2::<NV, true, false, true>,
        (false, true, true) => cell_strip_avx2::<NV, false, true, true>,
        (true, true, true) => cell_strip_avx2::<NV, true, true, true>,
    }
}

/// Off x86-64 there are no cell strips.
#[cfg(not(target_arch = "x86_64"))]
pub fn kernel_for(_: usize, _: bool, _: bool, _: bool) -> super::position_tile::PositionTile {
    unreachable!("no cell strips off x86-64")
}
