//! The protocol's tensor datatypes and their encodings: raw little-endian bytes (the binary
//! tensor extension and gRPC's `raw_*_contents`), JSON arrays, and gRPC's typed contents.

use half::{bf16, f16};
use serde_json::Value as Json;
use spillway::{DType, Tensor};

use crate::error::ServeError;
use crate::proto::InferTensorContents;

/// A tensor datatype of the Open Inference Protocol, each the element type of an engine
/// [`DType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datatype {
    /// `BOOL` (one byte per element on the wire).
    Bool,
    /// `UINT8`.
    U8,
    /// `UINT16`.
    U16,
    /// `UINT32`.
    U32,
    /// `UINT64`.
    U64,
    /// `INT8`.
    I8,
    /// `INT16`.
    I16,
    /// `INT32`.
    I32,
    /// `INT64`.
    I64,
    /// `FP16`.
    F16,
    /// `FP32`.
    F32,
    /// `FP64`.
    F64,
    /// `BF16`.
    BF16,
    /// `BYTES`: the engine's strings (UTF-8 text).
    Bytes,
}

impl Datatype {
    /// Every datatype, in the protocol's order.
    pub const ALL: [Datatype; 14] = [
        Datatype::Bool,
        Datatype::U8,
        Datatype::U16,
        Datatype::U32,
        Datatype::U64,
        Datatype::I8,
        Datatype::I16,
        Datatype::I32,
        Datatype::I64,
        Datatype::F16,
        Datatype::F32,
        Datatype::F64,
        Datatype::BF16,
        Datatype::Bytes,
    ];

    /// The protocol's name (`FP32`, `INT64`, …).
    pub fn name(self) -> &'static str {
        match self {
            Datatype::Bool => "BOOL",
            Datatype::U8 => "UINT8",
            Datatype::U16 => "UINT16",
            Datatype::U32 => "UINT32",
            Datatype::U64 => "UINT64",
            Datatype::I8 => "INT8",
            Datatype::I16 => "INT16",
            Datatype::I32 => "INT32",
            Datatype::I64 => "INT64",
            Datatype::F16 => "FP16",
            Datatype::F32 => "FP32",
            Datatype::F64 => "FP64",
            Datatype::BF16 => "BF16",
            Datatype::Bytes => "BYTES",
        }
    }

    /// The datatype called `name`, if the protocol has one by that name.
    pub fn parse(name: &str) -> Option<Datatype> {
        Datatype::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Triton's model-configuration name (`TYPE_FP32`, `TYPE_STRING`, …).
    pub fn config_name(self) -> &'static str {
        match self {
            Datatype::Bool => "TYPE_BOOL",
            Datatype::U8 => "TYPE_UINT8",
            Datatype::U16 => "TYPE_UINT16",
            Datatype::U32 => "TYPE_UINT32",
            Datatype::U64 => "TYPE_UINT64",
            Datatype::I8 => "TYPE_INT8",
            Datatype::I16 => "TYPE_INT16",
            Datatype::I32 => "TYPE_INT32",
            Datatype::I64 => "TYPE_INT64",
            Datatype::F16 => "TYPE_FP16",
            Datatype::F32 => "TYPE_FP32",
            Datatype::F64 => "TYPE_FP64",
            Datatype::BF16 => "TYPE_BF16",
            Datatype::Bytes => "TYPE_STRING",
        }
    }

    /// The engine's element type.
    pub fn dtype(self) -> DType {
        match self {
            Datatype::Bool => DType::Bool,
            Datatype::U8 => DType::U8,
            Datatype::U16 => DType::U16,
            Datatype::U32 => DType::U32,
            Datatype::U64 => DType::U64,
            Datatype::I8 => DType::I8,
            Datatype::I16 => DType::I16,
            Datatype::I32 => DType::I32,
            Datatype::I64 => DType::I64,
            Datatype::F16 => DType::F16,
            Datatype::F32 => DType::F32,
            Datatype::F64 => DType::F64,
            Datatype::BF16 => DType::BF16,
            Datatype::Bytes => DType::String,
        }
    }

    /// The protocol datatype of an engine element type; `None` for the types the protocol
    /// lacks (float8, 4-bit and 2-bit types).
    pub fn from_dtype(dtype: DType) -> Option<Datatype> {
        Datatype::ALL.into_iter().find(|d| d.dtype() == dtype)
    }

    /// Bytes per element on the wire; `None` for `BYTES` (length-prefixed).
    pub fn size(self) -> Option<usize> {
        Some(match self {
            Datatype::Bool | Datatype::U8 | Datatype::I8 => 1,
            Datatype::U16 | Datatype::I16 | Datatype::F16 | Datatype::BF16 => 2,
            Datatype::U32 | Datatype::I32 | Datatype::F32 => 4,
            Datatype::U64 | Datatype::I64 | Datatype::F64 => 8,
            Datatype::Bytes => return None,
        })
    }
}

