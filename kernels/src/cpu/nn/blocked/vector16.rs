//! One block's 16 channels as a vector: one zmm register on AVX-512, two ymm registers on
//! AVX2. The blocked kernels are written once over [`Vector16`] and instantiated in a function
//! that enables the instruction set: every method is `#[inline(always)]` without a
//! `#[target_feature]` of its own, so it takes its caller's when it is inlined there (called
//! out of line, it would not have the instructions).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Sixteen `f32` lanes. Every method's safety contract: the CPU has the type's instruction
/// set, the caller enables it, and pointers are valid for 16 floats.
#[cfg(target_arch = "x86_64")]
pub(crate) trait Vector16: Copy {
    /// Loads 16 floats from `p` (unaligned).
    unsafe fn load(p: *const f32) -> Self;
    /// Stores the lanes at `p` (unaligned).
    unsafe fn store(self, p: *mut f32);
    /// Every lane `v`.
    unsafe fn splat(v: f32) -> Self;
    /// `max(self, other)` lane by lane as x86 computes it: `other` where either is NaN or
    /// both are zeros.
    unsafe fn max(self, other: Self) -> Self;
    /// `min(self, other)` lane by lane, `other` likewise on NaN and zeros.
    unsafe fn min(self, other: Self) -> Self;
    /// `self + other`.
    unsafe fn add(self, other: Self) -> Self;
    /// `self − other`.
    unsafe fn sub(self, other: Self) -> Self;
    /// `self · other`.
    unsafe fn mul(self, other: Self) -> Self;
    /// `self · b + c`, rounded once.
    unsafe fn mul_add(self, b: Self, c: Self) -> Self;
    /// `c − self · b`, rounded once.
    unsafe fn neg_mul_add(self, b: Self, c: Self) -> Self;
}

/// One zmm register (AVX-512F).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Zmm(__m512);

/// Two ymm registers (AVX2 + FMA): lanes 0–7 and 8–15.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct Ymm2([__m256; 2]);

#[cfg(target_arch = "x86_64")]
impl Vector16 for Zmm {
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the trait's contract.
        Zmm(unsafe { _mm512_loadu_ps(p) })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the trait's contract.
        unsafe { _mm512_storeu_ps(p, self.0) }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        // SAFETY: the trait's contract.
        Zmm(unsafe { _mm512_set1_ps(v) })
    }
    #[inline(always)]
    unsafe fn max(self, other: Self) -> Self {
        // SAFETY: the trait's contract.
        Zmm(unsafe { _mm512_max_ps(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn min(self, other: Self) -> Self {
        // SAFETY: the trait's contract.
        Zmm(unsafe { _mm512_min_ps(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn add(self, other: Self) -> Self {
        // SAFETY: the trait's contract.
        Zmm(unsafe { _mm512_add_ps(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn sub(self, other: Self) -> Self {
        // SAFETY: the trait's contract.
        Zmm(unsafe { _mm512_sub_ps(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn mul(self, other: Self) -> Self {
        // SAFETY: the trait's contract.
        Zmm(unsafe { _mm512_mul_ps(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: the trait's contract.
        Zmm(unsafe { _mm512_fmadd_ps(self.0, b.0, c.0) })
    }
    #[inline(always)]
    unsafe fn neg_mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: the trait's contract.
        Zmm(unsafe { _mm512_fnmadd_ps(self.0, b.0, c.0) })
    }
}

/// `Ymm2` lane by lane: `f` on each half.
#[cfg(target_arch = "x86_64")]
macro_rules! halves {
    ($a:expr, $b:expr, $f:ident) => {
        Ymm2([$f($a.0[0], $b.0[0]), $f($a.0[1], $b.0[1])])
    };
    ($a:expr, $b:expr, $c:expr, $f:ident) => {
        Ymm2([$f($a.0[0], $b.0[0], $c.0[0]), $f($a.0[1], $b.0[1], $c.0[1])])
    };
}

#[cfg(target_arch = "x86_64")]
impl Vector16 for Ymm2 {
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the trait's contract.
        unsafe { Ymm2([_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))]) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the trait's contract.
        unsafe {
            _mm256_storeu_ps(p, self.0[0]);
            _mm256_storeu_ps(p.add(8), self.0[1]);
        }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        // SAFETY: the trait's contract.
        let v = unsafe { _mm256_set1_ps(v) };
        Ymm2([v, v])
    }
    #[inline(always)]
    unsafe fn max(self, other: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { halves!(self, other, _mm256_max_ps) }
    }
    #[inline(always)]
    unsafe fn min(self, other: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { halves!(self, other, _mm256_min_ps) }
    }
    #[inline(always)]
    unsafe fn add(self, other: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { halves!(self, other, _mm256_add_ps) }
    }
    #[inline(always)]
    unsafe fn sub(self, other: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { halves!(self, other, _mm256_sub_ps) }
    }
    #[inline(always)]
    unsafe fn mul(self, other: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { halves!(self, other, _mm256_mul_ps) }
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { halves!(self, b, c, _mm256_fmadd_ps) }
    }
    #[inline(always)]
    unsafe fn neg_mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { halves!(self, b, c, _mm256_fnmadd_ps) }
    }
}
