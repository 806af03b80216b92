//! Operators on non-tensor values — sequences and optionals — and `Identity`, which passes any
//! value through. They run in the engine, not as [`spillway_kernels::Kernel`]s: kernels see only
//! tensors. Errors are `KernelError`s, wrapped with the node's name by the executor.

mod optional;
mod sequence;

use spillway_kernels::{DType, KernelError};

use crate::error::{Error, Result};
use crate::graph::{Node, ValueType};
use crate::value::Value;

/// The op types implemented here (default domain).
pub const VALUE_OPS: &[&str] = &[
    "ConcatFromSequence",
    "Identity",
    "Optional",
    "OptionalGetElement",
    "OptionalHasElement",
    "SequenceAt",
    "SequenceConstruct",
    "SequenceEmpty",
    "SequenceErase",
    "SequenceInsert",
    "SequenceLength",
    "SplitToSequence",
];

/// A compiled value operator.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueOp {
    /// Passes its input through, whatever its kind.
    Identity,
    /// Tensors → a sequence.
    SequenceConstruct,
    /// An empty sequence of `dtype`.
    SequenceEmpty {
        /// Element type.
        dtype: DType,
    },
    /// The tensor at a position.
    SequenceAt,
    /// A sequence with a tensor inserted.
    SequenceInsert,
    /// A sequence with a tensor removed.
    SequenceErase,
    /// The number of tensors.
    SequenceLength,
    /// Concatenates (or stacks) the tensors of a sequence.
    ConcatFromSequence {
        /// The axis (not yet normalized: it depends on the rank).
        axis: i64,
        /// Stack along a new axis instead of concatenating.
        new_axis: bool,
    },
    /// Splits a tensor into a sequence.
    SplitToSequence {
        /// The axis (not yet normalized).
        axis: i64,
        /// Keep the split axis when `split` is absent.
        keepdims: bool,
    },
    /// Wraps its input (or nothing) into an optional.
    Optional {
        /// The `type` attribute, when given.
        declared: Option<ValueType>,
    },
    /// Whether an optional holds an element.
    OptionalHasElement {
        /// Opset 18 also accepts tensors and sequences (always true).
        accepts_plain: bool,
    },
    /// The element of an optional.
    OptionalGetElement {
        /// Opset 18 also accepts tensors and sequences (passed through).
        accepts_plain: bool,
    },
}

fn bad_attr(name: &str, reason: String) -> KernelError {
    KernelError::BadAttribute {
        name: name.into(),
        reason,
    }
}

impl ValueOp {
    /// Compiles the node if it is a value operator; `None` for any other op.
    pub fn compile(node: &Node) -> Result<Option<ValueOp>> {
        let default_domain = node.domain.is_empty() || node.domain == "ai.onnx";
        if !default_domain || !VALUE_OPS.contains(&node.op_type.as_str()) {
            return Ok(None);
        }
        Self::build(node)
            .map(Some)
            .map_err(|cause| Error::Unsupported {
                node: node.name.clone(),
                op_type: node.op_type.clone(),
                opset: node.opset,
                cause,
            })
    }

