//! The register-blocked micro-kernels: `C[MR×NR] (+)= A_panel · B_rows` over `kc` steps, with
//! `A_panel[p·MR + i]` and row `p` of `B` at `b + rows.at(p)` ([`BRows`]: a packed panel, or
//! rows of a padded image read in place). One per instruction set; the tile shape is the
//! instruction set's ([`Isa::tile`]).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The vector instruction set the packed GEMM runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512F: [`AVX512_MR`] × 32 tiles, two zmm accumulators per row.
    Avx512,
    /// AVX2 + FMA: 6 × 16 tiles, 12 ymm accumulators.
    Avx2,
}

impl Isa {
    /// The instruction set the packed GEMM uses on this CPU: the best it has, or the one
    /// `SPILLWAY_GEMM` names (`avx512`, `avx2`, or `generic` for none: every product then goes
    /// to the generic matrix core), when the CPU has it. Read once per process.
    pub fn detect() -> Option<Isa> {
        static CHOSEN: std::sync::OnceLock<Option<Isa>> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            let supported = Isa::supported();
            match std::env::var("SPILLWAY_GEMM").ok().as_deref() {
                Some("generic") => None,
                Some("avx2") => supported.into_iter().find(|&i| i == Isa::Avx2),
                _ => supported.first().copied(),
            }
        })
    }

    /// The instruction sets of ours this CPU has, best first.
    pub fn supported() -> Vec<Isa> {
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") {
                out.push(Isa::Avx512);
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                out.push(Isa::Avx2);
            }
        }
        out
    }

    /// `(MR, NR)`: rows of A and columns of B per micro-tile.
    pub fn tile(self) -> (usize, usize) {
        match self {
            Isa::Avx512 => (AVX512_MR, 32),
            Isa::Avx2 => (6, 16),
        }
    }
}

/// Where row `p` of a micro-tile's `B` starts, relative to the tile's `b` pointer.
pub trait BRows: Copy {
    /// The offset of row `p`, in floats.
    ///
    /// # Safety
    /// `p` is below the tile's `kc` (an [`Offsets`] table holds that many entries).
    unsafe fn at(self, p: usize) -> usize;
}

/// A packed panel: row `p` at `p · stride`.
#[derive(Debug, Clone, Copy)]
pub struct Panel(pub usize);

impl BRows for Panel {
    #[inline(always)]
    unsafe fn at(self, p: usize) -> usize {
        p * self.0
    }
}

/// Rows anywhere: row `p` at `table[p]` (a padded image's im2col rows, read in place).
#[derive(Debug, Clone, Copy)]
pub struct Offsets(pub *const usize);

impl BRows for Offsets {
    #[inline(always)]
    unsafe fn at(self, p: usize) -> usize {
        // SAFETY: p < kc, the table's length (caller's contract).
        unsafe { *self.0.add(p) }
    }
}

