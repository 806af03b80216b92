//! `SequenceProto` / `OptionalProto` → [`Value`] (the backend tests' non-tensor data files).

use std::path::Path;

use spillway_kernels::DType;

use super::proto::{OptionalProto, SequenceProto, optional_proto, sequence_proto};
use super::tensor::decode_tensor;
use crate::error::{Error, Result};
use crate::graph::ValueType;
use crate::value::{Sequence, Value};

/// Decodes a sequence of tensors. An empty sequence carries no element type in the protobuf:
/// it takes the one `declared` gives, and is an error without one.
pub fn decode_sequence(
    p: &SequenceProto,
    base_dir: Option<&Path>,
    declared: Option<&ValueType>,
) -> Result<Sequence> {
    use sequence_proto::DataType;
    let name = p.name();
    let elem = p.elem_type;
    let tensor_or_open = [DataType::Tensor as i32, DataType::Undefined as i32];
    if elem.is_some_and(|e| !tensor_or_open.contains(&e))
        || !p.sequence_values.is_empty()
        || !p.map_values.is_empty()
        || !p.optional_values.is_empty()
        || !p.sparse_tensor_values.is_empty()
    {
        return Err(Error::InvalidModel(format!(
            "sequence '{name}': only sequences of dense tensors are supported"
        )));
    }
    let tensors = p
        .tensor_values
        .iter()
        .map(|t| decode_tensor(t, base_dir))
        .collect::<Result<Vec<_>>>()?;
    let declared_dtype = match declared {
        Some(ValueType::Sequence(e)) => match e.as_ref() {
            ValueType::Tensor { dtype, .. } => *dtype,
            _ => None,
        },
        _ => None,
    };
    let dtype: DType = match (tensors.first(), declared_dtype) {
        (Some(t), _) => t.dtype(),
        (None, Some(d)) => d,
        (None, None) => {
            return Err(Error::InvalidModel(format!(
                "sequence '{name}' is empty and no element type is declared for it"
            )));
        }
    };
    Sequence::new(dtype, tensors)
        .map_err(|e| Error::InvalidModel(format!("sequence '{name}': {e}")))
}

/// Decodes an optional: an empty one when no element is set.
pub fn decode_optional(
    p: &OptionalProto,
    base_dir: Option<&Path>,
    declared: Option<&ValueType>,
) -> Result<Value> {
    use optional_proto::DataType;
    let name = p.name();
    let inner = match declared {
        Some(ValueType::Optional(e)) => Some(e.as_ref()),
        _ => None,
    };
    if p.map_value.is_some() || p.sparse_tensor_value.is_some() || p.optional_value.is_some() {
        return Err(Error::InvalidModel(format!(
            "optional '{name}': only optionals of tensors and sequences are supported"
        )));
    }
    let value = match (&p.tensor_value, &p.sequence_value) {
        (Some(t), None) => Some(Value::Tensor(decode_tensor(t, base_dir)?)),
        (None, Some(s)) => Some(Value::Sequence(decode_sequence(s, base_dir, inner)?)),
        (None, None) => None,
        (Some(_), Some(_)) => {
            return Err(Error::InvalidModel(format!(
                "optional '{name}' holds both a tensor and a sequence"
            )));
        }
    };
    let elem = p.elem_type.filter(|&e| e != DataType::Undefined as i32);
    let consistent = match (&value, elem) {
        (_, None) => true,
        (Some(Value::Tensor(_)), Some(e)) => e == DataType::Tensor as i32,
        (Some(Value::Sequence(_)), Some(e)) => e == DataType::Sequence as i32,
        (None, _) => true,
        (Some(Value::Optional(_)), _) => false,
    };
    if !consistent {
        return Err(Error::InvalidModel(format!(
            "optional '{name}': its elem_type does not match the value it holds"
        )));
    }
    Ok(Value::Optional(value.map(Box::new)))
}

/// Decodes a serialized `TensorProto`, `SequenceProto` or `OptionalProto`, chosen by the
/// declared type of the value it feeds.
pub fn decode_value_bytes(
    bytes: &[u8],
    base_dir: Option<&Path>,
    declared: &ValueType,
) -> Result<Value> {
    use prost::Message;
    let decode_err = |e: prost::DecodeError| Error::Decode(e.to_string());
    Ok(match declared {
        ValueType::Tensor { .. } => {
            let p = super::proto::TensorProto::decode(bytes).map_err(decode_err)?;
            Value::Tensor(decode_tensor(&p, base_dir)?)
        }
        ValueType::Sequence(_) => {
            let p = SequenceProto::decode(bytes).map_err(decode_err)?;
            Value::Sequence(decode_sequence(&p, base_dir, Some(declared))?)
        }
        ValueType::Optional(_) => {
            let p = OptionalProto::decode(bytes).map_err(decode_err)?;
            decode_optional(&p, base_dir, Some(declared))?
        }
    })
}
