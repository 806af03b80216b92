//! The raw product `Σ a·b` (uint8 × int8 → int32) with AVX-512 VNNI `vpdpbusd`: tiles of up
//! to 6 rows × 32 columns held in 12 accumulators.

use super::pack::{pack_b, pad_a};
use super::{OutPtr, for_each_tile};

const MR: usize = 6;
const NR: usize = 32;

/// `c = a · b` for `a` m×k uint8 and `b` k×n int8 (row-major); the CPU must have AVX-512 VNNI.
pub(super) fn raw((m, k, n): (usize, usize, usize), a: &[u8], b: &[i8], c: &mut [i32]) {
    let (bp, groups) = pack_b::<i8>((k, n), b, 4, NR);
    let ap = pad_a::<u8>((m, k), a, groups * 4);
    let out = OutPtr(c.as_mut_ptr());
    let tiles = n.div_ceil(NR);
    for_each_tile(m, MR, tiles, m * n * k, |row0, rows, t| {
        // The whole wrapper is captured, not its raw pointer field (which is not `Send`).
        #[allow(clippy::redundant_locals)]
        let out = out;
        let cols = NR.min(n - t * NR);
        let a = &ap[row0 * groups * 4..];
        let b = &bp[t * groups * NR * 4..(t + 1) * groups * NR * 4];
        // SAFETY: the caller checked for AVX-512 VNNI; the tile reads `rows` padded rows of
        // `a` and one packed tile of `b`, and writes rows `row0..row0 + rows`, columns
        // `t * NR..t * NR + cols` of `c`, which no other tile writes.
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
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn tile<const R: usize>(
    a: &[u8],
    b: &[i8],
    groups: usize,
    c: *mut i32,
    ldc: usize,
    cols: usize,
) {
    use std::arch::x86_64::*;
    let lda = groups * 4;
    debug_assert!(a.len() >= (R - 1) * lda + lda && b.len() >= groups * NR * 4);
    let mut acc = [[_mm512_setzero_si512(); 2]; R];
    let (ap, bp) = (a.as_ptr(), b.as_ptr());
    for g in 0..groups {
        // SAFETY: in bounds by the assertion above.
        let (b0, b1) = unsafe {
            (
                _mm512_loadu_si512(bp.add(g * NR * 4).cast()),
                _mm512_loadu_si512(bp.add(g * NR * 4 + 64).cast()),
            )
        };
        for (r, acc) in acc.iter_mut().enumerate() {
            let x = unsafe { ap.add(r * lda + g * 4).cast::<i32>().read_unaligned() };
            let x = _mm512_set1_epi32(x);
            acc[0] = _mm512_dpbusd_epi32(acc[0], x, b0);
            acc[1] = _mm512_dpbusd_epi32(acc[1], x, b1);
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        // SAFETY: row `r` of the output tile has `cols` valid columns.
        unsafe {
            let row = c.add(r * ldc);
            if cols == NR {
                _mm512_storeu_si512(row.cast(), acc[0]);
                _mm512_storeu_si512(row.add(16).cast(), acc[1]);
            } else {
                let mut tmp = [0i32; NR];
                _mm512_storeu_si512(tmp.as_mut_ptr().cast(), acc[0]);
                _mm512_storeu_si512(tmp.as_mut_ptr().add(16).cast(), acc[1]);
                std::ptr::copy_nonoverlapping(tmp.as_ptr(), row, cols);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile<const R: usize>(_: &[u8], _: &[i8], _: usize, _: *mut i32, _: usize, _: usize) {
    unreachable!("AVX-512 VNNI is only detected on x86_64")
}
