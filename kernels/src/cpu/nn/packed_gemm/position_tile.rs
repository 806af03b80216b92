//! Position tiles (a transposed micro-tile: output positions broadcast, output channels in
//! the vectors), one kernel per instruction set; the strips of `cell_strip.rs` run them
//! (their last, partly filled tile) and share their stores.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use crate::cpu::nn::epilogue::Activation;
use crate::cpu::nn::epilogue_simd::finish_f32;
#[cfg(target_arch = "x86_64")]
use crate::cpu::transpose_block::transpose8;

/// Positions per AVX2 tile.
pub const AVX2_HEIGHT: usize = 6;

/// The most output positions per tile of [`position_tile`] (one ymm of a channel's outputs).
pub const POSITIONS: usize = 8;

/// A tile's output positions (each window's start in the image, as offsets) and the next
/// tile's, whose cells the prefetching instances of [`position_tile`] fetch row by row; and
/// the weights to fetch into L2 meanwhile (the AVX-512 tiles spread them over their depth).
#[derive(Debug, Clone, Copy)]
pub struct TilePositions {
    /// This tile's positions.
    pub now: [usize; POSITIONS],
    /// The next tile's (this tile's again where there is none).
    pub next: [usize; POSITIONS],
    /// The first of `ahead_lines` cache lines (16 floats each) of weights to prefetch.
    pub ahead: *const f32,
    /// How many lines from `ahead` to prefetch (none when 0).
    pub ahead_lines: usize,
    /// A strip's tiles' positions, [`POSITIONS`] per tile (the cell strips of positions that
    /// are not adjacent cells); null elsewhere.
    pub table: *const usize,
}

impl Default for TilePositions {
    fn default() -> Self {
        TilePositions {
            now: [0; POSITIONS],
            next: [0; POSITIONS],
            ahead: std::ptr::null(),
            ahead_lines: 0,
            table: std::ptr::null(),
        }
    }
}

/// The signature of [`position_tile`]'s instances.
pub type PositionTile = unsafe fn(
    usize,
    *const f32,
    *const f32,
    *const usize,
    &TilePositions,
    *mut f32,
    (usize, usize),
    (usize, usize),
    bool,
    Option<&[f32]>,
    Option<TileFinish>,
);

/// What a tile does to its outputs as it stores its last depth block, in registers (a
/// separate pass over the outputs cost 2–3 % of a convolution): `clamp(v + z, lo, hi)` — the
/// fused-convolution epilogue of the clamp activations (none, `Relu`, `Clip`), with the same
/// operations in the same order, so the results are the same bit for bit.
#[derive(Debug, Clone, Copy)]
pub struct TileFinish {
    /// The values added (a residual), at the same offsets from it as the outputs from `c`;
    /// null when nothing is added.
    pub z: *const f32,
    /// The clamp's bounds (`max(lo, v)` then `min(hi, v)`, `v` second: NaN stays NaN).
    pub lo: f32,
    /// See `lo`.
    pub hi: f32,
}

impl TileFinish {
    /// The finish of the outputs `by` floats further on (`z` moves with them; null stays
    /// null).
    pub(super) fn shifted(self, by: usize) -> TileFinish {
        match self.z.is_null() {
            true => self,
            false => TileFinish {
                z: self.z.wrapping_add(by),
                ..self
            },
        }
    }

    /// Finishes the `rows × cols` outputs at `c` (row stride `ldc`) where they are, through
    /// the separate pass's vectorized clamp (the same operations as [`finish_block`]).
    ///
    /// # Safety
    /// `c`, and `z` when not null, are valid for those outputs.
    pub(super) unsafe fn apply_in_place(self, c: *mut f32, ldc: usize, rows: usize, cols: usize) {
        let clamp = Activation::Clip(self.lo, self.hi);
        for i in 0..rows {
            // SAFETY: the caller's contract.
            let (row, add) = unsafe {
                let add = (!self.z.is_null())
                    .then(|| std::slice::from_raw_parts(self.z.add(i * ldc), cols));
                (std::slice::from_raw_parts_mut(c.add(i * ldc), cols), add)
            };
            // Tiles finish only on AVX-512, where the vectorized clamp always runs.
            assert!(
                finish_f32(row, add, clamp),
                "tile finish without a vectorized clamp"
            );
        }
    }
}

