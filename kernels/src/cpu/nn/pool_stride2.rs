//! `f32` max pooling with a column stride of 2 and windows 2 or 3 columns wide, on AVX-512:
//! the strided pools of the CNN zoo, without [`super::pool2d`]'s phase planes.

use rayon::prelude::*;

use super::pool2d::AxisWindows;

/// `f32` max pooling with a column stride of 2 and windows 2 or 3 columns wide (every strided
/// max pool of the CNN zoo), on AVX-512: each output row's window rows are combined into one
/// padded row, whose stride-2 windows then give 16 outputs per few vector permutes — no phase
/// planes to scatter (70 % of the general strided path's time on googlenet's pools). Returns
/// false, having written nothing, where it does not apply. NaN never wins a window, and ties
/// keep the earlier value, as in the general path.
pub fn max_pool_stride2_f32(
    x: &[f32],
    (h, w): (usize, usize),
    rows: &AxisWindows,
    cols: &AxisWindows,
    y: &mut [f32],
) -> bool {
    let (oh, ow) = (rows.spans.len(), cols.spans.len());
    let fits = cols.stride == 2 && (2..=3).contains(&cols.kernel) && oh * ow > 0 && h * w > 0;
    #[cfg(target_arch = "x86_64")]
    if fits && is_x86_feature_detected!("avx512f") {
        // Padded column `p` (image column `p − pad_begin`) at `row[p]`; the rest stays at
        // −∞, the padding's value; slack for the last block's full-width loads.
        // One such row per output row: all rows are combined down before any across, so that
        // no load waits on the store just made to a neighbouring address.
        let len = 2 * ow.next_multiple_of(16) + 34;
        y.par_chunks_mut(oh * ow)
            .zip(x.par_chunks(h * w))
            .for_each_init(
                || vec![f32::NEG_INFINITY; oh * len],
                // SAFETY: the CPU has AVX-512F; `padded` holds `oh` rows of `len`.
                |padded, (yp, plane)| unsafe {
                    max_plane_stride2(plane, w, rows, cols, yp, padded, len)
                },
            );
        return true;
    }
    let _ = (x, y, fits);
    false
}

/// One plane of [`max_pool_stride2_f32`].
///
/// # Safety
/// The CPU has AVX-512F; `padded` holds one row of `len` (`2 · ow` rounded up to 32, plus 34)
/// per output row, all −∞ outside the image's columns.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn max_plane_stride2(
    plane: &[f32],
    w: usize,
    rows: &AxisWindows,
    cols: &AxisWindows,
    yp: &mut [f32],
    padded: &mut [f32],
    len: usize,
) {
    use std::arch::x86_64::*;
    let ow = cols.spans.len();
    let left = cols.pad_begin;
    // The image columns a window can reach (padded columns up to 2·ow; the others never
    // enter a window).
    let width = w.min(2 * ow + 1 - left);
    let lowest = _mm512_set1_ps(f32::NEG_INFINITY);
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (row, &(r0, r1)) in padded.chunks_exact_mut(len).zip(&rows.spans) {
        // Down the window's rows: `max_ps(v, acc)` keeps `acc` when `v` is NaN or equal.
        for x0 in (0..width).step_by(16) {
            let mask: __mmask16 = if width - x0 >= 16 {
                !0
            } else {
                (1 << (width - x0)) - 1
            };
            let mut acc = lowest;
            for r in r0..r1 {
                // SAFETY: columns x0.. under the mask lie in image row r.
                let v = unsafe { load_lanes(plane.as_ptr().add(r * w + x0), mask) };
                acc = _mm512_max_ps(v, acc);
            }
            // SAFETY: padded columns left + x0.. under the mask lie in `row`.
            unsafe { store_lanes(row.as_mut_ptr().add(left + x0), mask, acc) };
        }
    }
    for (out, row) in yp.chunks_exact_mut(ow).zip(padded.chunks_exact(len)) {
        // Across: output j combines padded columns 2j, 2j + 1 (and 2j + 2).
        for j0 in (0..ow).step_by(16) {
            // SAFETY: reads reach 2·j0 + 33 < row.len() (j0 + 16 ≤ ow rounded up to 16).
            let (a, b, c, d) = unsafe {
                let p = row.as_ptr().add(2 * j0);
                (
                    _mm512_loadu_ps(p),
                    _mm512_loadu_ps(p.add(16)),
                    _mm512_loadu_ps(p.add(2)),
                    _mm512_loadu_ps(p.add(18)),
                )
            };
            let mut acc = _mm512_max_ps(_mm512_permutex2var_ps(a, even, b), lowest);
            acc = _mm512_max_ps(_mm512_permutex2var_ps(a, odd, b), acc);
            if cols.kernel == 3 {
                acc = _mm512_max_ps(_mm512_permutex2var_ps(c, even, d), acc);
            }
            let mask: __mmask16 = if ow - j0 >= 16 {
                !0
            } else {
                (1 << (ow - j0)) - 1
            };
            // SAFETY: outputs j0.. under the mask lie in this output row.
            unsafe { store_lanes(out.as_mut_ptr().add(j0), mask, acc) };
        }
    }
}

