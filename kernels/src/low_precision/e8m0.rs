//! float8 E8M0 (the microscaling scale type): eight exponent bits, no sign, no mantissa.
//! Bits `e` in `0..=254` are `2^(e - 127)`; `0xFF` is NaN. There is no zero.
//!
//! Conversion to E8M0 follows the ONNX `Cast` (opset 24+) text: the `round_mode` attribute
//! picks the power of two (`up`: away from zero, `down`: toward zero, `nearest`: ties up),
//! and `saturate` decides what lies outside `[2^-127, 2^127]` after rounding — the nearest
//! end of that range with `saturate`, NaN without (so zero and ±infinity are E8M0_MIN and
//! E8M0_MAX when saturating, NaN otherwise, as the operator's table says). The sign is
//! ignored (negative inputs are unspecified by ONNX; like the reference implementation we
//! use the magnitude).
//!
//! Where the ONNX reference implementation's bit trick differs from that text — it maps
//! ±infinity to NaN even when saturating, zero to `0x00` even without `saturate`, and rounds
//! every `f32` subnormal up to `2^-126` — we follow the operator text; the backend node tests
//! hold none of those inputs.

/// The `round_mode` attribute of `Cast` for float8 E8M0 targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum E8M0Rounding {
    /// The next power of two away from zero (the ONNX default).
    #[default]
    Up,
    /// The next power of two toward zero.
    Down,
    /// The nearer power of two, ties (`1.5 * 2^k`) going up.
    Nearest,
}

impl E8M0Rounding {
    /// Parses the attribute value (`"up"`, `"down"`, `"nearest"`).
    pub fn parse(s: &str) -> Option<E8M0Rounding> {
        match s {
            "up" => Some(E8M0Rounding::Up),
            "down" => Some(E8M0Rounding::Down),
            "nearest" => Some(E8M0Rounding::Nearest),
            _ => None,
        }
    }
}

/// The bits of NaN.
pub(crate) const NAN_BITS: u8 = 0xFF;
/// The bits of the largest value, `2^127`.
const MAX_BITS: u8 = 0xFE;
/// The bits of the smallest value, `2^-127`.
const MIN_BITS: u8 = 0x00;

/// The value of `bits`.
pub(crate) fn decode(bits: u8) -> f64 {
    if bits == NAN_BITS {
        f64::NAN
    } else {
        // 2^-127 .. 2^127 are all f64 normals.
        f64::from_bits(((i32::from(bits) - 127 + 1023) as u64) << 52)
    }
}

/// A positive magnitude as `floor(log2)`, whether it is a power of two, and whether its
/// significand is at least 1.5 (the bit after the leading one is set).
#[derive(Debug, Clone, Copy)]
struct Magnitude {
    log2: i32,
    exact: bool,
    upper_half: bool,
}

impl Magnitude {
    /// From an integer significand `sig > 0` scaled by `2^scale`.
    fn from_significand(sig: u128, scale: i32) -> Magnitude {
        let top = 127 - sig.leading_zeros() as i32;
        let below = sig & ((1u128 << top) - 1);
        Magnitude {
            log2: top + scale,
            exact: below == 0,
            upper_half: top >= 1 && (sig >> (top - 1)) & 1 == 1,
        }
    }
}

fn encode_magnitude(m: Option<Magnitude>, saturate: bool, rounding: E8M0Rounding) -> u8 {
    // `None`: zero, below every power of two.
    let k = m.map(|m| match rounding {
        E8M0Rounding::Down => m.log2,
        E8M0Rounding::Up => m.log2 + i32::from(!m.exact),
        E8M0Rounding::Nearest => m.log2 + i32::from(m.upper_half),
    });
    match k {
        Some(k) if (-127..=127).contains(&k) => (k + 127) as u8,
        Some(k) if k > 127 => {
            if saturate {
                MAX_BITS
            } else {
                NAN_BITS
            }
        }
        _ => {
            if saturate {
                MIN_BITS
            } else {
                NAN_BITS
            }
        }
    }
}

/// Encodes a float (its magnitude; NaN gives NaN, ±infinity is above every power of two).
pub(crate) fn encode_f64(x: f64, saturate: bool, rounding: E8M0Rounding) -> u8 {
    if x.is_nan() {
        return NAN_BITS;
    }
    let a = x.abs();
    if a.is_infinite() {
        return if saturate { MAX_BITS } else { NAN_BITS };
    }
    if a == 0.0 {
        return encode_magnitude(None, saturate, rounding);
    }
    let bits = a.to_bits();
    let exp = ((bits >> 52) & 0x7FF) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let m = if exp == 0 {
        Magnitude::from_significand(u128::from(frac), -1074)
    } else {
        Magnitude::from_significand(u128::from(frac | (1u64 << 52)), exp - 1075)
    };
    encode_magnitude(Some(m), saturate, rounding)
}

