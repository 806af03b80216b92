//! The engine's error type.

use spillway_kernels::{DType, KernelError};

/// Everything that can go wrong loading or running a model.
///
/// New variants may come in minor releases: match the ones you handle and keep a `_` arm.
/// Variants that wrap another error expose it through [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model file (or an external data file) could not be read.
    #[error("cannot read {path}: {cause}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        cause: std::io::Error,
    },
    /// The bytes are not a valid ONNX protobuf message.
    #[error("malformed ONNX protobuf: {0}")]
    Decode(String),
    /// The bytes are not a `.npy` array of a supported element type.
    #[error("malformed .npy data: {0}")]
    Npy(String),
    /// The protobuf decoded but does not describe a valid model.
    #[error("invalid model: {0}")]
    InvalidModel(String),
    /// A run went past one of its limits (a `Loop`'s iterations, its time).
    #[error("resource limit: {0}")]
    ResourceLimit(String),
    /// A node that breaks its operator's definition (input or output count, attributes,
    /// shapes): found at load, before the model runs.
    #[error("invalid model: node '{node}' ({op_type}) {rule}")]
    InvalidNode {
        /// Node name (or a generated `op_type#index` when the model has none).
        node: String,
        /// ONNX op type.
        op_type: String,
        /// The rule it breaks.
        rule: String,
    },
    /// A node the kernels cannot build: unsupported op, opset, attribute or type.
    #[error("node '{node}' ({op_type}, opset {opset}): {cause}")]
    Unsupported {
        /// Node name (or a generated `op_type#index` when the model has none).
        node: String,
        /// ONNX op type.
        op_type: String,
        /// Opset version the model imports for the node's domain.
        opset: i64,
        /// Why.
        #[source]
        cause: KernelError,
    },
    /// A kernel failed while running.
    #[error("node '{node}' ({op_type}) failed: {cause}")]
    Kernel {
        /// Node name.
        node: String,
        /// ONNX op type.
        op_type: String,
        /// Why.
        #[source]
        cause: KernelError,
    },
    /// An input the model declares was not given.
    #[error("missing input '{0}'")]
    MissingInput(String),
    /// An input name the model does not declare.
    #[error("unknown input '{name}' (the model's inputs are: {expected})")]
    UnknownInput {
        /// The name given.
        name: String,
        /// The names the model declares, comma-separated.
        expected: String,
    },
    /// An input of the wrong element type.
    #[error("input '{name}' has element type {got}, the model expects {expected}")]
    InputDType {
        /// Input name.
        name: String,
        /// What the model declares.
        expected: DType,
        /// What was given.
        got: DType,
    },
    /// An input whose shape contradicts the model's declared shape.
    #[error("input '{name}' has shape {got:?}, the model expects {expected}")]
    InputShape {
        /// Input name.
        name: String,
        /// The declared shape, with symbolic dims by name.
        expected: String,
        /// The shape given.
        got: Vec<usize>,
    },
    /// An input of the wrong kind: a tensor where the model declares a sequence or an optional,
    /// or the other way round.
    #[error("input '{name}' is {got}, the model declares {expected}")]
    InputKind {
        /// Input name.
        name: String,
        /// The declared ONNX type (`seq(tensor(float))`, …).
        expected: String,
        /// The type of the value given.
        got: String,
    },
    /// An output asked for as a tensor that is a sequence or an optional.
    #[error("output '{name}' is {got}, not a tensor: read it as a Value")]
    OutputKind {
        /// Output name.
        name: String,
        /// The output's ONNX type.
        got: String,
    },
    /// An output name the model does not have.
    #[error("unknown output '{name}' (the model's outputs are: {expected})")]
    UnknownOutput {
        /// The name asked for.
        name: String,
        /// The model's output names, comma-separated.
        expected: String,
    },
    /// A device the session was asked to use is not available (and fallback was not allowed).
    #[error("device {device} is unavailable: {reason}")]
    DeviceUnavailable {
        /// The device.
        device: String,
        /// Why.
        reason: String,
    },
    /// The GPU failed: a kernel could not be built or launched, a copy or a capture failed.
    #[error("GPU, {context}: {cause}")]
    Gpu {
        /// Where: the node (`node 'name' (op)`) or the step (`uploading input 'x'`).
        context: String,
        /// Why.
        cause: String,
    },
    /// A session setting that cannot work (thread budget, cost model for another model, …).
    #[error("configuration: {0}")]
    Config(String),
    /// A placement policy failed.
    #[error("placement: {0}")]
    Placement(String),
    /// A kernel panicked (a bug in Spillway, caught so that it does not cross the API; the
    /// session stays usable). Tests and fuzzers count it as a failure.
    #[error("{context} panicked: {message} (a bug: please report it)")]
    Panic {
        /// What panicked: `node 'name' (op)`, or the step of creating a session.
        context: String,
        /// The panic's message.
        message: String,
    },
    /// A worker thread failed unexpectedly (a bug: reported instead of a panic across the API).
    #[error("internal error: {0}")]
    Internal(String),
}

/// Shorthand for the engine's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The message a panic was raised with (`panic!`'s text), or a placeholder.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}
