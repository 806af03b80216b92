//! `spillway serve`: a KServe v2 / Open Inference Protocol server for Spillway sessions.
//!
//! HTTP/REST (axum) and gRPC (tonic) front-ends share one set of models. Each model has a
//! bounded admission queue — a request beyond it is refused at once with 429 /
//! `RESOURCE_EXHAUSTED` — and `instances` worker threads that run it (one shared [`Session`]
//! per model: `run` takes `&self`). A request may carry a deadline (the `timeout` parameter,
//! microseconds, or gRPC's `grpc-timeout`); one whose deadline passes before it runs is never
//! run and is answered 504 / `DEADLINE_EXCEEDED`. A failed run answers its own request only,
//! with the engine's error (which names the node). Shutdown is graceful: new requests are
//! refused, every admitted one is answered. `/metrics` serves Prometheus counters and
//! histograms; every request has a `tracing` span.
//!
//! ```no_run
//! use std::sync::Arc;
//! use spillway::Session;
//! use spillway_serve::{ModelOptions, ServerBuilder, SessionModel};
//!
//! # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//! let session = Session::builder().commit_from_file("model.onnx")?;
//! let server = ServerBuilder::new()
//!     .model("model", Arc::new(SessionModel::new(session)), ModelOptions::default())
//!     .start(
//!         Some(tokio::net::TcpListener::bind("127.0.0.1:8000").await?),
//!         Some(tokio::net::TcpListener::bind("127.0.0.1:8001").await?),
//!     )
//!     .await?;
//! server.run_until_signal().await?;
//! # Ok(())
//! # }
//! ```
//!
//! [`Session`]: spillway::Session

pub mod datatype;
mod error;
mod grpc;
mod http;
pub mod metrics;
mod model;
mod queue;
mod server;

/// The Open Inference Protocol's gRPC messages, client and server, generated from
/// `proto/grpc_predict_v2.proto`.
#[allow(missing_docs, clippy::all)]
pub mod proto {
    tonic::include_proto!("inference");
}

pub use datatype::Datatype;
pub use error::ServeError;
pub use http::{EXTENSIONS, HEADER_LENGTH};
pub use model::{Model, RunError, SessionModel, TensorSpec};
pub use server::{MODEL_VERSION, ModelOptions, RunningServer, ServerBuilder, ShutdownHandle};

/// The `platform` models are reported with.
pub const PLATFORM: &str = "spillway_onnx";
