//! Bit-level encoding and decoding of the small floating-point formats: the four float8
//! formats (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) and float4 E2M1.
//!
//! One routine serves every format: a [`MiniFloat`] describes the exponent and mantissa
//! widths, the bias and how the format spells NaN, infinity and negative zero. Encoding
//! rounds the exact value of an `f64` to nearest, ties to even (a single rounding: every
//! narrower source converts to `f64` exactly), then applies the ONNX `Cast` rules for values
//! beyond the largest finite one.

/// How a format encodes its special values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Specials {
    /// IEEE 754 style (E5M2): the all-ones exponent holds ±infinity (mantissa 0) and NaN.
    Ieee,
    /// "Finite" (E4M3FN): no infinity; only `S.1111.111` is NaN; negative zero exists.
    Fn,
    /// "Finite, unsigned zero" (E4M3FNUZ, E5M2FNUZ): no infinity, no negative zero; the
    /// negative-zero pattern (sign bit alone) is the single NaN.
    FnUz,
    /// No NaN and no infinity at all (float4 E2M1).
    Finite,
}

/// A small binary floating-point format of `1 + exp_bits + man_bits` bits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MiniFloat {
    /// Exponent field width.
    pub exp_bits: u32,
    /// Mantissa (fraction) field width.
    pub man_bits: u32,
    /// Exponent bias.
    pub bias: i32,
    /// NaN / infinity / negative-zero conventions.
    pub specials: Specials,
}

/// float8 E4M3FN: bias 7, max 448 (`0x7E`), NaN `0x7F`/`0xFF`, no infinity.
pub(crate) const E4M3FN: MiniFloat = MiniFloat {
    exp_bits: 4,
    man_bits: 3,
    bias: 7,
    specials: Specials::Fn,
};
/// float8 E4M3FNUZ: bias 8, max 240 (`0x7F`), NaN `0x80`, no infinity, no -0.
pub(crate) const E4M3FNUZ: MiniFloat = MiniFloat {
    exp_bits: 4,
    man_bits: 3,
    bias: 8,
    specials: Specials::FnUz,
};
/// float8 E5M2: bias 15, max 57344 (`0x7B`), infinity `0x7C`, NaN `0x7D..=0x7F`.
pub(crate) const E5M2: MiniFloat = MiniFloat {
    exp_bits: 5,
    man_bits: 2,
    bias: 15,
    specials: Specials::Ieee,
};
/// float8 E5M2FNUZ: bias 16, max 57344 (`0x7F`), NaN `0x80`, no infinity, no -0.
pub(crate) const E5M2FNUZ: MiniFloat = MiniFloat {
    exp_bits: 5,
    man_bits: 2,
    bias: 16,
    specials: Specials::FnUz,
};
/// float4 E2M1: bias 1, values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no NaN, no infinity.
pub(crate) const E2M1: MiniFloat = MiniFloat {
    exp_bits: 2,
    man_bits: 1,
    bias: 1,
    specials: Specials::Finite,
};

/// `2^k` for `-1022 <= k <= 1023` (an `f64` normal), built from its bits.
fn pow2(k: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&k));
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `floor(log2(a))` for a positive normal `f64`.
fn floor_log2(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023
}

impl MiniFloat {
    fn sign_bit(self) -> u8 {
        1 << (self.exp_bits + self.man_bits)
    }

    fn man_mask(self) -> u8 {
        (1 << self.man_bits) - 1
    }

    fn exp_ones(self) -> u8 {
        (1 << self.exp_bits) - 1
    }

    /// Smallest normal exponent, `1 - bias`.
    fn emin(self) -> i32 {
        1 - self.bias
    }

    /// The bits (sign excluded) of the largest finite value.
    fn max_magnitude(self) -> u8 {
        let (e, m) = (self.exp_ones(), self.man_mask());
        match self.specials {
            Specials::Ieee => ((e - 1) << self.man_bits) | m,
            Specials::Fn => (e << self.man_bits) | (m - 1),
            Specials::FnUz | Specials::Finite => (e << self.man_bits) | m,
        }
    }

    /// The largest finite value.
    pub fn max_value(self) -> f64 {
        self.decode(self.max_magnitude())
    }

