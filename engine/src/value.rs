//! [`Value`]: what flows between nodes and through the `Session` API — a tensor, or one of
//! ONNX's non-tensor values: a sequence of tensors (`seq(tensor(T))`) or an optional
//! (`optional(T)`), which holds one value or none.

use spillway_kernels::{DType, KernelError, Tensor};

/// A value of the ONNX data model.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A tensor.
    Tensor(Tensor),
    /// A sequence of tensors of one element type.
    Sequence(Sequence),
    /// An optional: `Some` holds the element, `None` is an empty optional.
    Optional(Option<Box<Value>>),
}

/// A sequence of tensors that share one element type (their shapes may differ). The element
/// type is kept even when the sequence is empty (`SequenceEmpty`'s `dtype`), so that inserting
/// a tensor of another type is an error.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    dtype: DType,
    tensors: Vec<Tensor>,
}

impl Sequence {
    /// A sequence of `tensors`, each of element type `dtype`.
    pub fn new(dtype: DType, tensors: Vec<Tensor>) -> Result<Self, KernelError> {
        if let Some((i, t)) = tensors.iter().enumerate().find(|(_, t)| t.dtype() != dtype) {
            return Err(KernelError::DTypeMismatch(format!(
                "sequence element {i} has element type {}, the sequence holds {dtype}",
                t.dtype()
            )));
        }
        Ok(Sequence { dtype, tensors })
    }

    /// A sequence of `tensors`, typed by its first element; `None` when `tensors` is empty (the
    /// element type is unknown) or the elements' types differ.
    pub fn from_tensors(tensors: Vec<Tensor>) -> Option<Self> {
        let dtype = tensors.first()?.dtype();
        Sequence::new(dtype, tensors).ok()
    }

    /// An empty sequence of element type `dtype`.
    pub fn empty(dtype: DType) -> Self {
        Sequence {
            dtype,
            tensors: Vec::new(),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The tensors, in order.
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    /// The tensors, in order.
    pub fn into_tensors(self) -> Vec<Tensor> {
        self.tensors
    }

    /// How many tensors.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// True when the sequence holds no tensor.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}

/// The tensors of `values`, in order, or the first value that is not a tensor.
pub fn all_tensors(values: impl IntoIterator<Item = Value>) -> Result<Vec<Tensor>, Value> {
    values
        .into_iter()
        .map(|v| match v {
            Value::Tensor(t) => Ok(t),
            other => Err(other),
        })
        .collect()
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}

impl From<Sequence> for Value {
    fn from(s: Sequence) -> Self {
        Value::Sequence(s)
    }
}

impl Value {
    /// An optional holding `value`.
    pub fn some(value: impl Into<Value>) -> Self {
        Value::Optional(Some(Box::new(value.into())))
    }

    /// An empty optional.
    pub fn none() -> Self {
        Value::Optional(None)
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The sequence, if this is one.
    pub fn as_sequence(&self) -> Option<&Sequence> {
        match self {
            Value::Sequence(s) => Some(s),
            _ => None,
        }
    }

    /// The tensor, or the value back when it is not a tensor.
    pub fn into_tensor(self) -> Result<Tensor, Value> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => Err(other),
        }
    }

    /// The ONNX type of the value as text: `tensor(float)`, `seq(tensor(int64))`,
    /// `optional(seq(tensor(float)))`; an empty optional is `optional(empty)` (it does not
    /// carry its element type).
    pub fn type_string(&self) -> String {
        match self {
            Value::Tensor(t) => format!("tensor({})", t.dtype()),
            Value::Sequence(s) => format!("seq(tensor({}))", s.dtype),
            Value::Optional(Some(v)) => format!("optional({})", v.type_string()),
            Value::Optional(None) => "optional(empty)".into(),
        }
    }

    /// Bytes held by the tensors in the value.
    pub fn byte_len(&self) -> usize {
        match self {
            Value::Tensor(t) => t.byte_len(),
            Value::Sequence(s) => s.tensors.iter().map(Tensor::byte_len).sum(),
            Value::Optional(v) => v.as_ref().map_or(0, |v| v.byte_len()),
        }
    }

    /// A copy that shares no buffer with `self` (a device's own memory).
    pub fn deep_copy(&self) -> Value {
        match self {
            Value::Tensor(t) => Value::Tensor(deep_copy_tensor(t)),
            Value::Sequence(s) => Value::Sequence(Sequence {
                dtype: s.dtype,
                tensors: s.tensors.iter().map(deep_copy_tensor).collect(),
            }),
            Value::Optional(v) => Value::Optional(v.as_ref().map(|v| Box::new(v.deep_copy()))),
        }
    }
}

/// A tensor copy that shares nothing with the original.
pub(crate) fn deep_copy_tensor(t: &Tensor) -> Tensor {
    spillway_kernels::dispatch_all!(t, a => spillway_kernels::Element::into_tensor(a.to_owned().into_shared()))
}