/// Asks for the `kc` rows of a `B` tile (`nr` floats each, row `p` at `b + rows.at(p)`) to be
/// brought into L2. Rows read in place (a tile's rows are hundreds of separate streams, too
/// many for the hardware prefetchers) are fetched a tile ahead of use this way.
///
/// # Safety
/// `rows.at(p)` is defined for every `p < kc` (the addresses themselves are only hints and
/// may lie anywhere).
#[inline]
pub unsafe fn prefetch_rows<R: BRows>(b: *const f32, rows: R, kc: usize, nr: usize) {
    #[cfg(target_arch = "x86_64")]
    for p in 0..kc {
        // SAFETY: the caller's contract for `at`; prefetching never faults.
        unsafe {
            let row = b.wrapping_add(rows.at(p));
            _mm_prefetch::<_MM_HINT_T1>(row.cast());
            _mm_prefetch::<_MM_HINT_T1>(row.wrapping_add(nr - 1).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (b, rows, kc, nr);
}

/// Rows of an AVX-512 micro-tile.
const AVX512_MR: usize = 8;

/// One micro-tile. Writes the `mr × nr` top-left corner of the tile to `c` (row stride
/// `ldc`), adding to what is there when `accumulate`; row `i` starts from `row_init[i]`
/// (a bias) instead of zero when given.
///
/// # Safety
/// The CPU supports `isa`; `a` holds `kc · MR` floats and `b + rows.at(p)` is valid for `NR`
/// floats for every `p < kc`; `c` is valid for
/// rows `0..mr` × columns `0..nr` at row stride `ldc`, with `mr ≤ MR`, `nr ≤ NR`;
/// `row_init`, when given, holds at least `MR` values.
#[allow(clippy::too_many_arguments)]
pub unsafe fn tile<R: BRows>(
    isa: Isa,
    kc: usize,
    a: *const f32,
    b: *const f32,
    rows: R,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
    row_init: Option<&[f32]>,
) {
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (kc, a, b, rows, c, ldc, mr, nr, accumulate, row_init);
        unreachable!("Isa::detect never returns {isa:?} off x86-64");
    }
    // SAFETY: forwarded from the caller's contract.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        match isa {
            // A narrow tile (the last columns of B) runs on narrower kernels, so that the
            // zero padding of its panel costs fewer multiply-adds: ≤ 8 columns on one ymm
            // per row, ≤ 16 on one zmm, ≤ 24 as 16 + 8; wider ones on the full kernel.
            Isa::Avx512 if nr <= 8 => {
                tile_avx512_w8(kc, a, b, rows, c, ldc, mr, nr, accumulate, row_init)
            }
            Isa::Avx512 if nr <= 16 => {
                tile_avx512_w16(kc, a, b, rows, c, ldc, mr, nr, accumulate, row_init)
            }
            Isa::Avx512 if nr <= 24 => {
                tile_avx512_w16(kc, a, b, rows, c, ldc, mr, 16, accumulate, row_init);
                let (b, c) = (b.add(16), c.add(16));
                tile_avx512_w8(kc, a, b, rows, c, ldc, mr, nr - 16, accumulate, row_init)
            }
            Isa::Avx512 => tile_avx512(kc, a, b, rows, c, ldc, mr, nr, accumulate, row_init),
            Isa::Avx2 => tile_avx2(kc, a, b, rows, c, ldc, mr, nr, accumulate, row_init),
        }
    }
}

