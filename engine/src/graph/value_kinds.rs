//! Kind inference: which values are sequences or optionals, from the operators that make
//! them. Tensor shape inference leaves those values alone (their `dtype` and `shape` stay
//! `None`); the tensors that sequence operators produce get their element type.

use spillway_kernels::DType;

use super::{Dim, Graph, Node, ValueKind, ValueType};

/// The type of a node's first output when the node makes or reads sequences and optionals;
/// `None` for other nodes, or when nothing is known.
pub(super) fn infer_output_type(graph: &Graph, node: &Node) -> Option<ValueType> {
    let default_domain = node.domain.is_empty() || node.domain == "ai.onnx";
    if !default_domain {
        return None;
    }
    let input_type = |i: usize| {
        node.inputs
            .get(i)
            .copied()
            .flatten()
            .map(|v| graph.value(v).value_type())
    };
    let elem_dtype = |ty: Option<ValueType>| match ty {
        Some(ValueType::Sequence(e)) => match *e {
            ValueType::Tensor { dtype, .. } => dtype,
            _ => None,
        },
        _ => None,
    };
    let sequence_of = |dtype: Option<DType>| {
        ValueType::Sequence(Box::new(ValueType::Tensor { dtype, shape: None }))
    };
    let tensor = |dtype: Option<DType>, shape: Option<Vec<Dim>>| ValueType::Tensor { dtype, shape };
    match node.op_type.as_str() {
        "SequenceConstruct" | "SplitToSequence" => {
            Some(sequence_of(input_type(0).and_then(|t| match t {
                ValueType::Tensor { dtype, .. } => dtype,
                _ => None,
            })))
        }
        "SequenceEmpty" => Some(sequence_of(
            i32::try_from(node.attrs.int("dtype", 1).ok()?)
                .ok()
                .and_then(DType::from_onnx),
        )),
        "SequenceInsert" | "SequenceErase" => Some(sequence_of(elem_dtype(input_type(0)))),
        "SequenceAt" | "ConcatFromSequence" => Some(tensor(elem_dtype(input_type(0)), None)),
        "SequenceLength" => Some(tensor(Some(DType::I64), Some(Vec::new()))),
        "OptionalHasElement" => Some(tensor(Some(DType::Bool), Some(Vec::new()))),
        "Optional" => {
            let declared = node
                .type_attrs
                .iter()
                .find(|(n, _)| n == "type")
                .map(|(_, t)| t.clone());
            let elem = input_type(0).or(declared)?;
            Some(ValueType::Optional(Box::new(elem)))
        }
        "OptionalGetElement" => match input_type(0)? {
            ValueType::Optional(e) => Some(*e),
            other => Some(other),
        },
        "Identity" => match input_type(0)? {
            t @ (ValueType::Sequence(_) | ValueType::Optional(_)) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

/// Records an inferred sequence/optional kind on `info` (which then describes no tensor), or
/// fills in a tensor's element type and shape where unknown. A declared kind is kept.
pub(super) fn apply(info: &mut super::ValueInfo, ty: ValueType) {
    match ty {
        ValueType::Tensor { dtype, shape } => {
            if !info.kind.is_tensor() {
                return;
            }
            if info.dtype.is_none() {
                info.dtype = dtype;
            }
            if info.shape.is_none() {
                info.shape = shape;
            }
        }
        ValueType::Sequence(e) => {
            if info.kind.is_tensor() {
                info.kind = ValueKind::Sequence(e);
                info.dtype = None;
                info.shape = None;
            }
        }
        ValueType::Optional(e) => {
            if info.kind.is_tensor() {
                info.kind = ValueKind::Optional(e);
                info.dtype = None;
                info.shape = None;
            }
        }
    }
}
