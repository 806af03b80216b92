//! Decoding `TensorProto` into [`Tensor`]s: raw or typed fields, external data files.
//!
//! The low-precision types (float8, float4, 4- and 2-bit integers) are unpacked to one byte
//! per element (see `spillway_kernels::low_precision`): 4-bit types hold two elements per
//! byte and 2-bit types four, low bits first, in `raw_data` and `int32_data` alike.

use std::path::Path;

use half::{bf16, f16};
use spillway_kernels::low_precision::{self, packing};
use spillway_kernels::{DType, Element, Tensor};

use super::proto::TensorProto;
use crate::error::{Error, Result};

/// Decodes a tensor. `base_dir` resolves external data locations (relative to the model file);
/// `None` forbids external data (models loaded from memory).
pub fn decode_tensor(proto: &TensorProto, base_dir: Option<&Path>) -> Result<Tensor> {
    let name = proto.name();
    let dtype = DType::from_onnx(proto.data_type()).ok_or_else(|| {
        Error::InvalidModel(format!(
            "tensor '{name}': element type code {} is not supported",
            proto.data_type()
        ))
    })?;
    let shape = proto
        .dims
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<Vec<usize>, _>>()
        .map_err(|_| {
            Error::InvalidModel(format!(
                "tensor '{name}': negative dimension in {:?}",
                proto.dims
            ))
        })?;
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| Error::InvalidModel(format!("tensor '{name}': element count overflows")))?;
    let bad = |what: String| Error::InvalidModel(format!("tensor '{name}': {what}"));

    if proto.data_location() == super::proto::tensor_proto::DataLocation::External {
        let dir =
            base_dir.ok_or_else(|| bad("external data needs a model loaded from a file".into()))?;
        let bytes = read_external(proto, dir)?;
        return from_le_bytes(dtype, &shape, count, &bytes).map_err(bad);
    }
    if let Some(raw) = &proto.raw_data {
        return from_le_bytes(dtype, &shape, count, raw).map_err(bad);
    }
    if dtype.is_low_precision() {
        // One int32 per byte of packed data (one element for the 8-bit types).
        let bytes: Vec<u8> = proto.int32_data.iter().map(|&v| v as u8).collect();
        return from_packed(dtype, &shape, count, &bytes).map_err(bad);
    }
    let t = match dtype {
        DType::F32 => typed(&shape, count, proto.float_data.clone()),
        DType::F64 => typed(&shape, count, proto.double_data.clone()),
        DType::I64 => typed(&shape, count, proto.int64_data.clone()),
        DType::I32 => typed(&shape, count, proto.int32_data.clone()),
        DType::I16 => typed(
            &shape,
            count,
            proto.int32_data.iter().map(|&v| v as i16).collect(),
        ),
        DType::I8 => typed(
            &shape,
            count,
            proto.int32_data.iter().map(|&v| v as i8).collect(),
        ),
        DType::U16 => typed(
            &shape,
            count,
            proto.int32_data.iter().map(|&v| v as u16).collect(),
        ),
        DType::U8 => typed(
            &shape,
            count,
            proto.int32_data.iter().map(|&v| v as u8).collect(),
        ),
        DType::Bool => typed(
            &shape,
            count,
            proto.int32_data.iter().map(|&v| v != 0).collect(),
        ),
        DType::F16 => typed(
            &shape,
            count,
            proto
                .int32_data
                .iter()
                .map(|&v| f16::from_bits(v as u16))
                .collect(),
        ),
        DType::BF16 => typed(
            &shape,
            count,
            proto
                .int32_data
                .iter()
                .map(|&v| bf16::from_bits(v as u16))
                .collect(),
        ),
        DType::U32 => typed(
            &shape,
            count,
            proto.uint64_data.iter().map(|&v| v as u32).collect(),
        ),
        DType::U64 => typed(&shape, count, proto.uint64_data.clone()),
        DType::String => typed(
            &shape,
            count,
            proto
                .string_data
                .iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect(),
        ),
        low => return Err(bad(format!("{low} was decoded above"))),
    };
    t.map_err(bad)
}

/// Decodes packed codes of a low-precision type (exactly the bytes `count` elements need).
fn from_packed(
    dtype: DType,
    shape: &[usize],
    count: usize,
    bytes: &[u8],
) -> std::result::Result<Tensor, String> {
    let codes =
        packing::unpack(bytes, count, dtype.bits()).map_err(|e| format!("{dtype} data: {e}"))?;
    low_precision::from_codes(dtype, shape, codes).map_err(|e| e.to_string())
}

