//! The AVX2 position tile (6 positions × 16 channels, or × 8 for a last panel) and its
//! store: [`position_tile`](super::position_tile::position_tile)'s computation in ymm
//! registers.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
use super::position_tile::{POSITIONS, TileFinish, TileOut, TilePositions, finish_lanes};
#[cfg(target_arch = "x86_64")]
use crate::cpu::transpose_block::transpose8;

/// [`position_tile`](super::position_tile::position_tile) on AVX2 + FMA: `NV` vectors of 8 channels × `R ≤ 8` positions (`NV · R ≤
/// 12`: with the weights and the broadcast, every register but one), the weights `w` in rows
/// of `NV · 8` channels; the same contract otherwise, with AVX2 + FMA for AVX-512F. When
/// `BLOCKED`, vector `v` of position `i` is stored at `(v / 2)·ldc + (v % 2)·8 + i·step`: a
/// panel of two vectors is one block of 16 channels; a panel of one vector (the last, of at
/// most 8 channels) is a block whose other 8 lanes are padding, and those are written as zeros.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn position_tile_avx2<
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
    let (next, pos) = (pos.next, pos.now);
    let mut acc = [[_mm256_setzero_ps(); R]; NV];
    // SAFETY: every read stays inside the operands (caller's contract).
    unsafe {
        if let Some(bias) = bias {
            for (v, row) in acc.iter_mut().enumerate() {
                *row = [_mm256_loadu_ps(bias.as_ptr().add(v * 8)); R];
            }
        }
        for p in 0..kc {
            let base = img.add(*offsets.add(p));
            if PREFETCH {
                _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(next[p % POSITIONS]).cast::<i8>());
            }
            let wp = w.add(p * NV * 8);
            let wv: [__m256; NV] = std::array::from_fn(|v| _mm256_loadu_ps(wp.add(v * 8)));
            for i in 0..R {
                let x = _mm256_broadcast_ss(&*base.add(pos[i]));
                for v in 0..NV {
                    acc[v][i] = _mm256_fmadd_ps(x, wv[v], acc[v][i]);
                }
            }
        }
        let out = TileOut {
            c,
            strides: (ldc, step),
            live: (live_ch, live_pos),
            accumulate,
            finish,
        };
        store_avx2::<NV, R, BLOCKED>(&acc, &out);
    }
}

/// Writes an AVX2 tile's accumulators (`acc[v][i]`: channels `v·8..` at position `i`) to
/// `out` as [`position_tile_avx2`] describes. `#[inline(always)]` for the same reason as
/// [`tile_with`](super::position_tile::tile_with): each kernel's instance must take it inline, with its caller's AVX2.
///
/// # Safety
/// As [`position_tile_avx2`]'s for `out`; the CPU has AVX2 and FMA, and the caller enables
/// them (`#[target_feature]`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn store_avx2<const NV: usize, const R: usize, const BLOCKED: bool>(
    acc: &[[__m256; R]; NV],
    out: &TileOut,
) {
    let TileOut {
        c,
        strides: (ldc, step),
        live: (live_ch, live_pos),
        accumulate,
        finish,
    } = *out;
    // SAFETY: the caller's contract.
    unsafe {
        if BLOCKED && live_pos == R && live_ch >= NV * 8 {
            match (accumulate, finish) {
                (false, None) => store_full::<NV, R, false, false>(acc, c, ldc, step, None),
                (false, Some(f)) if f.z.is_null() => {
                    store_full::<NV, R, false, false>(acc, c, ldc, step, Some(f))
                }
                (false, Some(f)) => store_full::<NV, R, false, true>(acc, c, ldc, step, Some(f)),
                (true, f) => store_full::<NV, R, true, true>(acc, c, ldc, step, f),
            }
            return;
        }
        if BLOCKED {
            for (v, row) in acc.iter().enumerate().take(live_ch.div_ceil(8)) {
                for (i, &out) in row.iter().enumerate().take(live_pos) {
                    let at = (v / 2) * ldc + (v % 2) * 8 + i * step;
                    let dst = c.add(at);
                    let mut out = out;
                    if accumulate {
                        out = _mm256_add_ps(out, _mm256_loadu_ps(dst));
                    }
                    if let Some(f) = finish {
                        out = finish_lanes(out, f, at, true, _mm256_setzero_si256());
                    }
                    _mm256_storeu_ps(dst, out);
                    if NV == 1 {
                        _mm256_storeu_ps(dst.add(8), _mm256_setzero_ps());
                    }
                }
            }
            return;
        }
        for (v, row) in acc.iter().enumerate() {
            let first = v * 8;
            if first >= live_ch {
                break;
            }
            let lanes = std::array::from_fn(|i| match i < R {
                true => row[i],
                false => _mm256_setzero_ps(),
            });
            let channels = transpose8(lanes);
            let live = _mm256_cmpgt_epi32(
                _mm256_set1_epi32(live_pos as i32),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            );
            for (j, &out) in channels.iter().enumerate().take(live_ch - first) {
                let row = (first + j) * ldc;
                let Some(f) = finish else {
                    store_first(c.add(row), out, live_pos, accumulate);
                    continue;
                };
                // Masked loads (not stores) are fast everywhere.
                let mut out = out;
                if accumulate {
                    out = _mm256_add_ps(out, _mm256_maskload_ps(c.add(row), live));
                }
                out = finish_lanes(out, f, row, false, live);
                store_first(c.add(row), out, live_pos, false);
            }
        }
    }
}

