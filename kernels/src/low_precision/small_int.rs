//! The 4- and 2-bit integer formats (INT4, UINT4, INT2, UINT2): wrapping and rounding.
//!
//! The ONNX technical notes on int4 and int2 say: a cast to these types rounds to the
//! nearest integer, ties to even, then truncates (keeps the low bits, two's complement for
//! the signed ones). So -9.0 becomes int4 7 and 8 becomes -8, as the backend node tests
//! expect; integers wrap the same way, like every narrowing integer cast in ONNX.

/// Keeps the low `bits` bits of `v`, sign-extended when `signed`.
pub(crate) fn wrap(v: i128, bits: u32, signed: bool) -> i8 {
    let low = v & ((1i128 << bits) - 1);
    if signed && low >= 1 << (bits - 1) {
        (low - (1 << bits)) as i8
    } else {
        low as i8
    }
}

/// Rounds `x` to the nearest integer (ties to even), then [`wrap`]s it. NaN and ±infinity,
/// undefined by ONNX, give 0; so do magnitudes of `2^64` and more, whose low bits are all
/// zero anyway.
pub(crate) fn from_f64(x: f64, bits: u32, signed: bool) -> i8 {
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    if !x.is_finite() || x.abs() >= TWO_POW_64 {
        return 0;
    }
    wrap(x.round_ties_even() as i128, bits, signed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_like_twos_complement() {
        // int4: -9 = ...10111 -> 0111 = 7; 8 = 1000 -> -8; 15 -> -1.
        assert_eq!(wrap(-9, 4, true), 7);
        assert_eq!(wrap(8, 4, true), -8);
        assert_eq!(wrap(15, 4, true), -1);
        // uint4: -1 -> 15, 16 -> 0, -9 -> 7.
        assert_eq!(wrap(-1, 4, false), 15);
        assert_eq!(wrap(16, 4, false), 0);
        assert_eq!(wrap(-9, 4, false), 7);
        // int2: 2 = 10 -> -2, 3 -> -1, -3 = ...101 -> 01 = 1; uint2: -1 -> 3.
        assert_eq!(wrap(2, 2, true), -2);
        assert_eq!(wrap(3, 2, true), -1);
        assert_eq!(wrap(-3, 2, true), 1);
        assert_eq!(wrap(-1, 2, false), 3);
    }

    #[test]
    fn floats_round_half_to_even_then_wrap() {
        assert_eq!(from_f64(2.5, 4, true), 2);
        assert_eq!(from_f64(3.5, 4, true), 4);
        assert_eq!(from_f64(-2.5, 4, true), -2);
        assert_eq!(from_f64(2.7, 4, true), 3);
        assert_eq!(from_f64(7.5, 4, true), -8); // 8 wraps
        assert_eq!(from_f64(-9.0, 4, false), 7);
        assert_eq!(from_f64(1.5, 2, true), -2); // 2 wraps
        assert_eq!(from_f64(f64::NAN, 4, true), 0);
        assert_eq!(from_f64(f64::INFINITY, 2, false), 0);
        // 2^40 + 3 is exact in f64; its low four bits are 0011.
        assert_eq!(from_f64(1_099_511_627_779.0, 4, false), 3);
    }
}
