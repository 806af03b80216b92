//! The error every kernel returns.

use crate::DType;

/// Why a kernel could not be built or could not run.
///
/// Kernels know nothing of nodes; the engine wraps this with the node's name and op type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KernelError {
    /// The op type is not implemented at all.
    #[error("operator {op_type} (domain '{domain}') is not supported")]
    UnsupportedOp {
        /// ONNX op type.
        op_type: String,
        /// ONNX domain ("" for the default domain).
        domain: String,
    },
    /// The op exists but this opset version is not supported.
    #[error("opset {opset} is not supported for this operator: {reason}")]
    UnsupportedOpset {
        /// The opset the model imports for the op's domain.
        opset: i64,
        /// What is missing.
        reason: String,
    },
    /// An attribute, or an attribute value, that the kernel does not implement.
    #[error("attribute '{name}': {reason}")]
    UnsupportedAttribute {
        /// Attribute name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A required attribute is absent or has the wrong type.
    #[error("attribute '{name}': {reason}")]
    BadAttribute {
        /// Attribute name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An input's element type is not implemented for this op.
    #[error("input {index} has element type {dtype:?}, which this operator does not support")]
    UnsupportedDType {
        /// Input position.
        index: usize,
        /// The offending type.
        dtype: DType,
    },
    /// Inputs with mismatched element types.
    #[error("element type mismatch: {0}")]
    DTypeMismatch(String),
    /// A required input is missing, or too many were given.
    #[error("input arity: {0}")]
    Arity(String),
    /// Shapes that do not fit the operator's rules (broadcasting, ranks, axes, …).
    #[error("shape error: {0}")]
    Shape(String),
    /// An input value the operator rejects (index out of range, negative size, …).
    #[error("invalid input value: {0}")]
    InvalidValue(String),
    /// A tensor larger than the limit set for the run (or than memory can be asked for).
    #[error("resource limit: {0}")]
    ResourceLimit(String),
    /// An input of the wrong kind of value: a sequence or optional where the operator takes a
    /// tensor, or the other way round (ONNX's `seq(…)` / `optional(…)` types).
    #[error("input {index} is {got}, the operator takes {expected}")]
    ValueKind {
        /// Input position.
        index: usize,
        /// What the operator takes (`a tensor`, `a sequence`, …).
        expected: String,
        /// What it was given, as an ONNX type (`seq(tensor(float))`).
        got: String,
    },
}

/// Shorthand for results of kernel construction and execution.
pub type Result<T, E = KernelError> = std::result::Result<T, E>;