/// The lanes of `mask` loaded from `at` (the others zero): a plain load when all 16 are on.
///
/// # Safety
/// The CPU has AVX-512F; `at` is valid for the lanes of `mask`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn load_lanes(
    at: *const f32,
    mask: std::arch::x86_64::__mmask16,
) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract.
    unsafe {
        match mask == !0 {
            true => _mm512_loadu_ps(at),
            false => _mm512_maskz_loadu_ps(mask, at),
        }
    }
}

/// Stores the lanes of `mask` of `v` at `at`: a plain store when all 16 are on (masked stores
/// are slow on AMD Zen).
///
/// # Safety
/// The CPU has AVX-512F; `at` is valid for the lanes of `mask`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn store_lanes(
    at: *mut f32,
    mask: std::arch::x86_64::__mmask16,
    v: std::arch::x86_64::__m512,
) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract.
    unsafe {
        match mask == !0 {
            true => _mm512_storeu_ps(at, v),
            false => _mm512_mask_storeu_ps(at, mask, v),
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn stride2_max_pool_takes_each_windows_largest_value() {
        let vectors = is_x86_feature_detected!("avx512f");
        let sizes = [(1, 2), (5, 7), (8, 9), (13, 4), (14, 33), (3, 40), (9, 17)];
        for (h, w) in sizes {
            for (kernel, pad, ceil) in [(2, 0, false), (2, 0, true), (3, 1, false), (3, 0, true)] {
                let outs = [h, w].map(|n: usize| {
                    let span = n + 2 * pad - kernel.min(n + 2 * pad);
                    (if ceil { span.div_ceil(2) } else { span / 2 }) + 1
                });
                let (rows, cols) = (
                    AxisWindows::stride2(h, kernel, pad, outs[0]),
                    AxisWindows::stride2(w, kernel, pad, outs[1]),
                );
                // Two planes of values in [-10, 10); every 7th NaN, which never wins a window.
                let x: Vec<f32> = crate::test_values::uniform(2 * h * w, (h * w) as u64)
                    .iter()
                    .enumerate()
                    .map(|(i, v)| if i % 7 == 3 { f32::NAN } else { 10.0 * v })
                    .collect();
                let [oh, ow] = outs;
                // 16 cells past the output, which must stay as they are.
                let mut y = vec![0.5f32; 2 * oh * ow + 16];
                let (y, past) = y.split_at_mut(2 * oh * ow);
                let done = max_pool_stride2_f32(&x, (h, w), &rows, &cols, y);
                assert_eq!(
                    done, vectors,
                    "the fast path runs where the CPU has vectors"
                );
                if !done {
                    continue;
                }
                assert!(
                    past.iter().all(|&v| v == 0.5),
                    "{h}x{w}: wrote past the output"
                );
                for (idx, &got) in y.iter().enumerate() {
                    let (plane, i, j) = (idx / (oh * ow), idx / ow % oh, idx % ow);
                    let (rs, cs) = (rows.spans[i], cols.spans[j]);
                    let want = (rs.0..rs.1)
                        .flat_map(|r| (cs.0..cs.1).map(move |c| (r, c)))
                        .map(|(r, c)| x[plane * h * w + r * w + c])
                        .fold(f32::NEG_INFINITY, |acc, v| if v > acc { v } else { acc });
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{h}x{w} kernel {kernel} pad {pad} ceil {ceil}: output {idx}"
                    );
                }
            }
        }
    }
}
