//! The register-blocked micro-kernels: `C[MR×NR] (+)= A_panel · B_rows` over `kc` steps, with
//! `A_panel[p·MR + i]` and row `p` of `B` at `b + rows.at(p)` ([`BRows`]: a packed panel, or
//! rows of a padded image read in place). One per instruction set; the tile shape is the
//! instruction set's ([`Isa::tile`]).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::position_tile::TileFinish;
#[cfg(target_arch = "x86_64")]
use super::position_tile::finish_block;
use crate::options::GemmIsa;

/// The vector instruction set the packed GEMM runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512F: `AVX512_MR` × 32 tiles, two zmm accumulators per row.
    Avx512,
    /// AVX2 + FMA: 6 × 16 tiles, 12 ymm accumulators.
    Avx2,
}

impl Isa {
    /// The instruction set the packed GEMM uses on this CPU for [`GemmIsa::Auto`]: the best
    /// it has, or the one the diagnostics knob `SPILLWAY_GEMM` names ([`crate::knobs::gemm`]:
    /// `avx512`, `avx2`, or `generic` for none, every product then going to the generic matrix
    /// core), when the CPU has it. Read once per process. Vector code outside the packed GEMM
    /// (epilogues, pools) follows this too; a session's products follow its
    /// [`KernelOptions`](crate::KernelOptions) ([`Isa::for_choice`]).
    pub fn detect() -> Option<Isa> {
        static CHOSEN: std::sync::OnceLock<Option<Isa>> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| match crate::knobs::gemm() {
            None | Some(GemmIsa::Auto) => Isa::supported().first().copied(),
            Some(choice) => Isa::at_most(choice),
        })
    }

    /// The instruction set a session's packed GEMM runs on for `choice`: [`Isa::detect`] for
    /// `Auto`, else the best this CPU has up to the one named (`None` for `Generic`, and for
    /// `Avx2` on a CPU without AVX2).
    pub fn for_choice(choice: GemmIsa) -> Option<Isa> {
        match choice {
            GemmIsa::Auto => Isa::detect(),
            _ => Isa::at_most(choice),
        }
    }

    /// The best instruction set this CPU has no wider than `choice` (any for `Auto`).
    fn at_most(choice: GemmIsa) -> Option<Isa> {
        let supported = Isa::supported();
        match choice {
            GemmIsa::Generic => None,
            GemmIsa::Avx2 => supported.into_iter().find(|&i| i == Isa::Avx2),
            _ => supported.first().copied(),
        }
    }

    /// The name of the instruction set: `avx512` or `avx2`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2",
        }
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

    /// Floats per vector register.
    pub fn lanes(self) -> usize {
        match self {
            Isa::Avx512 => 16,
            Isa::Avx2 => 8,
        }
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

/// Asks for every cache line of `data` to be brought into L2 (nothing on other CPUs).
pub fn prefetch_lines(data: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in data.chunks(16) {
        // SAFETY: the address is inside `data`; prefetching never faults.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(line.as_ptr().cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Rows of an AVX-512 micro-tile.
const AVX512_MR: usize = 8;

/// One micro-tile. Writes the `mr × nr` top-left corner of the tile to `c` (row stride
/// `ldc`), adding to what is there when `accumulate`; row `i` starts from `row_init[i]`
/// (a bias) instead of zero when given; `finish`, when given, is applied as the outputs are
/// stored (in registers in a full AVX-512 tile, else over the stored corner).
///
/// # Safety
/// The CPU supports `isa`; `a` holds `kc · MR` floats and `b + rows.at(p)` is valid for `NR`
/// floats for every `p < kc`; `c` is valid for
/// rows `0..mr` × columns `0..nr` at row stride `ldc`, with `mr ≤ MR`, `nr ≤ NR`;
/// `row_init`, when given, holds at least `MR` values; `finish.z`, when not null, is valid
/// where `c` is, at the same offsets.
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
    finish: Option<TileFinish>,
) {
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (kc, a, b, rows, c, ldc, mr, nr, accumulate, row_init, finish);
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
            // The full kernel finishes in its registers.
            Isa::Avx512 => {
                return tile_avx512(kc, a, b, rows, c, ldc, mr, nr, accumulate, row_init, finish);
            }
            Isa::Avx2 => tile_avx2(kc, a, b, rows, c, ldc, mr, nr, accumulate, row_init),
        }
        if let Some(f) = finish {
            f.apply_in_place(c, ldc, mr, nr);
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
    finish: Option<TileFinish>,
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
                if let Some(f) = finish {
                    v0 = finish_block(v0, f, i * ldc);
                    v1 = finish_block(v1, f, i * ldc + 16);
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
        if let Some(f) = finish {
            f.apply_in_place(c, ldc, mr, nr);
        }
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