/// [`store_avx2`]'s blocked store of a tile whose positions and channels are all live, its
/// choices (`ACCUMULATE`, and `ADD`: whether `finish` adds a residual) made once per tile, not
/// once per vector: with them read per vector, the checks took a seventh of the 1×1
/// convolutions of 16 channels (`conv_rate`, Zen 3).
///
/// # Safety
/// As [`store_avx2`]'s; `finish.z` is null unless `ADD`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store_full<const NV: usize, const R: usize, const ACCUMULATE: bool, const ADD: bool>(
    acc: &[[__m256; R]; NV],
    c: *mut f32,
    ldc: usize,
    step: usize,
    finish: Option<TileFinish>,
) {
    // SAFETY: the caller enables AVX2.
    let clamp = finish.map(|f| unsafe { (_mm256_set1_ps(f.lo), _mm256_set1_ps(f.hi)) });
    let z = finish.map_or(std::ptr::null(), |f| f.z);
    for (v, row) in acc.iter().enumerate() {
        for (i, &out) in row.iter().enumerate() {
            let at = (v / 2) * ldc + (v % 2) * 8 + i * step;
            // SAFETY: the caller's contract: every position and channel is live.
            unsafe {
                let dst = c.add(at);
                let mut out = out;
                if ACCUMULATE {
                    out = _mm256_add_ps(out, _mm256_loadu_ps(dst));
                }
                if ADD && !z.is_null() {
                    out = _mm256_add_ps(out, _mm256_loadu_ps(z.add(at)));
                }
                if let Some((lo, hi)) = clamp {
                    // As `finish_lanes`: `v` second, so NaN stays NaN.
                    out = _mm256_min_ps(hi, _mm256_max_ps(lo, out));
                }
                _mm256_storeu_ps(dst, out);
                if NV == 1 {
                    _mm256_storeu_ps(dst.add(8), _mm256_setzero_ps());
                }
            }
        }
    }
}

/// Writes (or adds, when `accumulate`) the first `n ≤ 8` lanes of `v` to `dst`, without masked
/// stores (slow on AMD Zen): six lanes (a full AVX2 position tile) as four and two.
///
/// # Safety
/// `dst` is valid for `n` floats; the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn store_first(dst: *mut f32, v: __m256, n: usize, accumulate: bool) {
    // SAFETY: every access is to the first `n` floats of `dst` (caller's contract).
    unsafe {
        if n == 6 {
            let (mut lo, mut hi) = (_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            // Lanes 4 and 5 as one unaligned 64-bit load and store.
            let tail = dst.add(4).cast::<__m128i>();
            if accumulate {
                lo = _mm_add_ps(lo, _mm_loadu_ps(dst));
                hi = _mm_add_ps(hi, _mm_castsi128_ps(_mm_loadl_epi64(tail)));
            }
            _mm_storeu_ps(dst, lo);
            _mm_storel_epi64(tail, _mm_castps_si128(hi));
            return;
        }
        let mut lanes = [0.0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), v);
        for (i, &x) in lanes.iter().enumerate().take(n) {
            let d = dst.add(i);
            *d = if accumulate { *d + x } else { x };
        }
    }
}