/// One position tile (a transposed micro-tile: output positions broadcast, output channels
/// in the vectors): for channels `j < NV·16` and positions `i < R`,
/// `C[j, i] (+)= Σ_p w[p·NV·16 + j] · img[offsets[p] + pos[i]]`, started from `bias[j]` when
/// given (`pos.now[i]` is position `i`; with `PREFETCH`, depth row `p` prefetches the cell of
/// the next tile's position `p mod 8`; and `pos.ahead_lines` lines from `pos.ahead` go to L2,
/// spread over the depth). Writes channels `0..live_ch` × positions `0..live_pos`
/// of `c`: channel rows at
/// stride `ldc`, positions contiguous, transposing the tile in registers; or, when `BLOCKED`,
/// each position's 16 channels as one vector, the tile's vectors of channels `ldc` apart and
/// its positions `step` apart (each accumulator stored as it is, `live_ch` a multiple of 16):
/// NCHW16c blocks (`ldc` a block, `step` 16), or each position's channels contiguous
/// (`ldc` 16, `step` a position's row: a token-major matrix product).
///
/// # Safety
/// The CPU supports AVX-512F; `R ≤ 8`; `w` holds `kc · NV · 16` floats; `offsets` holds `kc`
/// entries and `img + offsets[p] + pos[i]` is valid for every `p < kc`, `i < R`; `c` is valid
/// for `live_ch` rows × `live_pos ≤ R` columns at stride `ldc`, with `live_ch ≤ NV · 16`;
/// `bias`, when given, holds `NV · 16` values; `finish.z`, when not null, is valid where `c`
/// is, at the same offsets.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn position_tile<
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
    (ldc, step): (usize, usize),
    (live_ch, live_pos): (usize, usize),
    accumulate: bool,
    bias: Option<&[f32]>,
    finish: Option<TileFinish>,
) {
    let (next, ahead, ahead_lines, pos) = (pos.next, pos.ahead, pos.ahead_lines, pos.now);
    let out = TileOut {
        c,
        strides: (ldc, step),
        live: (live_ch, live_pos),
        accumulate,
        finish,
    };
    // SAFETY: every read stays inside the operands (caller's contract).
    unsafe {
        tile_with::<NV, R, BLOCKED>(bias, &out, |acc| {
            // The depth in segments, each starting with a few of the lines ahead: a burst of
            // them at the tile's start would wait for the memory all at once.
            let segments = kc.min(ahead_lines).max(1);
            let (segment, per) = (kc.div_ceil(segments), ahead_lines.div_ceil(segments));
            let mut line = 0;
            for p0 in (0..kc).step_by(segment) {
                for _ in 0..per.min(ahead_lines - line) {
                    _mm_prefetch::<_MM_HINT_T1>(ahead.wrapping_add(line * 16).cast::<i8>());
                    line += 1;
                }
                for p in p0..(p0 + segment).min(kc) {
                    let base = img.add(*offsets.add(p));
                    if PREFETCH {
                        _mm_prefetch::<_MM_HINT_T0>(
                            base.wrapping_add(next[p % POSITIONS]).cast::<i8>(),
                        );
                    }
                    let wp = w.add(p * NV * 16);
                    let wv: [__m512; NV] = std::array::from_fn(|v| _mm512_loadu_ps(wp.add(v * 16)));
                    for i in 0..R {
                        let x = _mm512_set1_ps(*base.add(pos[i]));
                        for v in 0..NV {
                            acc[v][i] = _mm512_fmadd_ps(x, wv[v], acc[v][i]);
                        }
                    }
                }
            }
        });
    }
}

