//! Engine errors as Python exceptions: the classes live in `spillway._errors` (onnxruntime's
//! names: `Fail`, `InvalidArgument`, `NoSuchFile`, ...), the message is the engine's.

use pyo3::prelude::*;

/// The exception class of `spillway._errors` that an engine error is raised as.
fn class_of(error: &spillway::Error) -> &'static str {
    use spillway::Error as E;
    match error {
        E::Io { cause, .. } if cause.kind() == std::io::ErrorKind::NotFound => "NoSuchFile",
        E::Io { .. } => "Fail",
        E::Decode(_) => "InvalidProtobuf",
        E::InvalidModel(_) | E::InvalidNode { .. } => "InvalidGraph",
        E::Unsupported { .. } => "NotImplemented",
        E::MissingInput(_)
        | E::UnknownInput { .. }
        | E::InputDType { .. }
        | E::InputShape { .. }
        | E::InputKind { .. }
        | E::UnknownOutput { .. }
        | E::OutputKind { .. }
        | E::Npy(_) => "InvalidArgument",
        E::DeviceUnavailable { .. } | E::Gpu { .. } => "EPFail",
        E::Kernel { .. } | E::ResourceLimit(_) => "RuntimeException",
        _ => "Fail",
    }
}

/// Raises `class` of `spillway._errors` with `message`.
pub fn raise(py: Python<'_>, class: &str, message: impl Into<String>) -> PyErr {
    let message = message.into();
    match py
        .import("spillway._errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1((message.clone(),)))
    {
        Ok(exception) => PyErr::from_value(exception),
        // The package's Python part is missing (the native module imported alone).
        Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
    }
}

/// The Python exception for an engine error, with the engine's message.
pub fn engine(py: Python<'_>, error: spillway::Error) -> PyErr {
    raise(py, class_of(&error), error.to_string())
}

/// An `InvalidArgument` with `message`.
pub fn invalid_argument(py: Python<'_>, message: impl Into<String>) -> PyErr {
    raise(py, "InvalidArgument", message)
}
