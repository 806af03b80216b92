//! Softmax rows on AVX-512: the exponential of 16 lanes in fused multiply-adds with `vscalefps`
//! for the power of two (as ONNX Runtime's MLAS computes it), and a block of rows in three
//! passes (the maxima; the exponentials with their sums; the scaling), so that one row's
//! chain of dependent steps overlaps the next row's. The portable loop in
//! [`super::vector_exp`] took about 15 cycles a vector for the exponential alone.

use std::arch::x86_64::*;

/// Rows a block normalises at most (the maxima and sums stay on the stack).
const MOST_ROWS: usize = 256;

/// Softmax over each row of `len` elements of `x`, written to `out` (as long as `x`).
///
/// # Safety
/// The CPU must have AVX-512F and FMA.
#[target_feature(enable = "avx512f,fma")]
pub unsafe fn softmax_rows(out: &mut [f32], x: &[f32], len: usize) {
    assert_eq!(out.len(), x.len());
    let rows_per_block = MOST_ROWS.min(x.len() / len.max(1)).max(1);
    for (o, x) in out
        .chunks_exact_mut(rows_per_block * len)
        .zip(x.chunks_exact(rows_per_block * len))
    {
        block(o, x, len);
    }
    let done = x.len() / (rows_per_block * len) * (rows_per_block * len);
    if done < x.len() {
        block(&mut out[done..], &x[done..], len);
    }
}

/// One block of at most [`MOST_ROWS`] rows.
#[target_feature(enable = "avx512f,fma")]
fn block(out: &mut [f32], x: &[f32], len: usize) {
    let rows = x.len() / len;
    debug_assert!(rows <= MOST_ROWS && rows * len == x.len());
    let tail = tail_mask(len);
    let whole = len - len % 16;
    let mut maxima = [0.0f32; MOST_ROWS];
    for (m, r) in maxima.iter_mut().zip(x.chunks_exact(len)) {
        let mut acc = _mm512_set1_ps(f32::NEG_INFINITY);
        for i in (0..whole).step_by(16) {
            // `max(v, acc)` is `acc` where `v` is NaN: NaNs are ignored.
            acc = _mm512_max_ps(load(r, i), acc);
        }
        if tail != 0 {
            let v = load_tail(&r[whole..], tail, acc);
            acc = _mm512_max_ps(v, acc);
        }
        *m = _mm512_reduce_max_ps(acc);
    }
    let mut sums = [0.0f32; MOST_ROWS];
    for (((s, &m), o), r) in sums
        .iter_mut()
        .zip(&maxima)
        .zip(out.chunks_exact_mut(len))
        .zip(x.chunks_exact(len))
    {
        let max = _mm512_set1_ps(m);
        let mut sum = _mm512_setzero_ps();
        for i in (0..whole).step_by(16) {
            let e = exp16(_mm512_sub_ps(load(r, i), max));
            store(o, i, e);
            sum = _mm512_add_ps(sum, e);
        }
        if tail != 0 {
            let v = load_tail(&r[whole..], tail, _mm512_setzero_ps());
            let e = _mm512_maskz_mov_ps(tail, exp16(_mm512_sub_ps(v, max)));
            store_tail(&mut o[whole..], tail, e);
            sum = _mm512_add_ps(sum, e);
        }
        *s = _mm512_reduce_add_ps(sum);
    }
    for (&s, o) in sums.iter().zip(out.chunks_exact_mut(len)) {
        let inv = _mm512_set1_ps(1.0 / s);
        for i in (0..whole).step_by(16) {
            store(o, i, _mm512_mul_ps(load(o, i), inv));
        }
        if tail != 0 {
            let v = load_tail(&o[whole..], tail, _mm512_setzero_ps());
            store_tail(&mut o[whole..], tail, _mm512_mul_ps(v, inv));
        }
    }
}

/// The lanes of a row's last, partial vector.
fn tail_mask(len: usize) -> __mmask16 {
    ((1u32 << (len % 16)) - 1) as __mmask16
}