fn typed<T: Element>(
    shape: &[usize],
    count: usize,
    data: Vec<T>,
) -> std::result::Result<Tensor, String> {
    if data.len() != count {
        return Err(format!(
            "holds {} elements, its shape {shape:?} needs {count}",
            data.len()
        ));
    }
    Tensor::from_shape_vec(shape, data).map_err(|e| e.to_string())
}

/// Decodes little-endian bytes. `raw` may sit at any alignment (inline `raw_data` usually does
/// not start on a 4-byte boundary), so elements are read with `from_le_bytes`, never cast in place.
fn from_le_bytes(
    dtype: DType,
    shape: &[usize],
    count: usize,
    raw: &[u8],
) -> std::result::Result<Tensor, String> {
    let size = dtype.size_of();
    if dtype == DType::String {
        return Err("string tensors cannot use raw_data".into());
    }
    if dtype.is_low_precision() {
        return from_packed(dtype, shape, count, raw);
    }
    // The element count is checked for overflow, its size in bytes not yet.
    let Some(needed) = count.checked_mul(size) else {
        return Err(format!("shape {shape:?} of {dtype} overflows in bytes"));
    };
    if raw.len() != needed {
        return Err(format!(
            "raw data has {} bytes, shape {shape:?} of {dtype} needs {needed}",
            raw.len(),
        ));
    }
    macro_rules! le {
        ($t:ty, $n:expr, $conv:expr) => {
            typed::<$t>(
                shape,
                count,
                raw.chunks_exact($n)
                    .map(|c| $conv(c.try_into().expect("chunk size")))
                    .collect(),
            )
        };
    }
    match dtype {
        DType::F32 => le!(f32, 4, f32::from_le_bytes),
        DType::F64 => le!(f64, 8, f64::from_le_bytes),
        DType::I64 => le!(i64, 8, i64::from_le_bytes),
        DType::I32 => le!(i32, 4, i32::from_le_bytes),
        DType::I16 => le!(i16, 2, i16::from_le_bytes),
        DType::I8 => le!(i8, 1, i8::from_le_bytes),
        DType::U64 => le!(u64, 8, u64::from_le_bytes),
        DType::U32 => le!(u32, 4, u32::from_le_bytes),
        DType::U16 => le!(u16, 2, u16::from_le_bytes),
        DType::U8 => le!(u8, 1, u8::from_le_bytes),
        DType::Bool => le!(bool, 1, |b: [u8; 1]| b[0] != 0),
        DType::F16 => le!(f16, 2, f16::from_le_bytes),
        DType::BF16 => le!(bf16, 2, bf16::from_le_bytes),
        DType::String
        | DType::F8E4M3Fn
        | DType::F8E4M3FnUz
        | DType::F8E5M2
        | DType::F8E5M2FnUz
        | DType::U4
        | DType::I4
        | DType::F4E2M1
        | DType::F8E8M0
        | DType::U2
        | DType::I2 => Err(format!("{dtype} was decoded above")),
    }
}

fn read_external(proto: &TensorProto, dir: &Path) -> Result<Vec<u8>> {
    let name = proto.name();
    let entry = |key: &str| {
        proto
            .external_data
            .iter()
            .find(|e| e.key() == key)
            .map(|e| e.value().to_string())
    };
    let location = entry("location").ok_or_else(|| {
        Error::InvalidModel(format!("tensor '{name}': external data without a location"))
    })?;
    let rel = Path::new(&location);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(Error::InvalidModel(format!(
            "tensor '{name}': external data location '{location}' must stay inside the model's folder"
        )));
    }
    let parse = |key: &str| -> Result<Option<u64>> {
        entry(key)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| Error::InvalidModel(format!("tensor '{name}': bad {key} '{v}'")))
            })
            .transpose()
    };
    let offset = parse("offset")?.unwrap_or(0);
    let length = parse("length")?;
    let path = dir.join(rel);
    let io = |cause| Error::Io {
        path: path.display().to_string(),
        cause,
    };
    let file = std::fs::File::open(&path).map_err(io)?;
    // SAFETY: the file is only read; a concurrent writer could change the bytes under us,
    // which at worst yields wrong tensor values, never undefined behaviour in safe code we copy into.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let end = match length {
        Some(l) => start.saturating_add(usize::try_from(l).unwrap_or(usize::MAX)),
        None => map.len(),
    };
    map.get(start..end).map(<[u8]>::to_vec).ok_or_else(|| {
        Error::InvalidModel(format!(
            "tensor '{name}': external data range {start}..{end} is outside '{}' ({} bytes)",
            path.display(),
            map.len()
        ))
    })
}