/// An AVX-512 tile's accumulators: `acc[v][i]` holds channels `v·16..` at position `i` of
/// `H`. Exactly the tile's: with room for 8 positions, tiles of 4 × 6 kept them on the stack.
#[cfg(target_arch = "x86_64")]
pub(super) type Acc<const NV: usize, const H: usize> = [[__m512; H]; NV];

/// Where and how an AVX-512 tile writes its outputs (see [`position_tile`]): `c`, the
/// strides `(ldc, step)`, the live `(channels, positions)`, whether to add to what is there,
/// and the finish.
#[cfg(target_arch = "x86_64")]
#[derive(Debug, Clone, Copy)]
pub(super) struct TileOut {
    pub(super) c: *mut f32,
    pub(super) strides: (usize, usize),
    pub(super) live: (usize, usize),
    pub(super) accumulate: bool,
    pub(super) finish: Option<TileFinish>,
}

/// One AVX-512 tile: its accumulators start from `bias`'s `NV` vectors of channels at every
/// position (or zeros), take `depth`'s multiply-adds, and are written to `out` as
/// [`position_tile`] describes: channels × positions, as blocks of 16 channels when
/// `BLOCKED`, else transposed to channel rows; added to what is there when `accumulate`,
/// then finished. Each kernel's instance must be inlined into it, so it is
/// `#[inline(always)]`, which Rust allows only without `#[target_feature]`: its caller's
/// AVX-512 reaches it as it is inlined. Left to the optimizer, it was inlined in one build
/// and not in the next, after an unrelated change: then the depth loop ran inside it, behind
/// a closure, and NASNet's 1×1 convolutions took 11 % longer; a store shared by the kernels,
/// called, had made inception_v3's stem 5–7 % slower.
///
/// # Safety
/// As [`position_tile`]'s for `bias`, `out.c` and `out.finish`; `depth`'s own reads are
/// its caller's to keep inside the operands; the CPU has AVX-512F, and the caller enables
/// it (`#[target_feature]`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::needless_range_loop)]
pub(super) unsafe fn tile_with<const NV: usize, const H: usize, const BLOCKED: bool>(
    bias: Option<&[f32]>,
    out: &TileOut,
    depth: impl FnOnce(&mut Acc<NV, H>),
) {
    // SAFETY: the caller's contract (AVX-512F).
    let start: [__m512; NV] = std::array::from_fn(|v| match bias {
        // SAFETY: the caller's contract: `b` holds NV · 16 values.
        Some(b) => unsafe { _mm512_loadu_ps(b.as_ptr().add(v * 16)) },
        None => unsafe { _mm512_setzero_ps() },
    });
    let mut acc: Acc<NV, H> = std::array::from_fn(|v| [start[v]; H]);
    depth(&mut acc);
    let TileOut {
        c,
        strides: (ldc, step),
        live: (live_ch, live_pos),
        accumulate,
        finish,
    } = *out;
    // SAFETY: the caller's contract.
    unsafe {
        // Lanes past `live_pos` are neither read nor written.
        let live = _mm256_cmpgt_epi32(
            _mm256_set1_epi32(live_pos as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        );
        if BLOCKED && live_pos == H && live_ch >= NV * 16 {
            match (accumulate, finish) {
                (false, None) => store_full::<NV, H, false, false>(&acc, c, ldc, step, None),
                (false, Some(f)) if f.z.is_null() => {
                    store_full::<NV, H, false, false>(&acc, c, ldc, step, Some(f))
                }
                (false, Some(f)) => store_full::<NV, H, false, true>(&acc, c, ldc, step, Some(f)),
                (true, f) => store_full::<NV, H, true, true>(&acc, c, ldc, step, f),
            }
            return;
        }
        if BLOCKED {
            // Constant bounds with the live ones as conditions: the loops unroll and the
            // accumulators stay in registers (through `take`, they went to the stack first,
            // a third of a 16-deep tile's time).
            for v in 0..NV {
                for i in 0..H {
                    if v * 16 >= live_ch || i >= live_pos {
                        continue;
                    }
                    let at = v * ldc + i * step;
                    let dst = c.add(at);
                    let mut out = acc[v][i];
                    if accumulate {
                        out = _mm512_add_ps(out, _mm512_loadu_ps(dst));
                    }
                    if let Some(f) = finish {
                        out = finish_block(out, f, at);
                    }
                    _mm512_storeu_ps(dst, out);
                }
            }
            return;
        }
        for (v, row) in acc.iter().enumerate() {
            for half in 0..2 {
                let first = v * 16 + half * 8;
                if first >= live_ch {
                    break;
                }
                // A loop, not `map`: a closure here would not get the caller's AVX-512.
                let mut lanes = [_mm256_setzero_ps(); POSITIONS];
                for (lane, &z) in lanes.iter_mut().zip(row) {
                    *lane = match half {
                        0 => _mm512_castps512_ps256(z),
                        _ => _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(z))),
                    };
                }
                let channels = transpose8(lanes);
                let full = live_pos == POSITIONS;
                for (j, &out) in channels.iter().enumerate().take(live_ch - first) {
                    let row = (first + j) * ldc;
                    let dst = c.add(row);
                    let mut out = out;
                    if accumulate {
                        out = _mm256_add_ps(out, load_live(dst, full, live));
                    }
                    if let Some(f) = finish {
                        out = finish_lanes(out, f, row, full, live);
                    }
                    match full {
                        true => _mm256_storeu_ps(dst, out),
                        false => _mm256_maskstore_ps(dst, live, out),
                    }
                }
            }
        }
    }
}