/// The datatype of a request's `datatype` field: a 400 naming the tensor when unknown.
pub fn parse_datatype(name: &str, tensor: &str) -> Result<Datatype, ServeError> {
    Datatype::parse(name).ok_or_else(|| {
        ServeError::BadRequest(format!(
            "input '{tensor}': unknown datatype '{name}' (the protocol's are: {})",
            Datatype::ALL.map(Datatype::name).join(", ")
        ))
    })
}

/// The element count of `shape`: a 400 for negative or overflowing dimensions.
pub fn element_count(shape: &[i64], tensor: &str) -> Result<(Vec<usize>, usize), ServeError> {
    let mut dims = Vec::with_capacity(shape.len());
    let mut count: usize = 1;
    for &d in shape {
        let d = usize::try_from(d).map_err(|_| {
            ServeError::BadRequest(format!(
                "input '{tensor}': shape {shape:?} has a negative dimension"
            ))
        })?;
        count = count.checked_mul(d).ok_or_else(|| {
            ServeError::BadRequest(format!("input '{tensor}': shape {shape:?} is too large"))
        })?;
        dims.push(d);
    }
    Ok((dims, count))
}

/// An element type with a fixed-size little-endian wire form.
trait Wire: Sized + Copy {
    const SIZE: usize;
    fn read(bytes: &[u8]) -> Self;
    fn write(self, out: &mut Vec<u8>);
    fn tensor(shape: &[usize], data: Vec<Self>) -> Result<Tensor, String>;
    fn elements(tensor: &Tensor) -> Option<Vec<Self>>;
}

macro_rules! wire {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(bytes: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(bytes);
                <$t>::from_le_bytes(a)
            }
            fn write(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn tensor(shape: &[usize], data: Vec<Self>) -> Result<Tensor, String> {
                Tensor::from_shape_vec(shape, data).map_err(|e| e.to_string())
            }
            fn elements(tensor: &Tensor) -> Option<Vec<Self>> {
                tensor.view::<$t>().ok().map(|v| v.iter().copied().collect())
            }
        }
    )*};
}
wire!(u8, u16, u32, u64, i8, i16, i32, i64, f16, f32, f64, bf16);