    /// The value of `bits` (the low `1 + exp_bits + man_bits` bits are read). NaN keeps the
    /// sign bit of the encoding.
    pub fn decode(self, bits: u8) -> f64 {
        let sign = bits & self.sign_bit() != 0;
        let mag = bits & (self.sign_bit() - 1);
        let exp = mag >> self.man_bits;
        let man = mag & self.man_mask();
        let signed = |v: f64| if sign { -v } else { v };
        match self.specials {
            Specials::FnUz if sign && mag == 0 => return -f64::NAN,
            Specials::Fn if mag == (self.exp_ones() << self.man_bits) | self.man_mask() => {
                return signed(f64::NAN);
            }
            Specials::Ieee if exp == self.exp_ones() => {
                return signed(if man == 0 { f64::INFINITY } else { f64::NAN });
            }
            _ => {}
        }
        let m = self.man_bits as i32;
        let v = if exp == 0 {
            f64::from(man) * pow2(self.emin() - m)
        } else {
            f64::from((1u16 << self.man_bits) | u16::from(man))
                * pow2(i32::from(exp) - self.bias - m)
        };
        signed(v)
    }

    /// Encodes `x`: round to nearest, ties to even, then the ONNX `Cast` rules. With
    /// `saturate`, ±infinity and values beyond the largest finite one become ±max; without,
    /// they become ±infinity (E5M2) or NaN (the formats without infinity). float4 E2M1
    /// always saturates (it has neither), and maps NaN to a zero of the opposite sign — what
    /// `ml_dtypes`, which writes the ONNX reference outputs, does.
    pub fn encode(self, x: f64, saturate: bool) -> u8 {
        let sign = if x.is_sign_negative() {
            self.sign_bit()
        } else {
            0
        };
        if x.is_nan() {
            return match self.specials {
                Specials::Ieee => {
                    sign | (self.exp_ones() << self.man_bits) | (1 << (self.man_bits - 1))
                }
                Specials::Fn => sign | (self.exp_ones() << self.man_bits) | self.man_mask(),
                Specials::FnUz => self.sign_bit(),
                Specials::Finite => sign ^ self.sign_bit(),
            };
        }
        let overflow = || {
            if saturate || self.specials == Specials::Finite {
                return sign | self.max_magnitude();
            }
            match self.specials {
                Specials::Ieee => sign | (self.exp_ones() << self.man_bits),
                Specials::Fn => sign | (self.exp_ones() << self.man_bits) | self.man_mask(),
                Specials::FnUz | Specials::Finite => self.sign_bit(),
            }
        };
        let a = x.abs();
        if a.is_infinite() {
            return overflow();
        }
        let m = self.man_bits as i32;
        let min_normal = pow2(self.emin());
        // The spacing of representable values around `a`; scaling by a power of two is exact.
        let e = if a >= min_normal {
            floor_log2(a)
        } else {
            self.emin()
        };
        let quantum = pow2(e - m);
        let r = (a / quantum).round_ties_even() * quantum;
        if r > self.max_value() {
            return overflow();
        }
        if r == 0.0 {
            return if self.specials == Specials::FnUz {
                0
            } else {
                sign
            };
        }
        let mag = if r < min_normal {
            (r / pow2(self.emin() - m)) as u8
        } else {
            let e = floor_log2(r);
            let man = (r / pow2(e - m)) as u32 - (1 << self.man_bits);
            (((e + self.bias) as u8) << self.man_bits) | man as u8
        };
        sign | mag
    }
}

#[cfg(test)]
mod tests {
    //! Expected bit patterns come from the ONNX float8/float4 technical notes and the
    //! `ml_dtypes` tables, worked by hand; none is taken from this code's output.
    use super::*;