/// [`tile_with`]'s blocked store of a tile whose positions and channels are all live, its
/// choices (`ACCUMULATE`, and `ADD`: whether `finish` adds a residual) made once per tile, as
/// the AVX2 tiles' `store_full`.
///
/// # Safety
/// As [`tile_with`]'s; `finish.z` is null unless `ADD`; the caller enables AVX-512F.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store_full<const NV: usize, const H: usize, const ACCUMULATE: bool, const ADD: bool>(
    acc: &Acc<NV, H>,
    c: *mut f32,
    ldc: usize,
    step: usize,
    finish: Option<TileFinish>,
) {
    // SAFETY: the caller enables AVX-512F.
    let clamp = finish.map(|f| unsafe { (_mm512_set1_ps(f.lo), _mm512_set1_ps(f.hi)) });
    let z = finish.map_or(std::ptr::null(), |f| f.z);
    for (v, row) in acc.iter().enumerate() {
        for (i, &out) in row.iter().enumerate() {
            let at = v * ldc + i * step;
            // SAFETY: the caller's contract: every position and channel is live.
            unsafe {
                let dst = c.add(at);
                let mut out = out;
                if ACCUMULATE {
                    out = _mm512_add_ps(out, _mm512_loadu_ps(dst));
                }
                if ADD && !z.is_null() {
                    out = _mm512_add_ps(out, _mm512_loadu_ps(z.add(at)));
                }
                if let Some((lo, hi)) = clamp {
                    // As `finish_block`: `v` second, so NaN stays NaN.
                    out = _mm512_min_ps(hi, _mm512_max_ps(lo, out));
                }
                _mm512_storeu_ps(dst, out);
            }
        }
    }
}

/// The 8 floats at `at`, or only the lanes of `live` (the others zero) when not `full`.
///
/// # Safety
/// `at` is valid for 8 floats, or for the lanes of `live`; the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn load_live(at: *const f32, full: bool, live: __m256i) -> __m256 {
    // SAFETY: the caller's contract.
    unsafe {
        match full {
            true => _mm256_loadu_ps(at),
            false => _mm256_maskload_ps(at, live),
        }
    }
}