/// Writes a finished `MR × NR` register tile (already stored to `acc`, row-major) into `c`.
///
/// # Safety
/// As [`tile`].
#[inline(always)]
unsafe fn write_back<const NR: usize>(
    acc: &[f32],
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
) {
    for i in 0..mr {
        // SAFETY: row i < mr and columns < nr lie inside the caller's C.
        let row = unsafe { std::slice::from_raw_parts_mut(c.add(i * ldc), nr) };
        let src = &acc[i * NR..i * NR + nr];
        if accumulate {
            row.iter_mut().zip(src).for_each(|(d, s)| *d += s);
        } else {
            row.copy_from_slice(src);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_avx512<R: BRows>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    rows: R,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
    row_init: Option<&[f32]>,
) {
    const MR: usize = AVX512_MR;
    const NR: usize = 32;
    let mut r0 = [_mm512_setzero_ps(); MR];
    let mut r1 = [_mm512_setzero_ps(); MR];
    if let Some(init) = row_init {
        for i in 0..MR {
            r0[i] = _mm512_set1_ps(init[i]);
            r1[i] = r0[i];
        }
    }
    // SAFETY: p < kc, so every read stays inside B's rows (caller's contract).
    unsafe {
        for p in 0..kc {
            let bp = b.add(rows.at(p));
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.add(16));
            let ap = a.add(p * MR);
            for i in 0..MR {
                let ai = _mm512_set1_ps(*ap.add(i));
                r0[i] = _mm512_fmadd_ps(ai, b0, r0[i]);
                r1[i] = _mm512_fmadd_ps(ai, b1, r1[i]);
            }
        }
        if mr == MR && nr == NR {
            for i in 0..MR {
                let row = c.add(i * ldc);
                let (mut v0, mut v1) = (r0[i], r1[i]);
                if accumulate {
                    v0 = _mm512_add_ps(v0, _mm512_loadu_ps(row));
                    v1 = _mm512_add_ps(v1, _mm512_loadu_ps(row.add(16)));
                }
                _mm512_storeu_ps(row, v0);
                _mm512_storeu_ps(row.add(16), v1);
            }
            return;
        }
        let mut acc = [0.0f32; MR * NR];
        for i in 0..MR {
            _mm512_storeu_ps(acc.as_mut_ptr().add(i * NR), r0[i]);
            _mm512_storeu_ps(acc.as_mut_ptr().add(i * NR + 16), r1[i]);
        }
        write_back::<NR>(&acc, c, ldc, mr, nr, accumulate);
    }
}

/// Defines a kernel for the first `$w` columns of an AVX-512 tile, one `$vec` accumulator per
/// row, with the same contract as [`tile`] for `nr ≤ $w`.
macro_rules! narrow_tile {
    ($(#[$doc:meta])* $name:ident, $features:literal, $vec:ty, $w:literal,
     $zero:ident, $set1:ident, $load:ident, $fma:ident, $store:ident) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $name<R: BRows>(
            kc: usize,
            a: *const f32,
            b: *const f32,
            rows: R,
            c: *mut f32,
            ldc: usize,
            mr: usize,
            nr: usize,
            accumulate: bool,
            row_init: Option<&[f32]>,
        ) {
            const MR: usize = AVX512_MR;
            let mut r: [$vec; MR] = [$zero(); MR];
            if let Some(init) = row_init {
                for (ri, &v) in r.iter_mut().zip(init) {
                    *ri = $set1(v);
                }
            }
            // SAFETY: p < kc, so every read stays inside B's rows (caller's contract).
            unsafe {
                for p in 0..kc {
                    let b0 = $load(b.add(rows.at(p)));
                    let ap = a.add(p * MR);
                    for (i, ri) in r.iter_mut().enumerate() {
                        *ri = $fma($set1(*ap.add(i)), b0, *ri);
                    }
                }
                let mut acc = [0.0f32; MR * $w];
                for (i, &ri) in r.iter().enumerate() {
                    $store(acc.as_mut_ptr().add(i * $w), ri);
                }
                write_back::<$w>(&acc, c, ldc, mr, nr, accumulate);
            }
        }
    };
}

narrow_tile!(
    /// The first 16 columns of an AVX-512 panel: one zmm accumulator per row.
    tile_avx512_w16, "avx512f", __m512, 16,
    _mm512_setzero_ps, _mm512_set1_ps, _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_storeu_ps
);

narrow_tile!(
    /// The first 8 columns of an AVX-512 panel: one ymm accumulator per row.
    tile_avx512_w8, "avx512f,avx2,fma", __m256, 8,
    _mm256_setzero_ps, _mm256_set1_ps, _mm256_loadu_ps, _mm256_fmadd_ps, _mm256_storeu_ps
);

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_avx2<R: BRows>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    rows: R,
    c: *mut f32,
    ldc: usize,
    mr: usize,
    nr: usize,
    accumulate: bool,
    row_init: Option<&[f32]>,
) {
    const MR: usize = 6;
    const NR: usize = 16;
    let mut r0 = [_mm256_setzero_ps(); MR];
    let mut r1 = [_mm256_setzero_ps(); MR];
    if let Some(init) = row_init {
        for i in 0..MR {
            r0[i] = _mm256_set1_ps(init[i]);
            r1[i] = r0[i];
        }
    }
    // SAFETY: p < kc, so every read stays inside B's rows (caller's contract).
    unsafe {
        for p in 0..kc {
            let bp = b.add(rows.at(p));
            let b0 = _mm256_loadu_ps(bp);
            let b1 = _mm256_loadu_ps(bp.add(8));
            let ap = a.add(p * MR);
            for i in 0..MR {
                let ai = _mm256_broadcast_ss(&*ap.add(i));
                r0[i] = _mm256_fmadd_ps(ai, b0, r0[i]);
                r1[i] = _mm256_fmadd_ps(ai, b1, r1[i]);
            }
        }
        if mr == MR && nr == NR {
            for i in 0..MR {
                let row = c.add(i * ldc);
                let (mut v0, mut v1) = (r0[i], r1[i]);
                if accumulate {
                    v0 = _mm256_add_ps(v0, _mm256_loadu_ps(row));
                    v1 = _mm256_add_ps(v1, _mm256_loadu_ps(row.add(8)));
                }
                _mm256_storeu_ps(row, v0);
                _mm256_storeu_ps(row.add(8), v1);
            }
            return;
        }
        let mut acc = [0.0f32; MR * NR];
        for i in 0..MR {
            _mm256_storeu_ps(acc.as_mut_ptr().add(i * NR), r0[i]);
            _mm256_storeu_ps(acc.as_mut_ptr().add(i * NR + 8), r1[i]);
        }
        write_back::<NR>(&acc, c, ldc, mr, nr, accumulate);
    }
}

