//! The fused-convolution epilogue `y ← activation(y + add)` on `f32` in one vectorized pass
//! (AVX-512 or AVX2, the instruction set the packed GEMM uses), for the activations that are a
//! clamp (none, `Relu` and `Clip`) and for `HardSigmoid` and `HardSwish` (MobileNetV3's
//! convolutions end in them). The kernels crate is compiled for baseline x86-64, so the
//! generic epilogue runs on 4-wide SSE, and as two passes when a residual is added: on a
//! ResNet 1×1 convolution it was a fifth of the node's time.
//!
//! Results equal the generic epilogue's bit for bit: the add rounds the same, and the clamp
//! is `max(lo, v)` then `min(hi, v)` with `v` as the second operand, which x86 returns when it
//! is NaN (NaN stays NaN, as in `Activation::apply`) or when both are zeros (`-0.0` stays).
//! The hard activations compute `t = x · alpha + beta` as a product then a sum, as the generic
//! code does, then `max(t, 0)` with `0` second (a NaN `t` gives `0`, as `f32::max`), then
//! `min(·, 1)`, and `HardSwish` multiplies by `x`.

use super::epilogue::Activation;
use super::packed_gemm::Isa;

/// Finishes `values` (`add`, when given, holds as many values) if the CPU and the activation
/// allow; false when the caller must run the generic epilogue.
pub(super) fn finish_f32(values: &mut [f32], add: Option<&[f32]>, activation: Activation) -> bool {
    if let Some(hard) = hard(activation) {
        return finish_hard(values, add, activation, hard);
    }
    let Some((lo, hi)) = activation.clamp_bounds() else {
        return false;
    };
    if add.is_none() && activation.is_identity() {
        return true;
    }
    assert!(
        add.is_none_or(|a| a.len() == values.len()),
        "epilogue: the added values do not match the block"
    );
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `Isa::detect` reports only instruction sets this CPU has; `add` holds
        // `values.len()` values (checked above).
        match Isa::detect() {
            Some(Isa::Avx512) => unsafe { clamp_avx512(values, add, lo, hi) },
            Some(Isa::Avx2) => unsafe { clamp_avx2(values, add, lo, hi) },
            None => return false,
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (values, lo, hi);
        false
    }
}

/// A hard activation: `(alpha, beta, times_x)`, `min(1, max(0, x · alpha + beta))`, multiplied
/// by `x` when `times_x` (`HardSwish`).
type Hard = (f32, f32, bool);

/// The hard activation `activation` is; `None` for the others.
fn hard(activation: Activation) -> Option<Hard> {
    match activation {
        Activation::HardSigmoid(alpha, beta) => Some((alpha, beta, false)),
        // The generic code's constants: 1/6 rounded once from f64.
        Activation::HardSwish => Some(((1.0f64 / 6.0) as f32, 0.5, true)),
        _ => None,
    }
}

/// [`finish_f32`] for the hard activation `activation` (which is `hard`).
fn finish_hard(
    values: &mut [f32],
    add: Option<&[f32]>,
    activation: Activation,
    hard: Hard,
) -> bool {
    assert!(
        add.is_none_or(|a| a.len() == values.len()),
        "epilogue: the added values do not match the block"
    );
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = Isa::detect() {
        // SAFETY: `Isa::detect` reports only instruction sets this CPU has; `add` holds
        // `values.len()` values (checked above).
        unsafe { hard_on(isa, values, add, activation, hard) };
        return true;
    }
    let _ = (values, activation, hard);
    false
}

/// The hard activation `activation` (which is `hard`) over `values` on `isa`: whole vectors
/// in its kernel, the tail as the generic epilogue finishes it.
///
/// # Safety
/// The CPU has `isa`; `add`, when given, holds `values.len()` values.
#[cfg(target_arch = "x86_64")]
unsafe fn hard_on(
    isa: Isa,
    values: &mut [f32],
    add: Option<&[f32]>,
    activation: Activation,
    hard: Hard,
) {
    // SAFETY: forwarded from the caller's contract.
    let whole = unsafe {
        match isa {
            Isa::Avx512 => hard_avx512(values, add, hard),
            Isa::Avx2 => hard_avx2(values, add, hard),
        }
    };
    let tail = &mut values[whole..];
    if let Some(z) = add {
        tail.iter_mut().zip(&z[whole..]).for_each(|(v, z)| *v += z);
    }
    activation.apply(tail);
}

/// Defines `$name(values, add, hard)`: the hard activation over the whole `$lanes`-wide
/// vectors of `values`; returns how many values it finished.
macro_rules! hard_kernel {
    ($name:ident, $features:literal, $lanes:literal, $set1:ident, $load:ident, $add:ident,
     $mul:ident, $max:ident, $min:ident, $store:ident) => {
        /// # Safety
        /// The CPU has the instruction set; `add`, when given, holds `values.len()` values.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name(values: &mut [f32], add: Option<&[f32]>, hard: Hard) -> usize {
            use std::arch::x86_64::*;
            let (alpha, beta, times_x) = hard;
            let (alpha_v, beta_v) = ($set1(alpha), $set1(beta));
            let (zero, one) = ($set1(0.0), $set1(1.0));
            let whole = values.len() / $lanes * $lanes;
            let p = values.as_mut_ptr();
            // SAFETY: every access is below `whole ≤ values.len()`, which `add` also holds.
            unsafe {
                for i in (0..whole).step_by($lanes) {
                    let mut v = $load(p.add(i));
                    if let Some(z) = add {
                        v = $add(v, $load(z.as_ptr().add(i)));
                    }
                    // NaN stays NaN: max and min return their second operand when either is NaN.
                    let gate = $min(one, $max(zero, $add($mul(v, alpha_v), beta_v)));
                    $store(p.add(i), if times_x { $mul(v, gate) } else { gate });
                }
            }
            whole
        }
    };
}