/// The 16 elements of `s` from `i` (`i + 16 <= s.len()`).
#[target_feature(enable = "avx512f")]
fn load(s: &[f32], i: usize) -> __m512 {
    let s = &s[i..i + 16];
    // SAFETY: `s` holds 16 elements.
    unsafe { _mm512_loadu_ps(s.as_ptr()) }
}

/// Writes `v` to the 16 elements of `s` from `i` (`i + 16 <= s.len()`).
#[target_feature(enable = "avx512f")]
fn store(s: &mut [f32], i: usize, v: __m512) {
    let s = &mut s[i..i + 16];
    // SAFETY: `s` holds 16 elements.
    unsafe { _mm512_storeu_ps(s.as_mut_ptr(), v) }
}

/// The elements of `s`, a row's last `s.len() < 16` (the lanes of `mask`), in the low lanes;
/// `rest`'s lanes above them.
#[target_feature(enable = "avx512f")]
fn load_tail(s: &[f32], mask: __mmask16, rest: __m512) -> __m512 {
    assert_eq!(s.len(), mask.count_ones() as usize);
    // SAFETY: the lanes `mask` selects are the first `s.len()`, all within `s`.
    unsafe { _mm512_mask_loadu_ps(rest, mask, s.as_ptr()) }
}

/// Writes the low `s.len() < 16` lanes of `v` (those of `mask`) to `s`.
#[target_feature(enable = "avx512f")]
fn store_tail(s: &mut [f32], mask: __mmask16, v: __m512) {
    assert_eq!(s.len(), mask.count_ones() as usize);
    // SAFETY: the lanes `mask` selects are the first `s.len()`, all within `s`.
    unsafe { _mm512_mask_storeu_ps(s.as_mut_ptr(), mask, v) }
}

/// `e^x` in each lane: within 2 ulp over the normal range (Cephes' `expf` polynomial on
/// `x - n ln 2`, `n` the nearest integer to `x / ln 2`, then `· 2^n` by `vscalefps`), `+inf`
/// above 88.72, `0` through the subnormals below -103.9, NaN for NaN.
#[target_feature(enable = "avx512f,fma")]
fn exp16(x: __m512) -> __m512 {
    // `min(c, x)` and `max(c, x)` return `x` where it is NaN, so NaN passes through.
    let x = _mm512_max_ps(
        _mm512_set1_ps(-104.0),
        _mm512_min_ps(_mm512_set1_ps(89.0), x),
    );
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_ps(x, _mm512_set1_ps(std::f32::consts::LOG2_E)),
    );
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693_359_4), x);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm512_set1_ps(1.987_569_2e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    }
    let p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r);
    let p = _mm512_add_ps(p, _mm512_set1_ps(1.0));
    _mm512_scalef_ps(p, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avx512() -> bool {
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma")
    }

    #[test]
    fn exp_matches_the_exact_value() {
        if !avx512() {
            crate::testing::skipped("no AVX-512F: the AVX-512 softmax is never taken here");
            return;
        }
        let xs: Vec<f32> = (0..=4000)
            .map(|i| -104.0 + i as f32 * 0.048)
            .chain([f32::NEG_INFINITY, -200.0, 88.8, 200.0, f32::INFINITY])
            .collect();
        for x in xs {
            // SAFETY: the CPU has AVX-512F and FMA.
            let got = unsafe { lane0(exp16(_mm512_set1_ps(x))) };
            let want = (x as f64).exp();
            if want > f32::MAX as f64 {
                assert_eq!(got, f32::INFINITY, "e^{x}");
            } else if want < f32::MIN_POSITIVE as f64 {
                assert!(
                    (got as f64 - want).abs() <= 2.0 * 1.4e-45,
                    "e^{x}: {got} vs {want}"
                );
            } else {
                let ulp = (want as f32).abs() * f32::EPSILON;
                assert!(
                    (got as f64 - want).abs() <= 2.0 * ulp as f64,
                    "e^{x}: {got} vs {want}"
                );
            }
        }
        // SAFETY: as above.
        assert!(unsafe { lane0(exp16(_mm512_set1_ps(f32::NAN))) }.is_nan());
    }

    #[target_feature(enable = "avx512f")]
    fn lane0(v: __m512) -> f32 {
        _mm512_cvtss_f32(v)
    }
}