impl Wire for bool {
    const SIZE: usize = 1;
    fn read(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
    fn write(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    fn tensor(shape: &[usize], data: Vec<Self>) -> Result<Tensor, String> {
        Tensor::from_shape_vec(shape, data).map_err(|e| e.to_string())
    }
    fn elements(tensor: &Tensor) -> Option<Vec<Self>> {
        tensor
            .view::<bool>()
            .ok()
            .map(|v| v.iter().copied().collect())
    }
}

fn from_raw<T: Wire>(
    shape: &[usize],
    count: usize,
    raw: &[u8],
    name: &str,
) -> Result<Tensor, ServeError> {
    if count.checked_mul(T::SIZE) != Some(raw.len()) {
        return Err(ServeError::BadRequest(format!(
            "input '{name}': {} bytes of data, its shape {shape:?} needs {count} elements of {} bytes",
            raw.len(),
            T::SIZE
        )));
    }
    let data = raw.chunks_exact(T::SIZE).map(T::read).collect();
    T::tensor(shape, data).map_err(|e| ServeError::BadRequest(format!("input '{name}': {e}")))
}

fn to_raw<T: Wire>(tensor: &Tensor) -> Vec<u8> {
    let data = T::elements(tensor).unwrap_or_default();
    let mut out = Vec::with_capacity(data.len() * T::SIZE);
    for x in data {
        x.write(&mut out);
    }
    out
}

/// Reads a tensor from its raw wire form: row-major little-endian elements (`BOOL` one byte
/// each), `BYTES` as a 4-byte little-endian length before each element.
pub fn tensor_from_raw(
    datatype: Datatype,
    shape: &[i64],
    raw: &[u8],
    name: &str,
) -> Result<Tensor, ServeError> {
    let (dims, count) = element_count(shape, name)?;
    match datatype {
        Datatype::Bool => from_raw::<bool>(&dims, count, raw, name),
        Datatype::U8 => from_raw::<u8>(&dims, count, raw, name),
        Datatype::U16 => from_raw::<u16>(&dims, count, raw, name),
        Datatype::U32 => from_raw::<u32>(&dims, count, raw, name),
        Datatype::U64 => from_raw::<u64>(&dims, count, raw, name),
        Datatype::I8 => from_raw::<i8>(&dims, count, raw, name),
        Datatype::I16 => from_raw::<i16>(&dims, count, raw, name),
        Datatype::I32 => from_raw::<i32>(&dims, count, raw, name),
        Datatype::I64 => from_raw::<i64>(&dims, count, raw, name),
        Datatype::F16 => from_raw::<f16>(&dims, count, raw, name),
        Datatype::F32 => from_raw::<f32>(&dims, count, raw, name),
        Datatype::F64 => from_raw::<f64>(&dims, count, raw, name),
        Datatype::BF16 => from_raw::<bf16>(&dims, count, raw, name),
        Datatype::Bytes => {
            // Capacity from the data, not the claimed shape: each element takes 4 bytes at least.
            let mut strings = Vec::with_capacity(count.min(raw.len() / 4));
            let mut rest = raw;
            while !rest.is_empty() {
                let Some((len, tail)) = rest.split_first_chunk::<4>() else {
                    return Err(ServeError::BadRequest(format!(
                        "input '{name}': BYTES data ends inside an element's 4-byte length"
                    )));
                };
                let len = u32::from_le_bytes(*len) as usize;
                if tail.len() < len {
                    return Err(ServeError::BadRequest(format!(
                        "input '{name}': a BYTES element of {len} bytes runs past the data"
                    )));
                }
                strings.push(utf8(&tail[..len], name)?);
                rest = &tail[len..];
            }
            strings_tensor(&dims, count, strings, name)
        }
    }
}

fn utf8(bytes: &[u8], name: &str) -> Result<String, ServeError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| {
        ServeError::BadRequest(format!(
            "input '{name}': a BYTES element is not UTF-8 (the engine's string tensors hold text)"
        ))
    })
}

fn strings_tensor(
    dims: &[usize],
    count: usize,
    strings: Vec<String>,
    name: &str,
) -> Result<Tensor, ServeError> {
    if strings.len() != count {
        return Err(ServeError::BadRequest(format!(
            "input '{name}': {} BYTES elements, its shape {dims:?} needs {count}",
            strings.len()
        )));
    }
    Tensor::from_shape_vec(dims, strings)
        .map_err(|e| ServeError::BadRequest(format!("input '{name}': {e}")))
}

/// The protocol datatype of an output tensor: a 500 naming it when the protocol has none.
pub fn output_datatype(tensor: &Tensor, name: &str) -> Result<Datatype, ServeError> {
    Datatype::from_dtype(tensor.dtype()).ok_or_else(|| {
        ServeError::Internal(format!(
            "output '{name}' has element type {}, which the protocol cannot carry",
            tensor.dtype().name()
        ))
    })
}

