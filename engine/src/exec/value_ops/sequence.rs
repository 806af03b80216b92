//! The sequence operators (ONNX opset 11+): construct, empty, at, insert, erase, length,
//! ConcatFromSequence, SplitToSequence. Positions outside the spec's range are errors.

use ndarray::{Axis, Slice};
use spillway_kernels::{AttrValue, Attributes, DType, KernelError, NodeSpec, Tensor};

use super::{kind_error, required};
use crate::value::{Sequence, Value};

fn invalid(msg: String) -> KernelError {
    KernelError::InvalidValue(msg)
}

fn sequence_arg<'a>(args: &[Option<&'a Value>], i: usize) -> Result<&'a Sequence, KernelError> {
    match required(args, i)? {
        Value::Sequence(s) => Ok(s),
        other => Err(kind_error(i, "a sequence of tensors", other)),
    }
}

fn tensor_arg<'a>(args: &[Option<&'a Value>], i: usize) -> Result<&'a Tensor, KernelError> {
    match required(args, i)? {
        Value::Tensor(t) => Ok(t),
        other => Err(kind_error(i, "a tensor", other)),
    }
}

fn optional_tensor_arg<'a>(
    args: &[Option<&'a Value>],
    i: usize,
) -> Result<Option<&'a Tensor>, KernelError> {
    match args.get(i).copied().flatten() {
        None => Ok(None),
        Some(Value::Tensor(t)) => Ok(Some(t)),
        Some(other) => Err(kind_error(i, "a tensor", other)),
    }
}

/// A `position` input: one int32 or int64 element.
fn position(t: &Tensor, index: usize) -> Result<i64, KernelError> {
    if !matches!(t.dtype(), DType::I32 | DType::I64) {
        return Err(KernelError::UnsupportedDType {
            index,
            dtype: t.dtype(),
        });
    }
    match t.to_i64_vec()?.as_slice() {
        [p] => Ok(*p),
        _ => Err(invalid(format!(
            "position must be a scalar, it has shape {:?}",
            t.shape()
        ))),
    }
}

/// `p` in `[-n, n - 1]` (or `[-n, n]` when `end_ok`), made non-negative.
fn resolve(p: i64, n: usize, end_ok: bool) -> Result<usize, KernelError> {
    let n_i = n as i64;
    let hi = if end_ok { n_i } else { n_i - 1 };
    if p < -n_i || p > hi {
        return Err(invalid(format!(
            "position {p} is out of range [{}, {hi}] for a sequence of {n} tensors",
            -n_i
        )));
    }
    Ok(if p < 0 { p + n_i } else { p } as usize)
}

/// `axis` in `[-rank, rank - 1]`, made non-negative.
fn resolve_axis(axis: i64, rank: usize) -> Result<usize, KernelError> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(invalid(format!(
            "axis {axis} is out of range [{}, {}] for rank {rank}",
            -r,
            r - 1
        )));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

pub(super) fn construct(args: &[Option<&Value>]) -> Result<Value, KernelError> {
    if args.is_empty() {
        return Err(KernelError::Arity(
            "SequenceConstruct needs at least one tensor".into(),
        ));
    }
    let tensors = (0..args.len())
        .map(|i| tensor_arg(args, i).cloned())
        .collect::<Result<Vec<_>, _>>()?;
    let dtype = tensors[0].dtype();
    Ok(Value::Sequence(Sequence::new(dtype, tensors)?))
}

pub(super) fn empty(dtype: DType) -> Value {
    Value::Sequence(Sequence::empty(dtype))
}

pub(super) fn at(args: &[Option<&Value>]) -> Result<Value, KernelError> {
    let seq = sequence_arg(args, 0)?;
    let p = resolve(position(tensor_arg(args, 1)?, 1)?, seq.len(), false)?;
    Ok(Value::Tensor(seq.tensors()[p].clone()))
}

pub(super) fn insert(args: &[Option<&Value>]) -> Result<Value, KernelError> {
    let seq = sequence_arg(args, 0)?;
    let tensor = tensor_arg(args, 1)?;
    if tensor.dtype() != seq.dtype() {
        return Err(KernelError::DTypeMismatch(format!(
            "cannot insert a {} tensor into a sequence of {}",
            tensor.dtype(),
            seq.dtype()
        )));
    }
    let p = match optional_tensor_arg(args, 2)? {
        Some(t) => resolve(position(t, 2)?, seq.len(), true)?,
        None => seq.len(),
    };
    let mut tensors = seq.tensors().to_vec();
    tensors.insert(p, tensor.clone());
    Ok(Value::Sequence(Sequence::new(seq.dtype(), tensors)?))
}

pub(super) fn erase(args: &[Option<&Value>]) -> Result<Value, KernelError> {
    let seq = sequence_arg(args, 0)?;
    let p = match optional_tensor_arg(args, 1)? {
        Some(t) => position(t, 1)?,
        None => -1,
    };
    let p = resolve(p, seq.len(), false)?;
    let mut tensors = seq.tensors().to_vec();
    tensors.remove(p);
    Ok(Value::Sequence(Sequence::new(seq.dtype(), tensors)?))
}

