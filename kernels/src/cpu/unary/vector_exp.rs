//! `e^x` over `f32` slices, vectorized: a polynomial on the reduced argument (Cephes' `expf`
//! coefficients, within 2 ulp of the exact value) written as branch-free arithmetic, so the
//! loop compiles to 8- or 16-wide SIMD where the CPU has AVX2 or AVX-512. Softmax, Sigmoid and
//! Exp use it for `f32`: `libm`'s scalar `expf` dominated them (ONNX Runtime's MLAS does the
//! same). `erf` (and GELU through it) is built on it the same way: `libm`'s scalar `erff` took
//! 9.6 of BERT-base's 88 ms.

use rayon::prelude::*;

use super::real::row_max;
use crate::cpu::binary::broadcast::PAR_THRESHOLD;

/// Defines `$name(xs, args…)`: `$portable(xs, args…)` (an `#[inline(always)]` loop) compiled
/// for the CPU's widest vectors: AVX-512, else AVX2 with FMA, else the baseline instruction set.
/// Each instance calls the loop directly, so it is inlined and compiled for those vectors;
/// through a generic wrapper taking the loop as a closure, erf's loop stayed out of line,
/// compiled for the baseline's four lanes. The loop's `FUSED` parameter says whether the CPU
/// has fused multiply-adds (true in the AVX-512 and AVX2 instances), for the loops that use
/// them ([`madd`]).
macro_rules! widest_loop {
    ($name:ident($($arg:ident: $ty:ty),*) => $portable:ident) => {
        fn $name(xs: &mut [f32] $(, $arg: $ty)*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,fma")]
                fn avx512(xs: &mut [f32] $(, $arg: $ty)*) {
                    $portable::<true>(xs $(, $arg)*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn avx2(xs: &mut [f32] $(, $arg: $ty)*) {
                    $portable::<true>(xs $(, $arg)*)
                }
                if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU has AVX-512F and FMA.
                    return unsafe { avx512(xs $(, $arg)*) };
                }
                if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU has AVX2 and FMA.
                    return unsafe { avx2(xs $(, $arg)*) };
                }
            }
            $portable::<false>(xs $(, $arg)*)
        }
    };
}

/// `a · b + c`: one fused multiply-add (rounded once) where `FUSED`, else a product and a sum.
/// Only loops compiled with FMA pass `FUSED`: elsewhere `mul_add` is a call into `libm`.
#[inline(always)]
fn madd<const FUSED: bool>(a: f32, b: f32, c: f32) -> f32 {
    match FUSED {
        true => a.mul_add(b, c),
        false => a * b + c,
    }
}

/// Runs `chunk` over `xs`: in parallel chunks when `xs` is long, else in one call.
fn in_chunks(xs: &mut [f32], chunk: impl Fn(&mut [f32]) + Sync + Send) {
    if xs.len() >= PAR_THRESHOLD {
        xs.par_chunks_mut(PAR_THRESHOLD / 2).for_each(chunk);
    } else {
        chunk(xs);
    }
}

/// `xs[i] ← e^(xs[i] + shift)` for every element (Softmax passes `-max` as `shift`).
pub fn exp_in_place(xs: &mut [f32], shift: f32) {
    in_chunks(xs, |c| exp_chunk(c, shift));
}

/// `xs[i] ← 1 / (1 + e^-xs[i])` for every element.
pub fn sigmoid_in_place(xs: &mut [f32]) {
    in_chunks(xs, sigmoid_chunk);
}

// [`sigmoid_in_place`] on one thread, in one vectorized pass (with the CPU's widest vectors;
// a pass per step, two of them compiled for SSE2 only, took 2.8 cycles per element).
widest_loop!(sigmoid_chunk() => sigmoid_portable);

// Softmax and Sigmoid keep the unfused exponential on every CPU: the same results as before
// fused multiply-adds were used anywhere here.
#[inline(always)]
fn sigmoid_portable<const FUSED: bool>(xs: &mut [f32]) {
    for v in xs {
        *v = 1.0 / (1.0 + exp(-*v));
    }
}