/// The raw wire form of a tensor (see [`tensor_from_raw`]).
pub fn tensor_to_raw(tensor: &Tensor, datatype: Datatype) -> Vec<u8> {
    match datatype {
        Datatype::Bool => to_raw::<bool>(tensor),
        Datatype::U8 => to_raw::<u8>(tensor),
        Datatype::U16 => to_raw::<u16>(tensor),
        Datatype::U32 => to_raw::<u32>(tensor),
        Datatype::U64 => to_raw::<u64>(tensor),
        Datatype::I8 => to_raw::<i8>(tensor),
        Datatype::I16 => to_raw::<i16>(tensor),
        Datatype::I32 => to_raw::<i32>(tensor),
        Datatype::I64 => to_raw::<i64>(tensor),
        Datatype::F16 => to_raw::<f16>(tensor),
        Datatype::F32 => to_raw::<f32>(tensor),
        Datatype::F64 => to_raw::<f64>(tensor),
        Datatype::BF16 => to_raw::<bf16>(tensor),
        Datatype::Bytes => {
            let mut out = Vec::new();
            if let Ok(view) = tensor.view::<String>() {
                for s in view.iter() {
                    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                    out.extend_from_slice(s.as_bytes());
                }
            }
            out
        }
    }
}

/// Flattens a JSON `data` field (flat or nested arrays, or one scalar) in row-major order.
fn flatten<'a>(data: &'a Json, out: &mut Vec<&'a Json>) {
    match data {
        Json::Array(items) => items.iter().for_each(|x| flatten(x, out)),
        other => out.push(other),
    }
}

fn json_elements<T>(
    items: &[&Json],
    name: &str,
    what: &str,
    read: impl Fn(&Json) -> Option<T>,
) -> Result<Vec<T>, ServeError> {
    items
        .iter()
        .enumerate()
        .map(|(i, x)| {
            read(x).ok_or_else(|| {
                ServeError::BadRequest(format!("input '{name}': element {i} ({x}) is not {what}"))
            })
        })
        .collect()
}

fn int<T: TryFrom<i64>>(x: &Json) -> Option<T> {
    x.as_i64().and_then(|v| T::try_from(v).ok())
}

fn uint<T: TryFrom<u64>>(x: &Json) -> Option<T> {
    x.as_u64().and_then(|v| T::try_from(v).ok())
}

/// Reads a tensor from the JSON `data` of a request's input.
pub fn tensor_from_json(
    datatype: Datatype,
    shape: &[i64],
    data: &Json,
    name: &str,
) -> Result<Tensor, ServeError> {
    let (dims, count) = element_count(shape, name)?;
    let mut items = Vec::new();
    flatten(data, &mut items);
    if items.len() != count {
        return Err(ServeError::BadRequest(format!(
            "input '{name}': {} elements of data, its shape {shape:?} needs {count}",
            items.len()
        )));
    }
    let make = |r: Result<Tensor, String>| {
        r.map_err(|e| ServeError::BadRequest(format!("input '{name}': {e}")))
    };
    let n = name;
    match datatype {
        Datatype::Bool => make(bool::tensor(
            &dims,
            json_elements(&items, n, "a boolean", Json::as_bool)?,
        )),
        Datatype::U8 => make(u8::tensor(
            &dims,
            json_elements(&items, n, "a UINT8", uint::<u8>)?,
        )),
        Datatype::U16 => make(u16::tensor(
            &dims,
            json_elements(&items, n, "a UINT16", uint::<u16>)?,
        )),
        Datatype::U32 => make(u32::tensor(
            &dims,
            json_elements(&items, n, "a UINT32", uint::<u32>)?,
        )),
        Datatype::U64 => make(u64::tensor(
            &dims,
            json_elements(&items, n, "a UINT64", uint::<u64>)?,
        )),
        Datatype::I8 => make(i8::tensor(
            &dims,
            json_elements(&items, n, "an INT8", int::<i8>)?,
        )),
        Datatype::I16 => make(i16::tensor(
            &dims,
            json_elements(&items, n, "an INT16", int::<i16>)?,
        )),
        Datatype::I32 => make(i32::tensor(
            &dims,
            json_elements(&items, n, "an INT32", int::<i32>)?,
        )),
        Datatype::I64 => make(i64::tensor(
            &dims,
            json_elements(&items, n, "an INT64", int::<i64>)?,
        )),
        Datatype::F16 => make(f16::tensor(
            &dims,
            json_elements(&items, n, "a number", |x| x.as_f64().map(f16::from_f64))?,
        )),
        Datatype::F32 => make(f32::tensor(
            &dims,
            json_elements(&items, n, "a number", |x| x.as_f64().map(|v| v as f32))?,
        )),
        Datatype::F64 => make(f64::tensor(
            &dims,
            json_elements(&items, n, "a number", Json::as_f64)?,
        )),
        Datatype::BF16 => make(bf16::tensor(
            &dims,
            json_elements(&items, n, "a number", |x| x.as_f64().map(bf16::from_f64))?,
        )),
        Datatype::Bytes => {
            let strings = json_elements(&items, n, "a string", |x| x.as_str().map(str::to_string))?;
            strings_tensor(&dims, count, strings, name)
        }
    }
}