hard_kernel!(
    hard_avx512,
    "avx512f",
    16,
    _mm512_set1_ps,
    _mm512_loadu_ps,
    _mm512_add_ps,
    _mm512_mul_ps,
    _mm512_max_ps,
    _mm512_min_ps,
    _mm512_storeu_ps
);

hard_kernel!(
    hard_avx2,
    "avx",
    8,
    _mm256_set1_ps,
    _mm256_loadu_ps,
    _mm256_add_ps,
    _mm256_mul_ps,
    _mm256_max_ps,
    _mm256_min_ps,
    _mm256_storeu_ps
);

/// The generic epilogue's arithmetic on one value (the vector loops' tail).
#[inline(always)]
fn clamp_one(v: f32, z: Option<f32>, lo: f32, hi: f32) -> f32 {
    // Without a residual nothing is added: `-0.0 + 0.0` would be `+0.0`.
    let v = z.map_or(v, |z| v + z);
    let v = if v < lo { lo } else { v };
    if v > hi { hi } else { v }
}

/// Defines `$name(values, add, lo, hi)`: [`clamp_one`] over `values` with `$lanes`-wide vectors.
macro_rules! clamp_kernel {
    ($name:ident, $features:literal, $lanes:literal,
     $set1:ident, $load:ident, $add:ident, $max:ident, $min:ident, $store:ident) => {
        /// # Safety
        /// The CPU has the instruction set; `add`, when given, holds `values.len()` values.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name(values: &mut [f32], add: Option<&[f32]>, lo: f32, hi: f32) {
            use std::arch::x86_64::*;
            let (lo_v, hi_v) = ($set1(lo), $set1(hi));
            let whole = values.len() / $lanes * $lanes;
            let p = values.as_mut_ptr();
            // SAFETY: every access is below `whole ≤ values.len()`, which `add` also holds.
            unsafe {
                match add {
                    Some(z) => {
                        for i in (0..whole).step_by($lanes) {
                            let v = $add($load(p.add(i)), $load(z.as_ptr().add(i)));
                            $store(p.add(i), $min(hi_v, $max(lo_v, v)));
                        }
                    }
                    None => {
                        for i in (0..whole).step_by($lanes) {
                            $store(p.add(i), $min(hi_v, $max(lo_v, $load(p.add(i)))));
                        }
                    }
                }
            }
            for i in whole..values.len() {
                values[i] = clamp_one(values[i], add.map(|z| z[i]), lo, hi);
            }
        }
    };
}

clamp_kernel!(
    clamp_avx512,
    "avx512f",
    16,
    _mm512_set1_ps,
    _mm512_loadu_ps,
    _mm512_add_ps,
    _mm512_max_ps,
    _mm512_min_ps,
    _mm512_storeu_ps
);

clamp_kernel!(
    clamp_avx2,
    "avx",
    8,
    _mm256_set1_ps,
    _mm256_loadu_ps,
    _mm256_add_ps,
    _mm256_max_ps,
    _mm256_min_ps,
    _mm256_storeu_ps
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every instruction set this CPU has gives the generic epilogue's bits, NaN, infinities
    /// and signed zeros included, on lengths with and without a tail.
    #[test]
    fn equals_the_generic_epilogue_bit_for_bit() {
        let specials = [
            f32::NAN,
            -0.0,
            0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            6.0,
            -6.0,
            -3.0,
            3.0,
        ];
        for len in [0, 1, 7, 8, 16, 37, 100] {
            let values: Vec<f32> = (0..len)
                .map(|i| {
                    specials
                        .get(i % 11)
                        .copied()
                        .unwrap_or((i as f32 - 50.0) * 0.37)
                })
                .collect();
            let add: Vec<f32> = (0..len)
                .map(|i| ((i * 7) % 13) as f32 * 0.5 - 3.0)
                .collect();
            for activation in [
                Activation::Identity,
                Activation::Relu,
                Activation::Clip(0.0, 6.0),
                Activation::HardSwish,
                Activation::HardSigmoid(0.2, 0.5),
                Activation::HardSigmoid(-0.7, -0.0),
            ] {
                for z in [None, Some(&add[..])] {
                    let mut want = values.clone();
                    if let Some(z) = z {
                        want.iter_mut().zip(z).for_each(|(v, z)| *v += z);
                    }
                    activation.apply(&mut want);
                    for isa in Isa::supported() {
                        let mut got = values.clone();
                        // SAFETY: `supported` lists what this CPU has; `add` matches.
                        unsafe {
                            match (isa, hard(activation), activation.clamp_bounds()) {
                                (_, Some(h), _) => hard_on(isa, &mut got, z, activation, h),
                                (Isa::Avx512, None, Some((lo, hi))) => {
                                    clamp_avx512(&mut got, z, lo, hi)
                                }
                                (Isa::Avx2, None, Some((lo, hi))) => {
                                    clamp_avx2(&mut got, z, lo, hi)
                                }
                                (_, None, None) => {
                                    unreachable!("every listed activation has a kernel")
                                }
                            }
                        }
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(
                            bits(&got),
                            bits(&want),
                            "{isa:?} {activation:?} len {len} add {}",
                            z.is_some()
                        );
                    }
                }
            }
        }
    }
}
