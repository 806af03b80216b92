//! [`ServeError`]: what a request can fail with, and its HTTP status and gRPC code.

/// Why a request was not answered with outputs. Each kind has one HTTP status and one gRPC
/// code; the text is the `{"error": …}` of the HTTP answer and the gRPC status message.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ServeError {
    /// No model by that name (404 / `NOT_FOUND`).
    #[error("unknown model '{name}' (the server has: {known})")]
    ModelNotFound {
        /// The name asked for.
        name: String,
        /// The models the server has, comma-separated.
        known: String,
    },
    /// The model has no such version (404 / `NOT_FOUND`).
    #[error("model '{model}' has no version '{version}' (it has: 1)")]
    VersionNotFound {
        /// The model.
        model: String,
        /// The version asked for.
        version: String,
    },
    /// The request is malformed or does not fit the model (400 / `INVALID_ARGUMENT`).
    #[error("{0}")]
    BadRequest(String),
    /// The model's admission queue is full (429 / `RESOURCE_EXHAUSTED`): retry later.
    #[error("model '{model}' is overloaded: its queue of {capacity} requests is full")]
    QueueFull {
        /// The model.
        model: String,
        /// How many requests its queue holds.
        capacity: usize,
    },
    /// The request's deadline passed before it could run (504 / `DEADLINE_EXCEEDED`).
    #[error("the request's deadline passed before model '{model}' could run it")]
    DeadlineExceeded {
        /// The model.
        model: String,
    },
    /// The server is shutting down and takes no new requests (503 / `UNAVAILABLE`).
    #[error("the server is shutting down and takes no new requests")]
    ShuttingDown,
    /// The model ran and failed (500 / `INTERNAL`); the text names the node and the cause.
    #[error("model '{model}' failed: {cause}")]
    RunFailed {
        /// The model.
        model: String,
        /// The engine's error.
        cause: String,
    },
    /// Anything else that is the server's fault (500 / `INTERNAL`).
    #[error("internal error: {0}")]
    Internal(String),
}

impl ServeError {
    /// The HTTP status code.
    pub fn http_status(&self) -> u16 {
        match self {
            ServeError::ModelNotFound { .. } | ServeError::VersionNotFound { .. } => 404,
            ServeError::BadRequest(_) => 400,
            ServeError::QueueFull { .. } => 429,
            ServeError::DeadlineExceeded { .. } => 504,
            ServeError::ShuttingDown => 503,
            ServeError::RunFailed { .. } | ServeError::Internal(_) => 500,
        }
    }

    /// The gRPC status code.
    pub fn grpc_code(&self) -> tonic::Code {
        match self {
            ServeError::ModelNotFound { .. } | ServeError::VersionNotFound { .. } => {
                tonic::Code::NotFound
            }
            ServeError::BadRequest(_) => tonic::Code::InvalidArgument,
            ServeError::QueueFull { .. } => tonic::Code::ResourceExhausted,
            ServeError::DeadlineExceeded { .. } => tonic::Code::DeadlineExceeded,
            ServeError::ShuttingDown => tonic::Code::Unavailable,
            ServeError::RunFailed { .. } | ServeError::Internal(_) => tonic::Code::Internal,
        }
    }
}

impl From<ServeError> for tonic::Status {
    fn from(e: ServeError) -> Self {
        tonic::Status::new(e.grpc_code(), e.to_string())
    }
}