/// A tensor's elements as a flat JSON array (non-finite floats become `null`: JSON has no
/// NaN or infinity; ask for `binary_data` to receive them exactly).
pub fn tensor_to_json(tensor: &Tensor, datatype: Datatype) -> Json {
    fn all<T>(v: Option<Vec<T>>, f: impl Fn(T) -> Json) -> Json {
        Json::Array(v.unwrap_or_default().into_iter().map(f).collect())
    }
    let float = |x: f64| serde_json::Number::from_f64(x).map_or(Json::Null, Json::Number);
    match datatype {
        Datatype::Bool => all(bool::elements(tensor), Json::Bool),
        Datatype::U8 => all(u8::elements(tensor), Json::from),
        Datatype::U16 => all(u16::elements(tensor), Json::from),
        Datatype::U32 => all(u32::elements(tensor), Json::from),
        Datatype::U64 => all(u64::elements(tensor), Json::from),
        Datatype::I8 => all(i8::elements(tensor), Json::from),
        Datatype::I16 => all(i16::elements(tensor), Json::from),
        Datatype::I32 => all(i32::elements(tensor), Json::from),
        Datatype::I64 => all(i64::elements(tensor), Json::from),
        Datatype::F16 => all(f16::elements(tensor), |x| float(x.to_f64())),
        Datatype::F32 => all(f32::elements(tensor), |x| float(f64::from(x))),
        Datatype::F64 => all(f64::elements(tensor), float),
        Datatype::BF16 => all(bf16::elements(tensor), |x| float(x.to_f64())),
        Datatype::Bytes => Json::Array(
            tensor
                .view::<String>()
                .map(|v| v.iter().map(|s| Json::String(s.clone())).collect())
                .unwrap_or_default(),
        ),
    }
}

fn narrow<S: Copy, T: TryFrom<S>>(
    values: &[S],
    name: &str,
    what: &str,
) -> Result<Vec<T>, ServeError> {
    values
        .iter()
        .map(|&v| {
            T::try_from(v).map_err(|_| {
                ServeError::BadRequest(format!(
                    "input '{name}': a value is out of range for {what}"
                ))
            })
        })
        .collect()
}