    #[test]
    fn maxima_and_specials() {
        assert_eq!(E4M3FN.max_value(), 448.0);
        assert_eq!(E4M3FNUZ.max_value(), 240.0);
        assert_eq!(E5M2.max_value(), 57344.0);
        assert_eq!(E5M2FNUZ.max_value(), 57344.0);
        assert_eq!(E2M1.max_value(), 6.0);
        assert_eq!(E4M3FN.encode(448.0, true), 0x7E);
        assert_eq!(E4M3FNUZ.encode(240.0, true), 0x7F);
        assert_eq!(E5M2.encode(57344.0, true), 0x7B);
        assert_eq!(E5M2FNUZ.encode(57344.0, true), 0x7F);
        assert!(E4M3FN.decode(0x7F).is_nan() && E4M3FN.decode(0xFF).is_nan());
        assert!(E4M3FNUZ.decode(0x80).is_nan() && E5M2FNUZ.decode(0x80).is_nan());
        assert_eq!(E5M2.decode(0x7C), f64::INFINITY);
        assert_eq!(E5M2.decode(0xFC), f64::NEG_INFINITY);
        assert!(E5M2.decode(0x7D).is_nan() && E5M2.decode(0x7E).is_nan());
        // E4M3FN has no infinity: 0x78 is 256 (exponent 15 - 7 = 8).
        assert_eq!(E4M3FN.decode(0x78), 256.0);
        // FNUZ: 0x7F is a number (240 / 57344), not NaN.
        assert_eq!(E4M3FNUZ.decode(0x7F), 240.0);
    }

    #[test]
    fn decode_hand_checked_values() {
        // E4M3FN 0x38 = 0.0111.000: 2^(7-7) = 1.0; 0x2F = 0.0101.111: 2^-2 * 1.875 = 0.46875.
        assert_eq!(E4M3FN.decode(0x38), 1.0);
        assert_eq!(E4M3FN.decode(0x2F), 0.46875);
        // E4M3FNUZ 0x40 = 0.1000.000: 2^(8-8) = 1.0.
        assert_eq!(E4M3FNUZ.decode(0x40), 1.0);
        // E5M2 0x3C = 0.01111.00: 1.0; E5M2FNUZ 0x40: 1.0.
        assert_eq!(E5M2.decode(0x3C), 1.0);
        assert_eq!(E5M2FNUZ.decode(0x40), 1.0);
        // Smallest subnormals: E4M3FN 2^-9, E4M3FNUZ 2^-10, E5M2 2^-16, E5M2FNUZ 2^-17.
        assert_eq!(E4M3FN.decode(0x01), 2f64.powi(-9));
        assert_eq!(E4M3FNUZ.decode(0x01), 2f64.powi(-10));
        assert_eq!(E5M2.decode(0x01), 2f64.powi(-16));
        assert_eq!(E5M2FNUZ.decode(0x01), 2f64.powi(-17));
        // Negative zero where it exists.
        assert!(E4M3FN.decode(0x80) == 0.0 && E4M3FN.decode(0x80).is_sign_negative());
        assert!(E5M2.decode(0x80) == 0.0 && E5M2.decode(0x80).is_sign_negative());
        // float4: S.EE.M, all sixteen values.
        let f4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
        for (bits, &v) in f4.iter().enumerate() {
            assert_eq!(E2M1.decode(bits as u8), v);
            assert_eq!(E2M1.decode(bits as u8 | 0x8), -v);
        }
    }

    #[test]
    fn rounding_is_to_nearest_even() {
        // E4M3FN around 1.0 the spacing is 1/8: 1.0625 is a tie between 1.0 (0x38, even)
        // and 1.125 (0x39); 1.1875 ties between 1.125 (odd) and 1.25 (0x3A, even).
        assert_eq!(E4M3FN.encode(1.0625, true), 0x38);
        assert_eq!(E4M3FN.encode(1.1875, true), 0x3A);
        assert_eq!(E4M3FN.encode(1.0626, true), 0x39);
        // 464 ties between 448 (0x7E, even) and the would-be 480: stays 448 even unsaturated.
        assert_eq!(E4M3FN.encode(464.0, false), 0x7E);
        assert_eq!(E4M3FN.encode(465.0, false), 0x7F);
        assert_eq!(E4M3FN.encode(465.0, true), 0x7E);
        // E5M2: 61440 ties between 57344 (odd mantissa 11) and 65536: rounds up, overflows.
        assert_eq!(E5M2.encode(61440.0, false), 0x7C);
        assert_eq!(E5M2.encode(61439.0, false), 0x7B);
        // float4: 2.5 ties between 2 (0b100, even) and 3 (0b101); 5 ties between 4 (0b110,
        // even) and 6 (0b111).
        assert_eq!(E2M1.encode(2.5, true), 0x4);
        assert_eq!(E2M1.encode(5.0, true), 0x6);
        assert_eq!(E2M1.encode(0.25, true), 0x0);
        assert_eq!(E2M1.encode(0.75, true), 0x2);
        assert_eq!(E2M1.encode(-3.5, true), 0xE);
    }

