//! Sequences of tensors: `CreateValue` makes one, `GetValueCount` and `GetValue` read one
//! (Spillway has no maps).

use std::ffi::c_int;

use ort_sys::{ONNXType, OrtAllocator, OrtErrorCode, OrtStatusPtr, OrtValue};

use crate::handle::{self, Handle};
use crate::status::{Result, Status, guard};
use crate::value::{TensorValue, ValueHandle};

/// `GetValueCount`: the length of a sequence.
pub(crate) unsafe extern "system" fn GetValueCount(
    value: *const OrtValue,
    out: *mut usize,
) -> OrtStatusPtr {
    guard("GetValueCount", || {
        // SAFETY: as in `IsTensor`.
        match unsafe { crate::value::value(value)? } {
            ValueHandle::Sequence { items, .. } => unsafe { handle::write(out, items.len()) },
            other => Err(Status::invalid(format!(
                "the value is {}, not a sequence or map",
                other.kind()
            ))),
        }
    })
}

/// `GetValue`: element `index` of a sequence, as a new value owned by the caller (it shares the
/// elements until either is written).
pub(crate) unsafe extern "system" fn GetValue(
    value: *const OrtValue,
    index: c_int,
    _allocator: *mut OrtAllocator,
    out: *mut *mut OrtValue,
) -> OrtStatusPtr {
    guard("GetValue", || {
        // SAFETY: as in `IsTensor`.
        let ValueHandle::Sequence { items, .. } = (unsafe { crate::value::value(value)? }) else {
            return Err(Status::new(
                OrtErrorCode::ORT_NOT_IMPLEMENTED,
                "GetValue reads sequences only (Spillway has no maps)",
            ));
        };
        let item = usize::try_from(index)
            .ok()
            .and_then(|i| items.get(i))
            .ok_or_else(|| Status::invalid(format!("index {index} of {} elements", items.len())))?;
        let element = ValueHandle::Tensor(TensorValue::owned(item.to_tensor()?));
        // SAFETY: the out-parameter is writable (the API's contract).
        unsafe { handle::write(out, element.into_raw()) }
    })
}

/// `CreateValue`: a sequence of copies of the given tensors (maps are not supported).
pub(crate) unsafe extern "system" fn CreateValue(
    values: *const *const OrtValue,
    len: usize,
    ty: ONNXType,
    out: *mut *mut OrtValue,
) -> OrtStatusPtr {
    guard("CreateValue", || {
        if ty != ONNXType::ONNX_TYPE_SEQUENCE {
            return Err(Status::new(
                OrtErrorCode::ORT_NOT_IMPLEMENTED,
                format!("values of type {ty:?}: Spillway makes sequences only (no maps)"),
            ));
        }
        // SAFETY: `len` live values, a writable `out` (the API's contract).
        let values = unsafe { handle::slice(values, len, "values")? };
        let items = values
            .iter()
            .map(|&v| {
                Ok(TensorValue::owned(
                    unsafe { crate::value::value(v)? }.tensor()?.to_tensor()?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let dtype = items
            .first()
            .map(TensorValue::dtype)
            .ok_or_else(|| Status::invalid("a sequence needs at least one element"))?;
        if let Some(other) = items.iter().find(|t| t.dtype() != dtype) {
            return Err(Status::invalid(format!(
                "sequence elements of types {dtype} and {}",
                other.dtype()
            )));
        }
        let sequence = ValueHandle::Sequence { dtype, items };
        // SAFETY: the out-parameter is writable (the API's contract).
        unsafe { handle::write(out, sequence.into_raw()) }
    })
}