pub(super) fn length(args: &[Option<&Value>]) -> Result<Value, KernelError> {
    let seq = sequence_arg(args, 0)?;
    Ok(Value::Tensor(Tensor::scalar(seq.len() as i64)))
}

/// `ConcatFromSequence`: numpy.concatenate, or numpy.stack with `new_axis`.
pub(super) fn concat(
    args: &[Option<&Value>],
    axis: i64,
    new_axis: bool,
) -> Result<Value, KernelError> {
    let seq = sequence_arg(args, 0)?;
    let first = seq
        .tensors()
        .first()
        .ok_or_else(|| invalid("ConcatFromSequence of an empty sequence".into()))?;
    let rank = first.rank();
    let (axis, parts) = if new_axis {
        // The output has one more axis; `axis` may name the new last one.
        let axis = resolve_axis(axis, rank + 1)?;
        let parts = seq
            .tensors()
            .iter()
            .map(|t| {
                let mut shape = t.shape().to_vec();
                if axis > shape.len() {
                    return Err(KernelError::Shape(format!(
                        "sequence elements have different ranks ({rank} and {})",
                        shape.len()
                    )));
                }
                shape.insert(axis, 1);
                t.reshaped(&shape)
            })
            .collect::<Result<Vec<_>, _>>()?;
        (axis, parts)
    } else {
        (resolve_axis(axis, rank)?, seq.tensors().to_vec())
    };
    let attrs = Attributes::new().with("axis", AttrValue::Int(axis as i64));
    let spec = NodeSpec {
        op_type: "Concat",
        domain: "",
        opset: 13,
        attrs: &attrs,
        num_inputs: parts.len(),
        num_outputs: 1,
        options: Default::default(),
    };
    let kernel = spillway_kernels::cpu::build(&spec)?;
    let inputs: Vec<Option<&Tensor>> = parts.iter().map(Some).collect();
    let mut out = kernel.run(&inputs)?;
    match (out.pop(), out.is_empty()) {
        (Some(t), true) => Ok(Value::Tensor(t)),
        _ => Err(invalid("Concat returned other than one output".into())),
    }
}

/// `SplitToSequence`: parts of size 1 (squeezed unless `keepdims`), of a scalar `split`
/// (the last part may be shorter), or of the lengths a 1-D `split` lists.
pub(super) fn split(
    args: &[Option<&Value>],
    axis: i64,
    keepdims: bool,
) -> Result<Value, KernelError> {
    let input = tensor_arg(args, 0)?;
    let axis = resolve_axis(axis, input.rank())?;
    let dim = input.shape()[axis];
    let split = optional_tensor_arg(args, 1)?;
    let lengths: Vec<usize> = match split {
        None => vec![1; dim],
        Some(s) => {
            if !matches!(s.dtype(), DType::I32 | DType::I64) {
                return Err(KernelError::UnsupportedDType {
                    index: 1,
                    dtype: s.dtype(),
                });
            }
            let values = s.to_i64_vec()?;
            match s.rank() {
                0 => {
                    let size = values[0];
                    if size <= 0 {
                        return Err(invalid(format!("split must be positive, got {size}")));
                    }
                    let size = size as usize;
                    let mut lengths = vec![size; dim / size];
                    if dim % size > 0 {
                        lengths.push(dim % size);
                    }
                    lengths
                }
                1 => {
                    // The spec says "positive"; zero-length parts are accepted, as Split and
                    // ONNX Runtime 1.31 accept them (an empty part along the axis).
                    if let Some(v) = values.iter().find(|&&v| v < 0) {
                        return Err(invalid(format!(
                            "split lengths must not be negative, got {v}"
                        )));
                    }
                    let total: i64 = values.iter().sum();
                    if total != dim as i64 {
                        return Err(invalid(format!(
                            "split lengths {values:?} sum to {total}, the axis has {dim}"
                        )));
                    }
                    values.iter().map(|&v| v as usize).collect()
                }
                r => {
                    return Err(invalid(format!(
                        "split must be a scalar or 1-D, it has rank {r}"
                    )));
                }
            }
        }
    };
    let squeeze = split.is_none() && !keepdims;
    let mut parts = Vec::with_capacity(lengths.len());
    let mut start = 0;
    for len in lengths {
        let part = slice_axis(input, axis, start, len);
        start += len;
        parts.push(if squeeze {
            let mut shape = part.shape().to_vec();
            shape.remove(axis);
            part.reshaped(&shape)?
        } else {
            part
        });
    }
    Ok(Value::Sequence(Sequence::new(input.dtype(), parts)?))
}

/// `len` entries of `t` along `axis` from `start` (in range by construction), copied.
fn slice_axis(t: &Tensor, axis: usize, start: usize, len: usize) -> Tensor {
    spillway_kernels::dispatch_all!(t, a => spillway_kernels::Element::into_tensor(
        a.slice_axis(Axis(axis), Slice::from(start..start + len)).to_owned().into_shared()
    ))
}