/// Reads a tensor from gRPC's typed `contents` (the field its datatype names).
pub fn tensor_from_contents(
    datatype: Datatype,
    shape: &[i64],
    c: &InferTensorContents,
    name: &str,
) -> Result<Tensor, ServeError> {
    let (dims, count) = element_count(shape, name)?;
    let check = |len: usize| {
        if len == count {
            Ok(())
        } else {
            Err(ServeError::BadRequest(format!(
                "input '{name}': {len} elements in its contents, its shape {shape:?} needs {count}"
            )))
        }
    };
    let make = |r: Result<Tensor, String>| {
        r.map_err(|e| ServeError::BadRequest(format!("input '{name}': {e}")))
    };
    match datatype {
        Datatype::Bool => {
            check(c.bool_contents.len())?;
            make(bool::tensor(&dims, c.bool_contents.clone()))
        }
        Datatype::I8 | Datatype::I16 | Datatype::I32 => {
            check(c.int_contents.len())?;
            match datatype {
                Datatype::I8 => make(i8::tensor(&dims, narrow(&c.int_contents, name, "INT8")?)),
                Datatype::I16 => make(i16::tensor(&dims, narrow(&c.int_contents, name, "INT16")?)),
                _ => make(i32::tensor(&dims, c.int_contents.clone())),
            }
        }
        Datatype::I64 => {
            check(c.int64_contents.len())?;
            make(i64::tensor(&dims, c.int64_contents.clone()))
        }
        Datatype::U8 | Datatype::U16 | Datatype::U32 => {
            check(c.uint_contents.len())?;
            match datatype {
                Datatype::U8 => make(u8::tensor(&dims, narrow(&c.uint_contents, name, "UINT8")?)),
                Datatype::U16 => make(u16::tensor(
                    &dims,
                    narrow(&c.uint_contents, name, "UINT16")?,
                )),
                _ => make(u32::tensor(&dims, c.uint_contents.clone())),
            }
        }
        Datatype::U64 => {
            check(c.uint64_contents.len())?;
            make(u64::tensor(&dims, c.uint64_contents.clone()))
        }
        Datatype::F32 => {
            check(c.fp32_contents.len())?;
            make(f32::tensor(&dims, c.fp32_contents.clone()))
        }
        Datatype::F64 => {
            check(c.fp64_contents.len())?;
            make(f64::tensor(&dims, c.fp64_contents.clone()))
        }
        Datatype::F16 | Datatype::BF16 => Err(ServeError::BadRequest(format!(
            "input '{name}': {} has no typed contents; send it in raw_input_contents",
            datatype.name()
        ))),
        Datatype::Bytes => {
            check(c.bytes_contents.len())?;
            let strings = c
                .bytes_contents
                .iter()
                .map(|b| utf8(b, name))
                .collect::<Result<Vec<_>, _>>()?;
            strings_tensor(&dims, count, strings, name)
        }
    }
}