    #[test]
    fn subnormals_round_correctly() {
        // E4M3FN subnormal spacing 2^-9: 3 * 2^-9 is 0x03; 2^-10 ties to 0 (even);
        // 1.5 * 2^-9 ties to 2 * 2^-9 = 0x02; just under the smallest normal rounds up to it.
        assert_eq!(E4M3FN.encode(3.0 * 2f64.powi(-9), true), 0x03);
        assert_eq!(E4M3FN.encode(2f64.powi(-10), true), 0x00);
        assert_eq!(E4M3FN.encode(-(2f64.powi(-10)), true), 0x80);
        assert_eq!(E4M3FN.encode(1.5 * 2f64.powi(-9), true), 0x02);
        assert_eq!(E4M3FN.encode(2f64.powi(-6) * 0.99, true), 0x08);
        // FNUZ has no negative zero: tiny negatives become +0.
        assert_eq!(E4M3FNUZ.encode(-1e-7, true), 0x00);
        assert_eq!(E5M2FNUZ.encode(-0.0, true), 0x00);
        assert_eq!(E5M2.encode(-1e-7, true), 0x80);
        assert_eq!(E5M2.encode(f64::MIN_POSITIVE / 4.0, true), 0x00);
    }

    #[test]
    fn saturation_rules_follow_the_cast_tables() {
        let inf = f64::INFINITY;
        // saturate = 1: ±Inf and out-of-range values clamp to ±max.
        assert_eq!(E4M3FN.encode(inf, true), 0x7E);
        assert_eq!(E4M3FN.encode(-1e6, true), 0xFE);
        assert_eq!(E4M3FNUZ.encode(-inf, true), 0xFF);
        assert_eq!(E5M2.encode(inf, true), 0x7B);
        assert_eq!(E5M2FNUZ.encode(1e6, true), 0x7F);
        // saturate = 0: E5M2 gives ±Inf, E4M3FN gives ±NaN, FNUZ gives its NaN.
        assert_eq!(E5M2.encode(inf, false), 0x7C);
        assert_eq!(E5M2.encode(-1e6, false), 0xFC);
        assert_eq!(E4M3FN.encode(inf, false), 0x7F);
        assert_eq!(E4M3FN.encode(-inf, false), 0xFF);
        assert_eq!(E4M3FNUZ.encode(1e6, false), 0x80);
        assert_eq!(E5M2FNUZ.encode(-inf, false), 0x80);
        // NaN: E4M3FN S.1111.111, E5M2 quiet NaN S.11111.10, FNUZ 0x80.
        assert_eq!(E4M3FN.encode(f64::NAN, true), 0x7F);
        assert_eq!(E4M3FN.encode(-f64::NAN, false), 0xFF);
        assert_eq!(E5M2.encode(f64::NAN, true), 0x7E);
        assert_eq!(E4M3FNUZ.encode(-f64::NAN, true), 0x80);
        // float4 always saturates, whatever the attribute; NaN becomes a zero.
        assert_eq!(E2M1.encode(inf, false), 0x7);
        assert_eq!(E2M1.encode(-9.0, false), 0xF);
        assert_eq!(E2M1.encode(f64::NAN, true), 0x8);
    }

    #[test]
    fn every_code_round_trips() {
        for f in [E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ] {
            for bits in 0..=255u8 {
                let v = f.decode(bits);
                if v.is_nan() {
                    continue;
                }
                assert_eq!(f.encode(v, false), bits, "{f:?} {bits:#04x} = {v}");
            }
        }
        for bits in 0..16u8 {
            assert_eq!(E2M1.encode(E2M1.decode(bits), true), bits);
        }
    }
}