    fn build(node: &Node) -> Result<ValueOp, KernelError> {
        let attrs = &node.attrs;
        let min_opset = match node.op_type.as_str() {
            "Identity" => 1,
            "Optional" | "OptionalHasElement" | "OptionalGetElement" => 15,
            _ => 11,
        };
        if node.opset < min_opset {
            return Err(KernelError::UnsupportedOpset {
                opset: node.opset,
                reason: format!("{} exists from opset {min_opset}", node.op_type),
            });
        }
        if node.op_type != "Optional"
            && let Some((name, _)) = node.type_attrs.first()
        {
            return Err(KernelError::UnsupportedAttribute {
                name: name.clone(),
                reason: "unknown attribute".into(),
            });
        }
        Ok(match node.op_type.as_str() {
            "Identity" => {
                attrs.only(&[])?;
                ValueOp::Identity
            }
            "SequenceConstruct" => {
                attrs.only(&[])?;
                ValueOp::SequenceConstruct
            }
            "SequenceEmpty" => {
                attrs.only(&["dtype"])?;
                // The default element type is float.
                let code = attrs.int("dtype", 1)?;
                let dtype = i32::try_from(code)
                    .ok()
                    .and_then(DType::from_onnx)
                    .ok_or_else(|| {
                        bad_attr(
                            "dtype",
                            format!("element type code {code} is not supported"),
                        )
                    })?;
                ValueOp::SequenceEmpty { dtype }
            }
            "SequenceAt" => {
                attrs.only(&[])?;
                ValueOp::SequenceAt
            }
            "SequenceInsert" => {
                attrs.only(&[])?;
                ValueOp::SequenceInsert
            }
            "SequenceErase" => {
                attrs.only(&[])?;
                ValueOp::SequenceErase
            }
            "SequenceLength" => {
                attrs.only(&[])?;
                ValueOp::SequenceLength
            }
            "ConcatFromSequence" => {
                attrs.only(&["axis", "new_axis"])?;
                let new_axis = match attrs.int("new_axis", 0)? {
                    0 => false,
                    1 => true,
                    v => return Err(bad_attr("new_axis", format!("must be 0 or 1, got {v}"))),
                };
                ValueOp::ConcatFromSequence {
                    axis: attrs.req_int("axis")?,
                    new_axis,
                }
            }
            "SplitToSequence" => {
                attrs.only(&["axis", "keepdims"])?;
                let keepdims = match attrs.int("keepdims", 1)? {
                    0 => false,
                    1 => true,
                    v => return Err(bad_attr("keepdims", format!("must be 0 or 1, got {v}"))),
                };
                ValueOp::SplitToSequence {
                    axis: attrs.int("axis", 0)?,
                    keepdims,
                }
            }
            "Optional" => {
                attrs.only(&[])?;
                let mut declared = None;
                for (name, ty) in &node.type_attrs {
                    if name != "type" {
                        return Err(KernelError::UnsupportedAttribute {
                            name: name.clone(),
                            reason: "unknown attribute".into(),
                        });
                    }
                    declared = Some(ty.clone());
                }
                if declared.is_none() && node.inputs.first().copied().flatten().is_none() {
                    return Err(bad_attr(
                        "type",
                        "an Optional without an input needs the 'type' attribute".into(),
                    ));
                }
                ValueOp::Optional { declared }
            }
            "OptionalHasElement" => {
                attrs.only(&[])?;
                ValueOp::OptionalHasElement {
                    accepts_plain: node.opset >= 18,
                }
            }
            "OptionalGetElement" => {
                attrs.only(&[])?;
                ValueOp::OptionalGetElement {
                    accepts_plain: node.opset >= 18,
                }
            }
            other => {
                return Err(KernelError::UnsupportedOp {
                    op_type: other.into(),
                    domain: node.domain.clone(),
                });
            }
        })
    }

    /// Runs on the node's inputs (`None` for an omitted optional input).
    pub fn run(&self, args: &[Option<&Value>]) -> Result<Vec<Value>, KernelError> {
        let value = match self {
            ValueOp::Identity => required(args, 0)?.clone(),
            ValueOp::SequenceConstruct => sequence::construct(args)?,
            ValueOp::SequenceEmpty { dtype } => sequence::empty(*dtype),
            ValueOp::SequenceAt => sequence::at(args)?,
            ValueOp::SequenceInsert => sequence::insert(args)?,
            ValueOp::SequenceErase => sequence::erase(args)?,
            ValueOp::SequenceLength => sequence::length(args)?,
            ValueOp::ConcatFromSequence { axis, new_axis } => {
                sequence::concat(args, *axis, *new_axis)?
            }
            ValueOp::SplitToSequence { axis, keepdims } => sequence::split(args, *axis, *keepdims)?,
            ValueOp::Optional { declared } => optional::wrap(args, declared.as_ref())?,
            ValueOp::OptionalHasElement { accepts_plain } => {
                optional::has_element(args, *accepts_plain)?
            }
            ValueOp::OptionalGetElement { accepts_plain } => {
                optional::get_element(args, *accepts_plain)?
            }
        };
        Ok(vec![value])
    }
}

/// Input `i`, which must be present.
fn required<'a>(args: &[Option<&'a Value>], i: usize) -> Result<&'a Value, KernelError> {
    args.get(i)
        .copied()
        .flatten()
        .ok_or_else(|| KernelError::Arity(format!("required input {i} is missing")))
}

fn kind_error(index: usize, expected: &str, got: &Value) -> KernelError {
    KernelError::ValueKind {
        index,
        expected: expected.into(),
        got: got.type_string(),
    }
}

#[cfg(test)]
mod tests;
