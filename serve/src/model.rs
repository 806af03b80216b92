//! [`Model`]: what the server runs — a Spillway [`Session`] ([`SessionModel`]) or anything
//! else with named tensor inputs and outputs.

use spillway::{DType, Dim, Session, Tensor, ValueInfo};

/// One declared input or output: name, element type and shape, as far as the model says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    /// The name in the model.
    pub name: String,
    /// The element type, when declared.
    pub dtype: Option<DType>,
    /// The shape, when the rank is declared: `None` for a dimension of variable size.
    pub shape: Option<Vec<Option<usize>>>,
}

impl TensorSpec {
    /// The spec of a session's input or output.
    pub fn from_value_info(info: &ValueInfo) -> TensorSpec {
        TensorSpec {
            name: info.name.clone(),
            dtype: info.dtype,
            shape: info.shape.as_ref().map(|dims| {
                dims.iter()
                    .map(|d| match d {
                        Dim::Fixed(n) => Some(*n),
                        _ => None,
                    })
                    .collect()
            }),
        }
    }

    /// The protocol's shape: `-1` for a dimension of variable size (empty when the rank is
    /// unknown).
    pub fn protocol_shape(&self) -> Vec<i64> {
        self.shape
            .as_ref()
            .map(|dims| dims.iter().map(|d| d.map_or(-1, |n| n as i64)).collect())
            .unwrap_or_default()
    }
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The inputs do not fit the model (an answer of 400 / `INVALID_ARGUMENT`).
    InvalidInput(String),
    /// The model failed while running (500 / `INTERNAL`): the text names the node and cause.
    Failed(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::InvalidInput(s) | RunError::Failed(s) => f.write_str(s),
        }
    }
}

/// A model the server runs. `run` is called from the server's worker threads, several at once
/// when the model has several instances; it must not panic (a panic is caught and answered as
/// a failed run).
pub trait Model: Send + Sync + 'static {
    /// The inputs, in order.
    fn inputs(&self) -> Vec<TensorSpec>;
    /// The outputs, in order.
    fn outputs(&self) -> Vec<TensorSpec>;
    /// Runs once: `(name, tensor)` for every input; every output, in order.
    fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<Vec<(String, Tensor)>, RunError>;
}

/// A Spillway [`Session`] as a [`Model`].
#[derive(Debug)]
pub struct SessionModel {
    session: Session,
}

impl SessionModel {
    /// Serves `session`.
    pub fn new(session: Session) -> SessionModel {
        SessionModel { session }
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }
}

impl Model for SessionModel {
    fn inputs(&self) -> Vec<TensorSpec> {
        self.session
            .inputs()
            .into_iter()
            .map(TensorSpec::from_value_info)
            .collect()
    }

    fn outputs(&self) -> Vec<TensorSpec> {
        self.session
            .outputs()
            .into_iter()
            .map(TensorSpec::from_value_info)
            .collect()
    }

    fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<Vec<(String, Tensor)>, RunError> {
        let outputs = self.session.run(inputs).map_err(|e| match e {
            spillway::Error::MissingInput(_)
            | spillway::Error::UnknownInput { .. }
            | spillway::Error::InputDType { .. }
            | spillway::Error::InputShape { .. }
            | spillway::Error::InputKind { .. } => RunError::InvalidInput(e.to_string()),
            other => RunError::Failed(other.to_string()),
        })?;
        outputs
            .iter_values()
            .map(|(name, value)| match value.as_tensor() {
                Some(t) => Ok((name.to_string(), t.clone())),
                None => Err(RunError::Failed(format!(
                    "output '{name}' is {}, and the protocol carries tensors only",
                    value.type_string()
                ))),
            })
            .collect()
    }
}