/// The sum of `xs`, in eight interleaved partial sums (which vectorizes; a single running sum
/// cannot, its order being fixed).
#[inline(always)]
pub fn sum(xs: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        lanes.iter_mut().zip(c).for_each(|(l, &v)| *l += v);
    }
    lanes.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>()
}

widest_loop!(exp_chunk(shift: f32) => exp_portable);

/// Softmax over each row of `len` elements of `x`, written to `out` (as long as `x`), on one
/// thread: [`super::softmax_avx512`] where the CPU has AVX-512, else the same values as
/// [`exp_in_place`] and [`sum`] row by row.
pub fn softmax_rows(out: &mut [f32], x: &[f32], len: usize) {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX-512F and FMA.
        return unsafe { super::softmax_avx512::softmax_rows(out, x, len) };
    }
    softmax_chunk(out, x, len);
}

widest_loop!(softmax_chunk(x: &[f32], len: usize) => softmax_portable);

// The exponentials of all the rows go through one loop: row by row (128 elements in a
// transformer's attention), each loop ended on its last vector's whole chain of dependent
// steps, and the exponentials took 19 cycles a vector.
#[inline(always)]
fn softmax_portable<const FUSED: bool>(out: &mut [f32], x: &[f32], len: usize) {
    for (o, r) in out.chunks_exact_mut(len).zip(x.chunks_exact(len)) {
        let max = row_max(r);
        for (o, &v) in o.iter_mut().zip(r) {
            *o = v - max;
        }
    }
    for v in out.iter_mut() {
        *v = exp(*v);
    }
    for o in out.chunks_exact_mut(len) {
        let inv = 1.0 / sum(o);
        for v in o {
            *v *= inv;
        }
    }
}

#[inline(always)]
fn exp_portable<const FUSED: bool>(xs: &mut [f32], shift: f32) {
    for v in xs {
        *v = exp(*v + shift);
    }
}

/// `e^x` for one `f32`: exact to 2 ulp over the normal range, `+inf` above 88.72, `0` (through
/// the subnormals) below -103.9, NaN for NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    exp_with::<false>(x)
}

/// [`exp`], its polynomial in fused multiply-adds where `FUSED` (see [`madd`]).
#[inline(always)]
fn exp_with<const FUSED: bool>(x: f32) -> f32 {
    // ln 2 split so that `n · LN2_HI` is exact for |n| < 2^9.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5 · 2^23 rounds to an integer (to nearest), held in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    // Beyond these `e^x` is `inf` and `0`; clamping keeps `n` within ±150.
    let x = x.clamp(-104.0, 89.0);
    let t = x * std::f32::consts::LOG2_E + ROUND;
    let n = t - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_2e-4;
    let p = madd::<FUSED>(p, r, 1.398_199_9e-3);
    let p = madd::<FUSED>(p, r, 8.333_452e-3);
    let p = madd::<FUSED>(p, r, 4.166_579_6e-2);
    let p = madd::<FUSED>(p, r, 1.666_666_5e-1);
    let p = madd::<FUSED>(p, r, 0.5);
    let p = madd::<FUSED>(p * r, r, r) + 1.0;
    // 2^n in two factors, each a normal float for every n in ±150.
    let n = t.to_bits() as i32 - ROUND.to_bits() as i32;
    let half = n >> 1;
    let scale = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
    p * scale(half) * scale(n - half)
}

/// `xs[i] ← erf(xs[i])` for every element.
pub fn erf_in_place(xs: &mut [f32]) {
    in_chunks(xs, erf_chunk);
}

/// `xs[i] ← x · (1 + erf(x / √2)) / 2` (GELU, exact form) for every element `x`.
pub fn gelu_in_place(xs: &mut [f32]) {
    in_chunks(xs, gelu_chunk);
}

widest_loop!(erf_chunk() => erf_portable);
widest_loop!(gelu_chunk() => gelu_portable);