/// The most output positions per tile of [`position_tile`] (one ymm of a channel's outputs).
pub const POSITIONS: usize = 8;

/// The signature of [`position_tile`]'s instances.
pub type PositionTile = unsafe fn(
    usize,
    *const f32,
    *const f32,
    *const usize,
    &[usize; POSITIONS],
    *mut f32,
    usize,
    (usize, usize),
    bool,
    Option<&[f32]>,
);

/// One position tile (a transposed micro-tile: output positions broadcast, output channels
/// in the vectors): for channels `j < NV·16` and positions `i < R`,
/// `C[j, i] (+)= Σ_p w[p·NV·16 + j] · img[offsets[p] + pos[i]]`, started from `bias[j]` when
/// given. Writes channels `0..live_ch` × positions `0..live_pos` of `c` (channel rows at
/// stride `ldc`, positions contiguous), transposing the tile in registers.
///
/// # Safety
/// The CPU supports AVX-512F; `R ≤ 8`; `w` holds `kc · NV · 16` floats; `offsets` holds `kc`
/// entries and `img + offsets[p] + pos[i]` is valid for every `p < kc`, `i < R`; `c` is valid
/// for `live_ch` rows × `live_pos ≤ R` columns at stride `ldc`, with `live_ch ≤ NV · 16`;
/// `bias`, when given, holds `NV · 16` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn position_tile<const NV: usize, const R: usize>(
    kc: usize,
    w: *const f32,
    img: *const f32,
    offsets: *const usize,
    pos: &[usize; POSITIONS],
    c: *mut f32,
    ldc: usize,
    (live_ch, live_pos): (usize, usize),
    accumulate: bool,
    bias: Option<&[f32]>,
) {
    let pos = *pos;
    let mut acc = [[_mm512_setzero_ps(); POSITIONS]; NV];
    // Lanes past `live_pos` are neither read nor written.
    let live = _mm256_cmpgt_epi32(
        _mm256_set1_epi32(live_pos as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    );
    // SAFETY: every read stays inside the operands (caller's contract).
    unsafe {
        if let Some(bias) = bias {
            for (v, row) in acc.iter_mut().enumerate() {
                *row = [_mm512_loadu_ps(bias.as_ptr().add(v * 16)); POSITIONS];
            }
        }
        for p in 0..kc {
            let base = img.add(*offsets.add(p));
            let wp = w.add(p * NV * 16);
            let wv: [__m512; NV] = std::array::from_fn(|v| _mm512_loadu_ps(wp.add(v * 16)));
            for i in 0..R {
                let x = _mm512_set1_ps(*base.add(pos[i]));
                for v in 0..NV {
                    acc[v][i] = _mm512_fmadd_ps(x, wv[v], acc[v][i]);
                }
            }
        }
        for (v, row) in acc.iter().enumerate() {
            for half in 0..2 {
                let first = v * 16 + half * 8;
                if first >= live_ch {
                    break;
                }
                let lanes = row.map(|z| match half {
                    0 => _mm512_castps512_ps256(z),
                    _ => _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(z))),
                });
                let channels = transpose8(lanes);
                for (j, &out) in channels.iter().enumerate().take(live_ch - first) {
                    let dst = c.add((first + j) * ldc);
                    if live_pos == POSITIONS {
                        let out = match accumulate {
                            true => _mm256_add_ps(out, _mm256_loadu_ps(dst)),
                            false => out,
                        };
                        _mm256_storeu_ps(dst, out);
                    } else {
                        let out = match accumulate {
                            true => _mm256_add_ps(out, _mm256_maskload_ps(dst, live)),
                            false => out,
                        };
                        _mm256_maskstore_ps(dst, live, out);
                    }
                }
            }
        }
    }
}

