//! Position tiles over a blocked image's cells: the AVX-512 [`position_tile`] for a 1×1
//! window on an image in blocks of 16 channels, where a tile's positions are adjacent cells
//! (position `i` at `16·i` floats from the first) and the depth rows of each block are its
//! cell's 16 consecutive floats. Each broadcast is then at a fixed distance from one pointer
//! per block: no register holds a position, no depth row loads its offset, and the next
//! tile's cells are prefetched once each. The general tile spent 14 loads and a dozen integer
//! instructions per 16 multiply-adds on this (8 positions in registers, two of them spilled).
//! The AVX-512 cell strips ([`cell_strip`](super::cell_strip)) run each run of full tiles
//! themselves and end with one of these when the last tile is partly filled.
//!
//! [`position_tile`]: super::position_tile::position_tile

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::position_tile::TilePositions;
#[cfg(target_arch = "x86_64")]
use super::position_tile::{Acc, Avx512Tiles, PositionTile, TileOut, avx512_kernel, tile_with};

/// Channels per block of a blocked image: the depth rows one cell holds.
const CELL: usize = 16;

/// [`position_tile`](super::position_tile::position_tile) for a 1×1 window on a blocked
/// image: the same computation and contract, and besides it, positions `0..R` at `pos.now[0]
/// + 16·i` (adjacent cells), and depth rows `16·b .. 16·b + 16` of every block `b < kc / 16` at
/// consecutive offsets (`offsets[16·b + j] = offsets[16·b] + j`); the rows past the last whole
/// block are taken one by one. With `PREFETCH`, block `b` fetches the next tile's cells of
/// that block (`pos.next`).
///
/// # Safety
/// As `position_tile`'s, and the layout above holds.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
pub unsafe fn cell_tile<
    const NV: usize,
    const R: usize,
    const BLOCKED: bool,
    const PREFETCH: bool,
>(
    kc: usize,
    w: *const f32,
    img: *const f32,
    offsets: *const usize,
    pos: &TilePositions,
    c: *mut f32,
    strides: (usize, usize),
    live: (usize, usize),
    accumulate: bool,
    bias: Option<&[f32]>,
    finish: Option<super::position_tile::TileFinish>,
) {
    let (next, ahead, ahead_lines, first) = (pos.next, pos.ahead, pos.ahead_lines, pos.now[0]);
    let out = TileOut {
        c,
        strides,
        live,
        accumulate,
        finish,
    };
    // SAFETY: every read stays inside the operands (caller's contract).
    unsafe {
        tile_with::<NV, R, BLOCKED>(bias, &out, |acc| {
            let step = |acc: &mut Acc<NV, R>, cell: *const f32, p: usize| {
                let wp = w.add(p * NV * 16);
                let wv: [__m512; NV] = std::array::from_fn(|v| _mm512_loadu_ps(wp.add(v * 16)));
                for i in 0..R {
                    let x = _mm512_set1_ps(*cell.add(CELL * i));
                    for v in 0..NV {
                        acc[v][i] = _mm512_fmadd_ps(x, wv[v], acc[v][i]);
                    }
                }
            };
            let blocks = kc / CELL;
            // The weights ahead spread over the blocks: a burst at the tile's start would wait
            // for the memory all at once.
            let per = ahead_lines.div_ceil(blocks.max(1));
            let mut line = 0;
            for b in 0..blocks {
                let p0 = b * CELL;
                let at = *offsets.add(p0);
                let base = img.add(at + first);
                for _ in 0..per.min(ahead_lines - line) {
                    _mm_prefetch::<_MM_HINT_T1>(ahead.wrapping_add(line * 16).cast::<i8>());
                    line += 1;
                }
                for j in 0..CELL {
                    // One cell of the next tile every other row: 8 over the block's 16.
                    if PREFETCH && j % 2 == 0 {
                        let cell = img.wrapping_add(at + next[j / 2]);
                        _mm_prefetch::<_MM_HINT_T0>(cell.cast::<i8>());
                    }
                    step(acc, base.add(j), p0 + j);
                }
            }
            for p in blocks * CELL..kc {
                step(acc, img.add(*offsets.add(p) + first), p);
            }
            for l in line..ahead_lines {
                _mm_prefetch::<_MM_HINT_T1>(ahead.wrapping_add(l * 16).cast::<i8>());
            }
        });
    }
}

/// The cell tiles' instances.
#[cfg(target_arch = "x86_64")]
struct Cells;

#[cfg(target_arch = "x86_64")]
impl Avx512Tiles for Cells {
    fn instance<const NV: usize, const R: usize, const BLOCKED: bool, const PREFETCH: bool>()
    -> PositionTile {
        cell_tile::<NV, R, BLOCKED, PREFETCH>
    }
}

/// The cell tile of `vectors` (1 to 4) vectors of channels and `rows` positions, in blocks of
/// 16 channels or channel rows (`blocked`), prefetching the next tile's cells when `prefetch`.
#[cfg(target_arch = "x86_64")]
pub fn kernel_for(vectors: usize, rows: usize, blocked: bool, prefetch: bool) -> PositionTile {
    match vectors {
        4 => avx512_kernel::<Cells, 4>(rows, blocked, prefetch),
        3 => avx512_kernel::<Cells, 3>(rows, blocked, prefetch),
        2 => avx512_kernel::<Cells, 2>(rows, blocked, prefetch),
        1 => avx512_kernel::<Cells, 1>(rows, blocked, prefetch),
        v => unreachable!("cell tiles of {v} vectors"),
    }
}

/// Off x86-64 no instruction set has cell tiles.
#[cfg(not(target_arch = "x86_64"))]
pub fn kernel_for(_: usize, _: usize, _: bool, _: bool) -> super::position_tile::PositionTile {
    unreachable!("no cell tiles off x86-64")
}
