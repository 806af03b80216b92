//! The raw product `Σ a·b` (uint8 × int8 → int32) with AVX2 `vpmaddwd` on operands widened to
//! 16 bits (exact: no intermediate saturation, unlike `vpmaddubsw`): tiles of up to 6 rows ×
//! 16 columns held in 12 accumulators.

use super::pack::{pack_b, pad_a};
use super::{OutPtr, for_each_tile};

const MR: usize = 6;
const NR: usize = 16;

/// `c = a · b` for `a` m×k uint8 and `b` k×n int8 (row-major); the CPU must have AVX2.
pub(super) fn raw((m, k, n): (usize, usize, usize), a: &[u8], b: &[i8], c: &mut [i32]) {
    let (bp, groups) = pack_b::<i16>((k, n), b, 2, NR);
    let ap = pad_a::<i16>((m, k), a, groups * 2);
    let out = OutPtr(c.as_mut_ptr());
    let tiles = n.div_ceil(NR);
    for_each_tile(m, MR, tiles, m * n * k, |row0, rows, t| {
        // The whole wrapper is captured, not its raw pointer field (which is not `Send`).
        #[allow(clippy::redundant_locals)]
        let out = out;
        let cols = NR.min(n - t * NR);
        let a = &ap[row0 * groups * 2..];
        let b = &bp[t * groups * NR * 2..(t + 1) * groups * NR * 2];
        // SAFETY: the caller checked for AVX2; the tile writes rows `row0..row0 + rows`,
        // columns `t * NR..t * NR + cols` of `c`, which no other tile writes.
        unsafe {
            let c = out.0.add(row0 * n + t * NR);
            match rows {
                6 => tile::<6>(a, b, groups, c, n, cols),
                5 => tile::<5>(a, b, groups, c, n, cols),
                4 => tile::<4>(a, b, groups, c, n, cols),
                3 => tile::<3>(a, b, groups, c, n, cols),
                2 => tile::<2>(a, b, groups, c, n, cols),
                _ => tile::<1>(a, b, groups, c, n, cols),
            }
        }
    });
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn tile<const R: usize>(
    a: &[i16],
    b: &[i16],
    groups: usize,
    c: *mut i32,
    ldc: usize,
    cols: usize,
) {
    use std::arch::x86_64::*;
    let lda = groups * 2;
    debug_assert!(a.len() >= R * lda && b.len() >= groups * NR * 2);
    let mut acc = [[_mm256_setzero_si256(); 2]; R];
    let (ap, bp) = (a.as_ptr(), b.as_ptr());
    for g in 0..groups {
        // SAFETY: in bounds by the assertion above.
        let (b0, b1) = unsafe {
            (
                _mm256_loadu_si256(bp.add(g * NR * 2).cast()),
                _mm256_loadu_si256(bp.add(g * NR * 2 + 16).cast()),
            )
        };
        for (r, acc) in acc.iter_mut().enumerate() {
            let x = unsafe { ap.add(r * lda + g * 2).cast::<i32>().read_unaligned() };
            let x = _mm256_set1_epi32(x);
            acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(x, b0));
            acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(x, b1));
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        // SAFETY: row `r` of the output tile has `cols` valid columns.
        unsafe {
            let row = c.add(r * ldc);
            if cols == NR {
                _mm256_storeu_si256(row.cast(), acc[0]);
                _mm256_storeu_si256(row.add(8).cast(), acc[1]);
            } else {
                let mut tmp = [0i32; NR];
                _mm256_storeu_si256(tmp.as_mut_ptr().cast(), acc[0]);
                _mm256_storeu_si256(tmp.as_mut_ptr().add(8).cast(), acc[1]);
                std::ptr::copy_nonoverlapping(tmp.as_ptr(), row, cols);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile<const R: usize>(_: &[i16], _: &[i16], _: usize, _: *mut i32, _: usize, _: usize) {
    unreachable!("AVX2 is only detected on x86_64")
}
