//! The optional operators: `Optional` (opset 15), `OptionalHasElement` and
//! `OptionalGetElement` (opset 15; from 18 they also accept tensors and sequences).

use spillway_kernels::{KernelError, Tensor};

use super::{kind_error, required};
use crate::graph::ValueType;
use crate::value::Value;

/// Whether `value` fits `ty`: kind and, where declared, element type.
fn fits(value: &Value, ty: &ValueType) -> bool {
    match (value, ty) {
        (Value::Tensor(t), ValueType::Tensor { dtype, .. }) => dtype.is_none_or(|d| d == t.dtype()),
        (Value::Sequence(s), ValueType::Sequence(e)) => match e.as_ref() {
            ValueType::Tensor { dtype, .. } => dtype.is_none_or(|d| d == s.dtype()),
            _ => false,
        },
        _ => false,
    }
}

pub(super) fn wrap(
    args: &[Option<&Value>],
    declared: Option<&ValueType>,
) -> Result<Value, KernelError> {
    match args.first().copied().flatten() {
        None => Ok(Value::none()),
        Some(v @ Value::Optional(_)) => Err(kind_error(
            0,
            "a tensor or a sequence (optionals do not nest)",
            v,
        )),
        Some(v) => {
            if let Some(ty) = declared
                && !fits(v, ty)
            {
                return Err(KernelError::DTypeMismatch(format!(
                    "the input is {}, the 'type' attribute says {ty}",
                    v.type_string()
                )));
            }
            Ok(Value::some(v.clone()))
        }
    }
}

pub(super) fn has_element(
    args: &[Option<&Value>],
    accepts_plain: bool,
) -> Result<Value, KernelError> {
    let has = match args.first().copied().flatten() {
        Some(Value::Optional(v)) => v.is_some(),
        Some(other) if !accepts_plain => {
            return Err(kind_error(0, "an optional (opset < 18)", other));
        }
        Some(_) => true,
        None if !accepts_plain => {
            return Err(KernelError::Arity(
                "OptionalHasElement needs its input before opset 18".into(),
            ));
        }
        None => false,
    };
    Ok(Value::Tensor(Tensor::scalar(has)))
}

pub(super) fn get_element(
    args: &[Option<&Value>],
    accepts_plain: bool,
) -> Result<Value, KernelError> {
    match required(args, 0)? {
        Value::Optional(Some(v)) => Ok(v.as_ref().clone()),
        Value::Optional(None) => Err(KernelError::InvalidValue(
            "OptionalGetElement of an empty optional".into(),
        )),
        other if !accepts_plain => Err(kind_error(0, "an optional (opset < 18)", other)),
        other => Ok(other.clone()),
    }
}
