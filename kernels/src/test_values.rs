//! Reproducible pseudo-random test data (xorshift), shared by the kernels' unit tests.

/// `len` floats in `[-1, 1)` from `seed` (each seed its own sequence).
pub(crate) fn uniform(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}