/// `clamp(out + z[row..], lo, hi)` for one row of 8 outputs, `row` floats from the tile's
/// `c` (see [`TileFinish`]).
///
/// # Safety
/// `f.z`, when not null, is valid at `row` for 8 floats, or for the lanes of `live` when not
/// `full`; the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn finish_lanes(
    out: __m256,
    f: TileFinish,
    row: usize,
    full: bool,
    live: __m256i,
) -> __m256 {
    // SAFETY: the caller's contract.
    let out = match f.z.is_null() {
        true => out,
        false => unsafe { _mm256_add_ps(out, load_live(f.z.add(row), full, live)) },
    };
    // `v` second: x86 returns it when either is NaN or both are zeros.
    _mm256_min_ps(
        _mm256_set1_ps(f.hi),
        _mm256_max_ps(_mm256_set1_ps(f.lo), out),
    )
}

/// [`finish_lanes`] for one vector of 16 channels at `at` floats from the tile's `c`.
///
/// # Safety
/// `f.z`, when not null, is valid at `at` for 16 floats; the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn finish_block(out: __m512, f: TileFinish, at: usize) -> __m512 {
    // SAFETY: the caller's contract.
    let out = match f.z.is_null() {
        true => out,
        false => unsafe { _mm512_add_ps(out, _mm512_loadu_ps(f.z.add(at))) },
    };
    _mm512_min_ps(
        _mm512_set1_ps(f.hi),
        _mm512_max_ps(_mm512_set1_ps(f.lo), out),
    )
}

/// A family of AVX-512 tile kernels with one instance per tile shape: [`position_tile`]'s, or
/// the cell tiles'.
#[cfg(target_arch = "x86_64")]
pub(super) trait Avx512Tiles {
    /// The instance for `NV` vectors of channels × `R` positions.
    fn instance<const NV: usize, const R: usize, const BLOCKED: bool, const PREFETCH: bool>()
    -> PositionTile;
}

/// [`position_tile`]'s instances.
#[cfg(target_arch = "x86_64")]
pub(super) struct Positions;

#[cfg(target_arch = "x86_64")]
impl Avx512Tiles for Positions {
    fn instance<const NV: usize, const R: usize, const BLOCKED: bool, const PREFETCH: bool>()
    -> PositionTile {
        position_tile::<NV, R, BLOCKED, PREFETCH>
    }
}

/// The AVX-512 kernel of family `T` for `NV` vectors of channels, `rows` positions, blocks or
/// channel rows (`blocked`), prefetching the next tile's cells when `prefetch`.
#[cfg(target_arch = "x86_64")]
pub(super) fn avx512_kernel<T: Avx512Tiles, const NV: usize>(
    rows: usize,
    blocked: bool,
    prefetch: bool,
) -> PositionTile {
    match (blocked, prefetch) {
        (false, false) => avx512_rows::<T, NV, false, false>(rows),
        (true, false) => avx512_rows::<T, NV, true, false>(rows),
        (false, true) => avx512_rows::<T, NV, false, true>(rows),
        (true, true) => avx512_rows::<T, NV, true, true>(rows),
    }
}

/// The AVX-512 tile of family `T` for `NV` vectors of channels × `rows` positions (at most
/// [`POSITIONS`]).
#[cfg(target_arch = "x86_64")]
fn avx512_rows<T: Avx512Tiles, const NV: usize, const BLOCKED: bool, const PREFETCH: bool>(
    rows: usize,
) -> PositionTile {
    match rows {
        1 => T::instance::<NV, 1, BLOCKED, PREFETCH>(),
        2 => T::instance::<NV, 2, BLOCKED, PREFETCH>(),
        3 => T::instance::<NV, 3, BLOCKED, PREFETCH>(),
        4 => T::instance::<NV, 4, BLOCKED, PREFETCH>(),
        5 => T::instance::<NV, 5, BLOCKED, PREFETCH>(),
        6 => T::instance::<NV, 6, BLOCKED, PREFETCH>(),
        7 => T::instance::<NV, 7, BLOCKED, PREFETCH>(),
        _ => T::instance::<NV, 8, BLOCKED, PREFETCH>(),
    }
}
