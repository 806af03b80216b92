//! Strips of position tiles (AVX2 and AVX-512) over a blocked image's cells: where every 16 depth rows of
//! the product are one cell's 16 consecutive floats — a 1×1 window on an image in blocks of
//! 16 channels, or a wider window with its depth rows tap by tap within each block
//! ([`PackedA::transposed_by_taps`](super::PackedA)) — one call computes a whole run of
//! positions against one channel panel, tile after tile (of [`AVX2_HEIGHT`] on AVX2). Each tile's
//! broadcasts are at fixed distances from one pointer per block of 16 depth rows, plus the
//! position (a constant too where the positions are adjacent cells), so no depth row loads
//! its offset; and the tile loop's bookkeeping (positions, weights to prefetch, where the
//! outputs go) is done once per strip, not once per tile of 6 × 16 — a tile of 64 depth rows
//! is only about 400 cycles of multiply-adds. On AVX-512 (`conv_rate`, one and two threads,
//! Xeon with AVX-512) the strips ran squeezenet's and resnet50's blocked convolutions
//! 0.77–0.93× and 0.69–0.99× the time of tiles called one by one, 1×1 and 3×3 alike; NASNet's
//! deep 1×1 ones the same. In the models' traces (old and new binaries alternating), the
//! sums of the nodes' medians were 0.93× on squeezenet with one thread, 0.90× and 0.88× on
//! googlenet with one and two, and 0.96× on resnet50 with two. Every product in position
//! tiles runs as strips, on both instruction sets, planar images' too (their depth rows each
//! at its own offset).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
use super::Isa;
#[cfg(target_arch = "x86_64")]
use super::avx2_tile::{self, store_avx2};
#[cfg(target_arch = "x86_64")]
use super::cell_tile;
#[cfg(target_arch = "x86_64")]
use super::position_tile::{
    AVX2_HEIGHT, Acc, POSITIONS, PositionTile, Positions, TileFinish, TileOut, TilePositions,
    avx512_kernel, tile_with,
};

/// Channels per block of a blocked image: the depth rows one cell holds.
const CELL: usize = 16;