/// A tensor as gRPC's typed contents (`FP16` and `BF16` have none: `None`).
pub fn tensor_to_contents(tensor: &Tensor, datatype: Datatype) -> Option<InferTensorContents> {
    let mut c = InferTensorContents::default();
    fn widen<S: Copy, T: From<S>>(v: Option<Vec<S>>) -> Vec<T> {
        v.unwrap_or_default().into_iter().map(T::from).collect()
    }
    match datatype {
        Datatype::Bool => c.bool_contents = bool::elements(tensor).unwrap_or_default(),
        Datatype::I8 => c.int_contents = widen(i8::elements(tensor)),
        Datatype::I16 => c.int_contents = widen(i16::elements(tensor)),
        Datatype::I32 => c.int_contents = i32::elements(tensor).unwrap_or_default(),
        Datatype::I64 => c.int64_contents = i64::elements(tensor).unwrap_or_default(),
        Datatype::U8 => c.uint_contents = widen(u8::elements(tensor)),
        Datatype::U16 => c.uint_contents = widen(u16::elements(tensor)),
        Datatype::U32 => c.uint_contents = u32::elements(tensor).unwrap_or_default(),
        Datatype::U64 => c.uint64_contents = u64::elements(tensor).unwrap_or_default(),
        Datatype::F32 => c.fp32_contents = f32::elements(tensor).unwrap_or_default(),
        Datatype::F64 => c.fp64_contents = f64::elements(tensor).unwrap_or_default(),
        Datatype::F16 | Datatype::BF16 => return None,
        Datatype::Bytes => {
            c.bytes_contents = tensor
                .view::<String>()
                .map(|v| {
                    v.iter()
                        .map(|s| bytes::Bytes::from(s.clone().into_bytes()))
                        .collect()
                })
                .unwrap_or_default()
        }
    }
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_datatype_round_trips_through_raw_and_json() {
        for dt in Datatype::ALL {
            let shape = [2i64, 2];
            let json = match dt {
                Datatype::Bool => serde_json::json!([[true, false], [false, true]]),
                Datatype::Bytes => serde_json::json!(["a", "bc", "", "déf"]),
                Datatype::I8 | Datatype::I16 | Datatype::I32 | Datatype::I64 => {
                    serde_json::json!([1, -2, 3, -4])
                }
                Datatype::F16 | Datatype::BF16 | Datatype::F32 | Datatype::F64 => {
                    serde_json::json!([1.5, -2.0, 0.25, 8.0])
                }
                _ => serde_json::json!([1, 2, 3, 200]),
            };
            let t = tensor_from_json(dt, &shape, &json, "x").expect("json decodes");
            assert_eq!(t.dtype(), dt.dtype(), "{dt:?}");
            assert_eq!(t.shape(), &[2, 2]);
            let raw = tensor_to_raw(&t, dt);
            let back = tensor_from_raw(dt, &shape, &raw, "x").expect("raw decodes");
            assert_eq!(tensor_to_json(&back, dt), tensor_to_json(&t, dt), "{dt:?}");
            let flat: Vec<Json> = {
                let mut v = Vec::new();
                flatten(&json, &mut v);
                v.into_iter().cloned().collect()
            };
            assert_eq!(tensor_to_json(&t, dt), Json::Array(flat), "{dt:?}");
            if let Some(c) = tensor_to_contents(&t, dt) {
                let back = tensor_from_contents(dt, &shape, &c, "x").expect("contents decode");
                assert_eq!(tensor_to_raw(&back, dt), raw, "{dt:?}");
            }
        }
    }

    #[test]
    fn malformed_data_is_a_bad_request() {
        let bad = [
            tensor_from_raw(Datatype::F32, &[3], &[0; 8], "x"),
            tensor_from_raw(Datatype::F32, &[-1], &[], "x"),
            tensor_from_raw(Datatype::Bytes, &[1], &[5, 0, 0, 0, b'a'], "x"),
            tensor_from_raw(Datatype::Bytes, &[1], &[1, 0, 0, 0, 0xff], "x"),
            tensor_from_json(Datatype::I8, &[1], &serde_json::json!([300]), "x"),
            tensor_from_json(Datatype::U8, &[1], &serde_json::json!([-1]), "x"),
            tensor_from_json(Datatype::F32, &[2], &serde_json::json!([1.0]), "x"),
            tensor_from_json(Datatype::Bool, &[1], &serde_json::json!([1]), "x"),
            // Shapes claiming more than memory holds are refused, not allocated.
            tensor_from_raw(Datatype::I64, &[1 << 62], &[0; 8], "x"),
            tensor_from_raw(Datatype::Bytes, &[1 << 62], &[0; 4], "x"),
            tensor_from_json(Datatype::F32, &[1 << 62], &serde_json::json!([1.0]), "x"),
            tensor_from_raw(Datatype::U8, &[1 << 40, 1 << 40], &[], "x"),
        ];
        for (i, r) in bad.into_iter().enumerate() {
            assert!(
                matches!(r, Err(ServeError::BadRequest(_))),
                "case {i}: {r:?}"
            );
        }
    }

    #[test]
    fn names_map_both_ways() {
        for dt in Datatype::ALL {
            assert_eq!(Datatype::parse(dt.name()), Some(dt));
            assert_eq!(Datatype::from_dtype(dt.dtype()), Some(dt));
        }
        assert_eq!(Datatype::parse("FLOAT"), None);
    }
}
