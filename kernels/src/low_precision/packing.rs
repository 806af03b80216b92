//! Sub-byte packing of ONNX tensors: 4-bit types hold two elements per byte, 2-bit types
//! four, the first element in the least significant bits; a partial last byte is padded
//! with zero bits (`onnx.proto`, `TensorProto.raw_data` and `int32_data`).

/// Bytes that hold `count` elements of `bits` bits each (8, 4 or 2).
pub fn packed_len(count: usize, bits: u32) -> usize {
    count.div_ceil((8 / bits) as usize)
}

/// Splits `bytes` into `count` codes of `bits` bits each, least significant first. Fails
/// unless `bytes` has exactly [`packed_len`] bytes.
pub fn unpack(bytes: &[u8], count: usize, bits: u32) -> Result<Vec<u8>, String> {
    let need = packed_len(count, bits);
    if bytes.len() != need {
        return Err(format!(
            "{} bytes of packed {bits}-bit data, {count} elements need {need}",
            bytes.len()
        ));
    }
    if bits == 8 {
        return Ok(bytes.to_vec());
    }
    let per = (8 / bits) as usize;
    let mask = (1u8 << bits) - 1;
    Ok((0..count)
        .map(|i| (bytes[i / per] >> ((i % per) as u32 * bits)) & mask)
        .collect())
}

/// Packs codes of `bits` bits each (higher bits of a code are ignored), least significant
/// first, zero-padding the last byte.
pub fn pack(codes: &[u8], bits: u32) -> Vec<u8> {
    if bits == 8 {
        return codes.to_vec();
    }
    let per = (8 / bits) as usize;
    let mask = (1u8 << bits) - 1;
    codes
        .chunks(per)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .fold(0u8, |b, (j, &c)| b | ((c & mask) << (j as u32 * bits)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_bit_low_nibble_first() {
        // The int4 node test: [7, -8, -7, ...] is stored as 0x87, 0xA9, ...
        assert_eq!(unpack(&[0x87, 0xA9], 4, 4).unwrap(), [0x7, 0x8, 0x9, 0xA]);
        assert_eq!(unpack(&[0x87, 0x09], 3, 4).unwrap(), [0x7, 0x8, 0x9]);
        assert_eq!(pack(&[0x7, 0x8, 0x9], 4), [0x87, 0x09]);
        assert!(unpack(&[0x87], 3, 4).is_err());
        assert!(unpack(&[0x87, 0, 0], 3, 4).is_err());
    }

    #[test]
    fn two_bit_lsb_first() {
        // The int2 node test: [1, -2, -1, 0, 1, -2, -1] = codes [1, 2, 3, 0, 1, 2, 3]
        // is stored as 0b00_11_10_01 = 0x39, 0x39 (the last code slot padded).
        assert_eq!(unpack(&[0x39, 0x39], 7, 2).unwrap(), [1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(pack(&[1, 2, 3, 0, 1, 2, 3], 2), [0x39, 0x39]);
        assert_eq!(packed_len(7, 2), 2);
        assert_eq!(packed_len(8, 2), 2);
        assert_eq!(packed_len(0, 4), 0);
    }
}