/// Encodes an integer exactly (its magnitude), without a detour through `f64`.
pub(crate) fn encode_int(v: i128, saturate: bool, rounding: E8M0Rounding) -> u8 {
    let a = v.unsigned_abs();
    let m = (a != 0).then(|| Magnitude::from_significand(a, 0));
    encode_magnitude(m, saturate, rounding)
}

#[cfg(test)]
mod tests {
    //! Expected values: `2^(e - 127)` per the OCP MX spec and the ONNX `Cast` table.
    use super::*;
    use E8M0Rounding::{Down, Nearest, Up};

    #[test]
    fn decodes_powers_of_two() {
        assert_eq!(decode(0x7F), 1.0);
        assert_eq!(decode(0x80), 2.0);
        assert_eq!(decode(0x7C), 0.125);
        assert_eq!(decode(0x00), 2f64.powi(-127));
        assert_eq!(decode(0xFE), 2f64.powi(127));
        assert!(decode(0xFF).is_nan());
    }

    #[test]
    fn round_modes() {
        // 1.1: up -> 2 (0x80), down -> 1 (0x7F), nearest -> 1.
        assert_eq!(encode_f64(1.1, true, Up), 0x80);
        assert_eq!(encode_f64(1.1, true, Down), 0x7F);
        assert_eq!(encode_f64(1.1, true, Nearest), 0x7F);
        // 1.5 is the tie between 1 and 2: nearest goes up.
        assert_eq!(encode_f64(1.5, true, Nearest), 0x80);
        assert_eq!(encode_f64(1.4999, true, Nearest), 0x7F);
        // Exact powers of two stay put in every mode; the sign is ignored.
        for r in [Up, Down, Nearest] {
            assert_eq!(encode_f64(0.25, true, r), 0x7D);
            assert_eq!(encode_f64(-0.25, true, r), 0x7D);
            assert_eq!(encode_int(8, true, r), 0x82);
        }
        // 0.124 (the node test's input): up -> 0.125 = 0x7C.
        assert_eq!(encode_f64(0.124, true, Up), 0x7C);
        // Integers are exact: 2^62 + 1 rounds up to 2^63 (0x7F + 63 = 0xBE).
        assert_eq!(encode_int((1 << 62) + 1, true, Up), 0xBE);
        assert_eq!(encode_int((1 << 62) + 1, true, Down), 0xBD);
    }

    #[test]
    fn range_ends_follow_the_cast_table() {
        // saturate + up: 0 -> E8M0_MIN, Inf -> E8M0_MAX, NaN -> NaN.
        assert_eq!(encode_f64(0.0, true, Up), 0x00);
        assert_eq!(encode_f64(f64::INFINITY, true, Up), 0xFE);
        assert_eq!(encode_f64(f64::NAN, true, Up), 0xFF);
        assert_eq!(encode_f64(f64::MAX, true, Up), 0xFE);
        // non-saturate + nearest: 0, Inf, out of range -> NaN.
        assert_eq!(encode_f64(0.0, false, Nearest), 0xFF);
        assert_eq!(encode_f64(f64::INFINITY, false, Nearest), 0xFF);
        assert_eq!(encode_f64(1.5 * 2f64.powi(127), false, Nearest), 0xFF);
        assert_eq!(encode_f64(1.4 * 2f64.powi(127), false, Nearest), 0xFE);
        assert_eq!(encode_f64(2f64.powi(-130), false, Nearest), 0xFF);
        // Between 2^-128 and 2^-127: up reaches 2^-127, down falls out of range. An exact
        // power of two below the range stays out of it in every mode.
        let x = 0.75 * 2f64.powi(-127);
        assert_eq!(encode_f64(x, false, Up), 0x00);
        assert_eq!(encode_f64(x, true, Down), 0x00);
        assert_eq!(encode_f64(x, false, Down), 0xFF);
        assert_eq!(encode_f64(2f64.powi(-130), false, Up), 0xFF);
        // 2^-127 itself (an f32 subnormal) is exact.
        assert_eq!(encode_f64(2f64.powi(-127), false, Up), 0x00);
        // The f64 subnormal 2^-1074 is itself a power of two, far below the range.
        assert_eq!(encode_f64(f64::from_bits(1), true, Up), 0x00);
        assert_eq!(encode_f64(f64::from_bits(1), false, Up), 0xFF);
    }
}