/// [`position_tile`] on AVX2 + FMA: `NV` vectors of 8 channels × `R ≤ 8` positions (`NV · R ≤
/// 12`: with the weights and the broadcast, every register but one), the weights `w` in rows
/// of `NV · 8` channels; the same contract otherwise, with AVX2 + FMA for AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn position_tile_avx2<const NV: usize, const R: usize>(
    kc: usize,
    w: *const f32,
    img: *const f32,
    offsets: *const usize,
    pos: &[usize; POSITIONS],
    c: *mut f32,
    ldc: usize,
    (live_ch, live_pos): (usize, usize),
    accumulate: bool,
    bias: Option<&[f32]>,
) {
    let pos = *pos;
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
            let wp = w.add(p * NV * 8);
            let wv: [__m256; NV] = std::array::from_fn(|v| _mm256_loadu_ps(wp.add(v * 8)));
            for i in 0..R {
                let x = _mm256_broadcast_ss(&*base.add(pos[i]));
                for v in 0..NV {
                    acc[v][i] = _mm256_fmadd_ps(x, wv[v], acc[v][i]);
                }
            }
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
            for (j, &out) in channels.iter().enumerate().take(live_ch - first) {
                store_first(c.add((first + j) * ldc), out, live_pos, accumulate);
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

/// Off x86-64 no instruction set has position tiles ([`Isa::detect`] finds none).
#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn position_tile_avx2<const NV: usize, const R: usize>(
    _: usize,
    _: *const f32,
    _: *const f32,
    _: *const usize,
    _: &[usize; POSITIONS],
    _: *mut f32,
    _: usize,
    _: (usize, usize),
    _: bool,
    _: Option<&[f32]>,
) {
    unreachable!("position tiles need AVX2 or AVX-512");
}

/// Off x86-64 no instruction set has position tiles ([`Isa::detect`] finds none).
#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
pub unsafe fn position_tile<const NV: usize, const R: usize>(
    _: usize,
    _: *const f32,
    _: *const f32,
    _: *const usize,
    _: &[usize; POSITIONS],
    _: *mut f32,
    _: usize,
    _: (usize, usize),
    _: bool,
    _: Option<&[f32]>,
) {
    unreachable!("position tiles need AVX2 or AVX-512");
}

/// The 8 × 8 transpose of eight rows of eight floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(s0, s4),
        _mm256_permute2f128_ps::<0x20>(s1, s5),
        _mm256_permute2f128_ps::<0x20>(s2, s6),
        _mm256_permute2f128_ps::<0x20>(s3, s7),
        _mm256_permute2f128_ps::<0x31>(s0, s4),
        _mm256_permute2f128_ps::<0x31>(s1, s5),
        _mm256_permute2f128_ps::<0x31>(s2, s6),
        _mm256_permute2f128_ps::<0x31>(s3, s7),
    ]
}