// Plain `for` loops: `for_each` with erf's body was not inlined either. With fused
// multiply-adds, erf's three polynomials each take one instruction a step instead of two
// dependent ones (BERT-base's `Erf` on [128, 3072], 2 threads: 193 µs unfused).
#[inline(always)]
fn erf_portable<const FUSED: bool>(xs: &mut [f32]) {
    for v in xs {
        *v = erf_with::<FUSED>(*v);
    }
}

#[inline(always)]
fn gelu_portable<const FUSED: bool>(xs: &mut [f32]) {
    for v in xs {
        *v = 0.5 * *v * (1.0 + erf_with::<FUSED>(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// The error function for one `f32`, as branch-free arithmetic (it vectorizes): within 2 ulp
/// of the exact value below |x| = 0.5 (its Taylor series to x¹⁵), and within 1.3e-7 of it
/// above, where `erf = 1 − erfc` with Numerical Recipes' Chebyshev fit of `erfc` (fractional
/// error below 1.2e-7) on [`exp`]. ±1 beyond ±3.92, NaN for NaN.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    erf_with::<false>(x)
}

/// [`erf`], its polynomials (and its exponential's) in fused multiply-adds where `FUSED`
/// (see [`madd`]): rounded once a step, so within the same bounds.
#[inline(always)]
fn erf_with<const FUSED: bool>(x: f32) -> f32 {
    let a = x.abs();
    // 2/√π · (x − x³/3 + x⁵/10 − x⁷/42 + x⁹/216 − x¹¹/1320 + x¹³/9360 − x¹⁵/75600).
    let s = a * a;
    let p = -1.492_565e-5_f32;
    let p = madd::<FUSED>(p, s, 1.205_533_3e-4);
    let p = madd::<FUSED>(p, s, -8.548_327e-4);
    let p = madd::<FUSED>(p, s, 5.223_977_6e-3);
    let p = madd::<FUSED>(p, s, -2.686_617_1e-2);
    let p = madd::<FUSED>(p, s, 1.128_379_2e-1);
    let p = madd::<FUSED>(p, s, -3.761_263_9e-1);
    let p = madd::<FUSED>(p, s, std::f32::consts::FRAC_2_SQRT_PI);
    let small = x * p;
    let t = 1.0 / madd::<FUSED>(0.5, a, 1.0);
    let q = 0.170_872_77_f32;
    let q = madd::<FUSED>(q, t, -0.822_152_23);
    let q = madd::<FUSED>(q, t, 1.488_515_9);
    let q = madd::<FUSED>(q, t, -1.135_204);
    let q = madd::<FUSED>(q, t, 0.278_868_07);
    let q = madd::<FUSED>(q, t, -0.186_288_06);
    let q = madd::<FUSED>(q, t, 0.096_784_18);
    let q = madd::<FUSED>(q, t, 0.374_091_96);
    let q = madd::<FUSED>(q, t, 1.000_023_7);
    let q = madd::<FUSED>(q, t, -1.265_512_2);
    let erfc = t * exp_with::<FUSED>(q - a * a);
    let large = (1.0 - erfc).copysign(x);
    if a < 0.5 { small } else { large }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within 2 ulp of `f64::exp` rounded to `f32` over the whole range, with the edges exact.
    #[test]
    fn exp_matches_the_exact_value() {
        let mut worst = 0u32;
        let mut x = -103.0f32;
        while x < 88.7 {
            let want = (x as f64).exp() as f32;
            let got = exp(x);
            if want.is_normal() {
                worst = worst.max(got.to_bits().abs_diff(want.to_bits()));
            } else {
                assert!(
                    (got - want).abs() <= f32::from_bits(2),
                    "{x}: {got} vs {want}"
                );
            }
            x += 0.0137;
        }
        assert!(worst <= 2, "{worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(f32::NAN).is_nan());
    }

    #[test]
    fn slices_match_element_by_element() {
        let xs: Vec<f32> = (0..100_000).map(|i| (i as f32 - 50_000.0) * 1e-3).collect();
        let mut e = xs.clone();
        exp_in_place(&mut e, -1.0);
        assert!(xs.iter().zip(&e).all(|(&x, &y)| y == exp(x - 1.0)));
        let mut s = xs.clone();
        sigmoid_in_place(&mut s);
        for (&x, &y) in xs.iter().zip(&s) {
            let want = 1.0 / (1.0 + (-(x as f64)).exp());
            assert!((y as f64 - want).abs() <= 1e-6 * want, "{x}: {y} vs {want}");
        }
        assert_eq!(sum(&[1.0; 13]), 13.0);
    }

    /// Softmax rows, on this CPU's path and on the portable loop, against the definition in
    /// `f64`: rows shorter than a vector, with a partial last vector, and longer than a block.
    #[test]
    fn softmax_rows_match_the_definition() {
        for len in [1, 7, 16, 91, 128, 300] {
            let rows = 300;
            let x: Vec<f32> = (0..rows * len)
                .map(|i| ((i * 7919) % 1013) as f32 * 0.05 - 25.0)
                .collect();
            let mut here = vec![0.0; x.len()];
            softmax_rows(&mut here, &x, len);
            let mut portable = vec![0.0; x.len()];
            softmax_chunk(&mut portable, &x, len);
            for out in [here, portable] {
                for (o, r) in out.chunks(len).zip(x.chunks(len)) {
                    let max = r.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
                    let sum: f64 = r.iter().map(|&v| (v as f64 - max).exp()).sum();
                    for (&got, &v) in o.iter().zip(r) {
                        let d = v as f64 - max;
                        let want = d.exp() / sum;
                        // `v - max` is rounded to f32: e^d carries |d| ulp of relative error.
                        let bound = (d.abs() + 8.0) * f32::EPSILON as f64 * want;
                        assert!((got as f64 - want).abs() <= bound, "{len}: {got} vs {want}");
                    }
                }
            }
        }
    }

    /// The erf that the slices compute on this CPU: in fused multiply-adds where it has them.
    fn erf_here(x: f32) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("fma")
            && (is_x86_feature_detected!("avx512f") || is_x86_feature_detected!("avx2"))
        {
            return erf_with::<true>(x);
        }
        erf(x)
    }

    /// Against `libm`'s `f64` erf, with and without fused multiply-adds: within 2 ulp below
    /// 0.5, within 1.5e-7 above; the slices element by element; the edges.
    #[test]
    fn erf_matches_the_exact_value() {
        let mut x = -6.0f32;
        while x < 6.0 {
            let want = libm::erf(x as f64);
            for got in [erf(x), erf_with::<true>(x)] {
                if x.abs() < 0.5 && want != 0.0 {
                    let ulps = got.to_bits().abs_diff((want as f32).to_bits());
                    assert!(ulps <= 2, "{x}: {got} vs {want} ({ulps} ulp)");
                } else {
                    assert!((got as f64 - want).abs() <= 1.5e-7, "{x}: {got} vs {want}");
                }
            }
            x += 0.000_731;
        }
        for tiny in [1e-30f32, -3e-8, 1e-4] {
            let want = libm::erf(tiny as f64) as f32;
            assert!(erf(tiny).to_bits().abs_diff(want.to_bits()) <= 2, "{tiny}");
        }
        assert_eq!(erf(0.0), 0.0);
        assert_eq!(erf(f32::INFINITY), 1.0);
        assert_eq!(erf(f32::NEG_INFINITY), -1.0);
        assert!(erf(f32::NAN).is_nan());
        let xs: Vec<f32> = (0..100_000).map(|i| (i as f32 - 50_000.0) * 1e-4).collect();
        let mut e = xs.clone();
        erf_in_place(&mut e);
        assert!(xs.iter().zip(&e).all(|(&x, &y)| y == erf_here(x)));
        let mut g = xs.clone();
        gelu_in_place(&mut g);
        for (&x, &y) in xs.iter().zip(&g) {
            let want = 0.5 * x as f64 * (1.0 + libm::erf(x as f64 / 2f64.sqrt()));
            assert!(
                (y as f64 - want).abs() <= 2e-7 * (1.0 + want.abs()),
                "{x}: {y} vs {want}"
            );
        }
    }
}