/// [`position_tile_avx2`] over a strip of `live_pos` positions (any count), its outputs
/// `i·step` floats apart from `c` (and from `finish.z`): with `ADJACENT`, position `i` at
/// `pos.now[0] + 16·i` in the image; else tile `t`'s positions at `pos.table[8·t..]`
/// ([`POSITIONS`] entries per tile, the last tile's empty lanes repeating its last position).
/// With `GROUPED`, depth rows `16·b .. 16·b + 16` of every block `b < kc / 16` are at
/// consecutive offsets (`offsets[16·b + j] = offsets[16·b] + j`: one cell's channels), the
/// rows past the last whole block taken one by one; without, every row at its own offset (a
/// planar image's `(c, u, v)`: as strips, the stems of squeezenet and inception_v3 took
/// 0.69× and 0.77× the time of tiles called one by one, googlenet's 7×7 stem 0.94×;
/// `conv_rate`, one thread, Zen 3). `pos.ahead_lines` lines from `pos.ahead` are prefetched
/// into L2, spread over the strip's tiles and each tile's blocks (without `GROUPED`, at each
/// tile's start). With `PREFETCH`, each tile
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
    const GROUPED: bool,
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
    // Without groups every depth row takes its own offset (the loop after the blocks').
    let blocks = if GROUPED { kc / CELL } else { 0 };
    // Lines per block: no tile has more than `per` (one division per strip, not per tile).
    let per_block = per.div_ceil(blocks.max(1));
    let mut line = 0;
    let strip = TileOut {
        c,
        strides: (ldc, step),
        live: (live_ch, live_pos),
        accumulate,
        finish,
    };
    // SAFETY: every access stays inside the operands (caller's contract).
    unsafe {
        for t in 0..tiles {
            let (now, next, out) = strip_tile::<ADJACENT, PREFETCH>(pos, &strip, H, t);
            // This tile's share of the lines ahead, spread over its blocks.
            let end = line + per.min(pos.ahead_lines - line);
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
            if !GROUPED {
                while line < end {
                    _mm_prefetch::<_MM_HINT_T1>(pos.ahead.wrapping_add(line * 16).cast::<i8>());
                    line += 1;
                }
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

/// Tile `t` of a strip of tiles of `h` positions writing to `strip` (its live positions the
/// strip's): its positions (with `ADJACENT`, a run of adjacent cells from `pos.now[0]`, else
/// `pos.table[8·t..]`), the next tile's (`pos.next` after the last tile; its own without
/// `PREFETCH`), and its outputs.
///
/// # Safety
/// Without `ADJACENT`, `pos.table` holds [`POSITIONS`] entries for each of the strip's tiles.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn strip_tile<const ADJACENT: bool, const PREFETCH: bool>(
    pos: &TilePositions,
    strip: &TileOut,
    h: usize,
    t: usize,
) -> ([usize; POSITIONS], [usize; POSITIONS], TileOut) {
    let (ldc, step) = strip.strides;
    let (live_ch, live_pos) = strip.live;
    let tiles = live_pos.div_ceil(h);
    // Tile `u`'s positions (`u < tiles`), and the next tile's after the last.
    let positions = |u: usize| -> [usize; POSITIONS] {
        match (ADJACENT, u < tiles) {
            (true, true) => std::array::from_fn(|i| pos.now[0] + CELL * (h * u + i)),
            (true, false) => std::array::from_fn(|i| pos.next[0] + CELL * i),
            // SAFETY: the caller's contract.
            (false, true) => unsafe { *pos.table.add(u * POSITIONS).cast::<[usize; POSITIONS]>() },
            (false, false) => pos.next,
        }
    };
    let now = positions(t);
    let next = match PREFETCH {
        true => positions(t + 1),
        false => now,
    };
    let out = TileOut {
        c: strip.c.wrapping_add(t * h * step),
        strides: (ldc, step),
        live: (live_ch, (live_pos - t * h).min(h)),
        accumulate: strip.accumulate,
        finish: strip.finish.map(|f| f.shifted(t * h * step)),
    };
    (now, next, out)
}

/// [`cell_strip_avx2`] on AVX-512: tiles of `H` (6 to 8) positions × `NV` (1 to 4) vectors
/// of 16 channels, each full one through [`tile_with`] (the AVX-512 tiles' bias and store),
/// the last one, when partly filled, as the cell tile or general tile of that many positions.
/// With `ADJACENT` the strip's tiles are a run of adjacent cells; else tile `t`'s positions
/// are at `pos.table[8·t..]`. Without `GROUPED` (never with `ADJACENT`) the depth rows are
/// anywhere (`offsets[p]` each: a planar image's `(c, u, v)`), and every tile prefetches its
/// share of the lines ahead at its start. With `PREFETCH`, every other depth row of a block
/// fetches one of the next tile's cells of that block. On this instruction set the per-tile loop of
/// `position_task`, around a tile of 16 depth rows (squeezenet's 1×1 convolutions of 16
/// channels), cost a fifth of the product.
///
/// # Safety
/// As [`cell_strip_avx2`]'s, with [`position_tile`]'s bounds for every position of the strip
/// and `NV · 16` channels per panel; the CPU has AVX-512F.
///
/// [`position_tile`]: super::position_tile::position_tile
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
pub unsafe fn cell_strip_avx512<
    const NV: usize,
    const H: usize,
    const BLOCKED: bool,
    const PREFETCH: bool,
    const ADJACENT: bool,
    const GROUPED: bool,
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
    let whole = live_pos / H;
    let tiles = live_pos.div_ceil(H);
    let per = pos.ahead_lines.div_ceil(tiles.max(1));
    // Without groups every depth row takes its own offset (the loop after the blocks').
    let blocks = if GROUPED { kc / CELL } else { 0 };
    let per_block = per.div_ceil(blocks.max(1));
    let mut line = 0;
    let strip = TileOut {
        c,
        strides: (ldc, step),
        live: (live_ch, live_pos),
        accumulate,
        finish,
    };
    // SAFETY: every access stays inside the operands (caller's contract).
    unsafe {
        for t in 0..tiles {
            let (now, next, out) = strip_tile::<ADJACENT, PREFETCH>(pos, &strip, H, t);
            let end = line + per.min(pos.ahead_lines - line);
            if t == whole {
                // The last tile, partly filled: a tile of exactly its positions.
                let rows = live_pos - t * H;
                let part = TilePositions {
                    now,
                    next,
                    ahead: pos.ahead.wrapping_add(line * 16),
                    ahead_lines: pos.ahead_lines - line,
                    table: std::ptr::null(),
                };
                let tile = match ADJACENT {
                    true => cell_tile::kernel_for(NV, rows, BLOCKED, PREFETCH),
                    false => avx512_kernel::<Positions, NV>(rows, BLOCKED, PREFETCH),
                };
                let (strides, live) = (out.strides, out.live);
                tile(
                    kc, w, img, offsets, &part, out.c, strides, live, accumulate, bias, out.finish,
                );
                return;
            }
            // Position `i` from the tile's first: a constant for adjacent cells (the
            // broadcasts' displacement).
            let (first, apart): (usize, [usize; H]) = match ADJACENT {
                true => (now[0], std::array::from_fn(|i| CELL * i)),
                false => (0, std::array::from_fn(|i| now[i])),
            };
            if !GROUPED {
                while line < end {
                    _mm_prefetch::<_MM_HINT_T1>(pos.ahead.wrapping_add(line * 16).cast::<i8>());
                    line += 1;
                }
            }
            tile_with::<NV, H, BLOCKED>(bias, &out, |acc| {
                let row = |acc: &mut Acc<NV, H>, cell: *const f32, p: usize| {
                    let wp = w.add(p * NV * 16);
                    let wv: [__m512; NV] = std::array::from_fn(|v| _mm512_loadu_ps(wp.add(v * 16)));
                    for i in 0..H {
                        let x = _mm512_set1_ps(*cell.add(apart[i]));
                        for v in 0..NV {
                            acc[v][i] = _mm512_fmadd_ps(x, wv[v], acc[v][i]);
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
                    for j in 0..CELL {
                        // One cell of the next tile every other row.
                        if PREFETCH && j % 2 == 0 && j / 2 < H {
                            let cell = img.wrapping_add(at + next[j / 2]);
                            _mm_prefetch::<_MM_HINT_T0>(cell.cast::<i8>());
                        }
                        row(acc, base.add(j), p0 + j);
                    }
                }
                for p in blocks * CELL..kc {
                    row(acc, img.add(*offsets.add(p) + first), p);
                }
            });
        }
        for l in line..pos.ahead_lines {
            _mm_prefetch::<_MM_HINT_T1>(pos.ahead.wrapping_add(l * 16).cast::<i8>());
        }
    }
}

/// The strip for `isa`: on AVX2 of `vectors` (1 or 2) vectors of channels and
/// [`AVX2_HEIGHT`] positions per tile; on AVX-512 of 4 vectors and 6 positions per tile, or
/// of 1 to 3 vectors and `height` (7 or 8) positions per tile. In blocks of 16 channels or
/// channel rows (`blocked`), prefetching the next tile's cells when `prefetch`, over adjacent
/// cells or the positions of a table (`adjacent`), the depth rows in groups of one cell's 16
/// floats or (`grouped` false, without `adjacent`, and on AVX2 without `prefetch`) anywhere.
#[cfg(target_arch = "x86_64")]
pub fn kernel_for(
    isa: Isa,
    vectors: usize,
    height: usize,
    blocked: bool,
    prefetch: bool,
    (adjacent, grouped): (bool, bool),
) -> PositionTile {
    let adjacent = match (grouped, adjacent) {
        (true, adjacent) => Some(adjacent),
        (false, false) => None,
        (false, true) => unreachable!("adjacent cells are grouped"),
    };
    match (isa, vectors, height) {
        (Isa::Avx2, 2, _) => strip::<2>(blocked, prefetch, adjacent),
        (Isa::Avx2, 1, _) => strip::<1>(blocked, prefetch, adjacent),
        (Isa::Avx512, 4, _) => strip512::<4, 6>(blocked, prefetch, adjacent),
        (Isa::Avx512, 3, 7) => strip512::<3, 7>(blocked, prefetch, adjacent),
        (Isa::Avx512, 3, _) => strip512::<3, 8>(blocked, prefetch, adjacent),
        (Isa::Avx512, 2, 7) => strip512::<2, 7>(blocked, prefetch, adjacent),
        (Isa::Avx512, 2, _) => strip512::<2, 8>(blocked, prefetch, adjacent),
        (Isa::Avx512, 1, 7) => strip512::<1, 7>(blocked, prefetch, adjacent),
        (Isa::Avx512, 1, _) => strip512::<1, 8>(blocked, prefetch, adjacent),
        (_, v, _) => unreachable!("{isa:?} cell strips of {v} vectors"),
    }
}

/// [`kernel_for`] for `NV` vectors on AVX2: over adjacent cells (`Some(true)`), a table of
/// positions (`Some(false)`), or a table with ungrouped depth rows (`None`, never
/// prefetching cells: planar images only).
#[cfg(target_arch = "x86_64")]
fn strip<const NV: usize>(blocked: bool, prefetch: bool, adjacent: Option<bool>) -> PositionTile {
    match (adjacent, blocked, prefetch) {
        (Some(false), false, false) => cell_strip_avx2::<NV, false, false, false, true>,
        (Some(false), true, false) => cell_strip_avx2::<NV, true, false, false, true>,
        (Some(false), false, true) => cell_strip_avx2::<NV, false, true, false, true>,
        (Some(false), true, true) => cell_strip_avx2::<NV, true, true, false, true>,
        (Some(true), false, false) => cell_strip_avx2::<NV, false, false, true, true>,
        (Some(true), true, false) => cell_strip_avx2::<NV, true, false, true, true>,
        (Some(true), false, true) => cell_strip_avx2::<NV, false, true, true, true>,
        (Some(true), true, true) => cell_strip_avx2::<NV, true, true, true, true>,
        (None, false, _) => cell_strip_avx2::<NV, false, false, false, false>,
        (None, true, _) => cell_strip_avx2::<NV, true, false, false, false>,
    }
}

/// [`kernel_for`] for `NV` vectors and tiles of `H` positions on AVX-512: over adjacent cells
/// (`Some(true)`), a table of positions (`Some(false)`), or a table with ungrouped depth rows
/// (`None`).
#[cfg(target_arch = "x86_64")]
fn strip512<const NV: usize, const H: usize>(
    blocked: bool,
    prefetch: bool,
    adjacent: Option<bool>,
) -> PositionTile {
    match (adjacent, blocked, prefetch) {
        (Some(true), false, false) => cell_strip_avx512::<NV, H, false, false, true, true>,
        (Some(true), true, false) => cell_strip_avx512::<NV, H, true, false, true, true>,
        (Some(true), false, true) => cell_strip_avx512::<NV, H, false, true, true, true>,
        (Some(true), true, true) => cell_strip_avx512::<NV, H, true, true, true, true>,
        (Some(false), false, false) => cell_strip_avx512::<NV, H, false, false, false, true>,
        (Some(false), true, false) => cell_strip_avx512::<NV, H, true, false, false, true>,
        (Some(false), false, true) => cell_strip_avx512::<NV, H, false, true, false, true>,
        (Some(false), true, true) => cell_strip_avx512::<NV, H, true, true, false, true>,
        (None, false, false) => cell_strip_avx512::<NV, H, false, false, false, false>,
        (None, true, false) => cell_strip_avx512::<NV, H, true, false, false, false>,
        (None, false, true) => cell_strip_avx512::<NV, H, false, true, false, false>,
        (None, true, true) => cell_strip_avx512::<NV, H, true, true, false, false>,
    }
}

/// Off x86-64 there are no cell strips.
#[cfg(not(target_arch = "x86_64"))]
pub fn kernel_for(
    _: super::Isa,
    _: usize,
    _: usize,
    _: bool,
    _: bool,
    _: (bool, bool),
) -> super::position_tile::PositionTile {
    unreachable!("no cell strips off x86-64")
}
