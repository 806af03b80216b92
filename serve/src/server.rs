//! The server: its models, their queues and workers, the HTTP and gRPC front-ends, and
//! graceful shutdown.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use spillway::Tensor;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::datatype::Datatype;
use crate::error::ServeError;
use crate::metrics::{ModelMetrics, Outcome};
use crate::model::{Model, RunError, TensorSpec};
use crate::queue::{JobResult, ModelQueue};

/// The version every model is served as.
pub const MODEL_VERSION: &str = "1";

/// How one model is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelOptions {
    /// Runs of the model at once (worker threads), at least 1.
    pub instances: usize,
    /// Requests that may wait for a worker; one more is refused at once. At least 1.
    pub queue: usize,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            instances: 1,
            queue: 64,
        }
    }
}

/// One served model.
pub(crate) struct ModelEntry {
    pub(crate) name: String,
    pub(crate) inputs: Vec<TensorSpec>,
    pub(crate) outputs: Vec<TensorSpec>,
    pub(crate) options: ModelOptions,
    pub(crate) metrics: Arc<ModelMetrics>,
    queue: Arc<ModelQueue>,
}

/// Counts one request's outcome exactly once: by [`Tracker::finish`], or when dropped
/// unfinished (the client went away, or the gRPC deadline cut the call short).
pub(crate) struct Tracker {
    metrics: Arc<ModelMetrics>,
    arrived: Instant,
    deadline: Option<Instant>,
    done: bool,
}

impl Tracker {
    /// Sets the deadline the drop-time count compares with.
    pub(crate) fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// Counts the outcome of `result`.
    pub(crate) fn finish<T>(mut self, result: &Result<T, ServeError>) {
        let outcome = match result {
            Ok(_) => {
                self.metrics.request_time.observe(self.arrived.elapsed());
                Outcome::Success
            }
            Err(e) => outcome_of(e),
        };
        self.metrics.count(outcome);
        self.done = true;
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        if !self.done {
            let expired = self.deadline.is_some_and(|d| Instant::now() >= d);
            self.metrics.count(match expired {
                true => Outcome::Expired,
                false => Outcome::Cancelled,
            });
        }
    }
}

fn outcome_of(e: &ServeError) -> Outcome {
    match e {
        ServeError::ModelNotFound { .. }
        | ServeError::VersionNotFound { .. }
        | ServeError::BadRequest(_) => Outcome::Invalid,
        ServeError::QueueFull { .. } => Outcome::Refused,
        ServeError::DeadlineExceeded { .. } => Outcome::Expired,
        ServeError::ShuttingDown => Outcome::Unavailable,
        ServeError::RunFailed { .. } | ServeError::Internal(_) => Outcome::Failed,
    }
}

impl ModelEntry {
    /// Starts counting a request for this model.
    pub(crate) fn track(&self) -> Tracker {
        Tracker {
            metrics: self.metrics.clone(),
            arrived: Instant::now(),
            deadline: None,
            done: false,
        }
    }

    /// A 400 unless `inputs` are exactly the model's, with their declared element types and
    /// fixed dimensions.
    pub(crate) fn check_inputs(&self, inputs: &[(String, Tensor)]) -> Result<(), ServeError> {
        for (i, (name, tensor)) in inputs.iter().enumerate() {
            let Some(spec) = self.inputs.iter().find(|s| &s.name == name) else {
                return Err(ServeError::BadRequest(format!(
                    "model '{}' has no input '{name}' (its inputs are: {})",
                    self.name,
                    names(&self.inputs)
                )));
            };
            if inputs[..i].iter().any(|(n, _)| n == name) {
                return Err(ServeError::BadRequest(format!(
                    "input '{name}' is given twice"
                )));
            }
            if let Some(dtype) = spec.dtype
                && dtype != tensor.dtype()
            {
                let want = Datatype::from_dtype(dtype).map_or(dtype.name(), Datatype::name);
                let got = Datatype::from_dtype(tensor.dtype()).map_or("?", Datatype::name);
                return Err(ServeError::BadRequest(format!(
                    "input '{name}' is {got}, model '{}' expects {want}",
                    self.name
                )));
            }
            if let Some(dims) = &spec.shape {
                let fits = dims.len() == tensor.rank()
                    && dims
                        .iter()
                        .zip(tensor.shape())
                        .all(|(want, got)| want.is_none_or(|w| w == *got));
                if !fits {
                    return Err(ServeError::BadRequest(format!(
                        "input '{name}' has shape {:?}, model '{}' expects {:?}",
                        tensor.shape(),
                        self.name,
                        spec.protocol_shape()
                    )));
                }
            }
        }
        if let Some(missing) = self
            .inputs
            .iter()
            .find(|s| !inputs.iter().any(|(n, _)| n == &s.name))
        {
            return Err(ServeError::BadRequest(format!(
                "input '{}' of model '{}' is missing",
                missing.name, self.name
            )));
        }
        Ok(())
    }

    /// A 400 unless every requested output is one of the model's.
    pub(crate) fn check_outputs<'a>(
        &self,
        requested: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), ServeError> {
        for name in requested {
            if !self.outputs.iter().any(|s| s.name == name) {
                return Err(ServeError::BadRequest(format!(
                    "model '{}' has no output '{name}' (its outputs are: {})",
                    self.name,
                    names(&self.outputs)
                )));
            }
        }
        Ok(())
    }

    /// Admits the request into the model's queue and waits for its outputs.
    pub(crate) async fn infer(
        &self,
        inputs: Vec<(String, Tensor)>,
        deadline: Option<Instant>,
    ) -> Result<Vec<(String, Tensor)>, ServeError> {
        let pending = self.queue.submit(inputs, deadline)?;
        match pending.wait().await? {
            JobResult::Expired => Err(ServeError::DeadlineExceeded {
                model: self.name.clone(),
            }),
            JobResult::Ran(Ok(outputs)) => Ok(outputs),
            JobResult::Ran(Err(RunError::InvalidInput(m))) => Err(ServeError::BadRequest(m)),
            JobResult::Ran(Err(RunError::Failed(cause))) => Err(ServeError::RunFailed {
                model: self.name.clone(),
                cause,
            }),
        }
    }
}

fn names(specs: &[TensorSpec]) -> String {
    specs
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the front-ends share: the models and whether the server is draining.
pub(crate) struct Shared {
    pub(crate) models: BTreeMap<String, ModelEntry>,
    draining: AtomicBool,
}

impl Shared {
    /// The model called `name`; `version`, when given, must be [`MODEL_VERSION`].
    pub(crate) fn model(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<&ModelEntry, ServeError> {
        let entry = self
            .models
            .get(name)
            .ok_or_else(|| ServeError::ModelNotFound {
                name: name.to_string(),
                known: self.models.keys().cloned().collect::<Vec<_>>().join(", "),
            })?;
        match version {
            Some(v) if !v.is_empty() && v != MODEL_VERSION => Err(ServeError::VersionNotFound {
                model: name.to_string(),
                version: v.to_string(),
            }),
            _ => Ok(entry),
        }
    }

    /// True until shutdown begins.
    pub(crate) fn ready(&self) -> bool {
        !self.draining.load(Ordering::Acquire)
    }

    /// [`ServeError::ShuttingDown`] once shutdown has begun.
    pub(crate) fn admit(&self) -> Result<(), ServeError> {
        match self.ready() {
            true => Ok(()),
            false => Err(ServeError::ShuttingDown),
        }
    }

    /// The Prometheus text of every model's metrics.
    pub(crate) fn metrics_text(&self) -> String {
        crate::metrics::render(self.models.iter().map(|(n, e)| (n.as_str(), &*e.metrics)))
    }
}

/// A request's deadline from a `timeout` in microseconds (Triton's request parameter; 0, as
/// in Triton, is none).
pub(crate) fn deadline_after_micros(
    arrived: Instant,
    micros: i64,
) -> Result<Option<Instant>, ServeError> {
    let micros = u64::try_from(micros).map_err(|_| {
        ServeError::BadRequest(format!(
            "parameter 'timeout' must not be negative, got {micros}"
        ))
    })?;
    Ok((micros > 0).then(|| arrived + Duration::from_micros(micros)))
}

/// Configures and starts a [`RunningServer`].
pub struct ServerBuilder {
    models: Vec<(String, Arc<dyn Model>, ModelOptions)>,
    max_message_bytes: usize,
}

impl Default for ServerBuilder {
    fn default() -> Self {
        ServerBuilder {
            models: Vec::new(),
            max_message_bytes: 256 << 20,
        }
    }
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field(
                "models",
                &self
                    .models
                    .iter()
                    .map(|(n, _, o)| (n, o))
                    .collect::<Vec<_>>(),
            )
            .field("max_message_bytes", &self.max_message_bytes)
            .finish()
    }
}

impl ServerBuilder {
    /// A server with no models yet.
    pub fn new() -> Self {
        ServerBuilder::default()
    }

    /// Serves `model` as `name` (the `{m}` of `/v2/models/{m}`).
    pub fn model(
        mut self,
        name: impl Into<String>,
        model: Arc<dyn Model>,
        options: ModelOptions,
    ) -> Self {
        self.models.push((name.into(), model, options));
        self
    }

    /// The largest request or response body, HTTP or gRPC (default 256 MiB).
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Starts the workers and serves HTTP on `http` and gRPC on `grpc` (either may be
    /// absent). Must be called inside a Tokio runtime.
    pub async fn start(
        self,
        http: Option<TcpListener>,
        grpc: Option<TcpListener>,
    ) -> Result<RunningServer, ServeError> {
        if self.models.is_empty() {
            return Err(ServeError::Internal("no models to serve".into()));
        }
        let mut models = BTreeMap::new();
        let mut workers = Vec::new();
        let mut queues = Vec::new();
        for (name, model, options) in self.models {
            if options.instances == 0 || options.queue == 0 {
                return Err(ServeError::Internal(format!(
                    "model '{name}': instances and queue must be at least 1"
                )));
            }
            if models.contains_key(&name) {
                return Err(ServeError::Internal(format!(
                    "two models are called '{name}'"
                )));
            }
            let metrics = Arc::new(ModelMetrics::default());
            metrics
                .instances
                .store(options.instances as u64, Ordering::Relaxed);
            metrics
                .queue_capacity
                .store(options.queue as u64, Ordering::Relaxed);
            let queue = Arc::new(ModelQueue::new(
                name.clone(),
                options.queue,
                metrics.clone(),
            ));
            for i in 0..options.instances {
                let (queue, model) = (queue.clone(), model.clone());
                let worker = std::thread::Builder::new()
                    .name(format!("serve-{name}-{i}"))
                    .spawn(move || queue.work(&*model))
                    .map_err(|e| ServeError::Internal(format!("starting a worker: {e}")))?;
                workers.push(worker);
            }
            queues.push(queue.clone());
            let entry = ModelEntry {
                name: name.clone(),
                inputs: model.inputs(),
                outputs: model.outputs(),
                options,
                metrics,
                queue,
            };
            models.insert(name, entry);
        }
        let shared = Arc::new(Shared {
            models,
            draining: AtomicBool::new(false),
        });
        let (shutdown, _) = watch::channel(false);
        let stopped = |tx: &watch::Sender<bool>| {
            let mut rx = tx.subscribe();
            async move {
                let _ = rx.wait_for(|stop| *stop).await;
            }
        };
        let mut tasks = Vec::new();
        let mut http_addr = None;
        if let Some(listener) = http {
            http_addr = Some(local_addr(&listener)?);
            let app = crate::http::router(shared.clone(), self.max_message_bytes);
            let stop = stopped(&shutdown);
            tasks.push(tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(stop)
                    .await
                    .map_err(|e| format!("HTTP server: {e}"))
            }));
        }
        let mut grpc_addr = None;
        if let Some(listener) = grpc {
            grpc_addr = Some(local_addr(&listener)?);
            let service = crate::grpc::service(shared.clone(), self.max_message_bytes);
            let stop = stopped(&shutdown);
            tasks.push(tokio::spawn(async move {
                tonic::transport::Server::builder()
                    .add_service(service)
                    .serve_with_incoming_shutdown(
                        tonic::transport::server::TcpIncoming::from(listener),
                        stop,
                    )
                    .await
                    .map_err(|e| format!("gRPC server: {e}"))
            }));
        }
        Ok(RunningServer {
            http_addr,
            grpc_addr,
            shared,
            shutdown,
            tasks,
            workers,
            queues,
        })
    }
}

fn local_addr(listener: &TcpListener) -> Result<SocketAddr, ServeError> {
    listener
        .local_addr()
        .map_err(|e| ServeError::Internal(format!("listener address: {e}")))
}

/// A started server. [`RunningServer::shutdown`] starts a graceful shutdown: readiness turns
/// false, new inference requests are answered 503 / `UNAVAILABLE`, the listeners stop
/// accepting connections, and every request already admitted is run and answered;
/// [`RunningServer::wait`] returns once all of that is done.
pub struct RunningServer {
    http_addr: Option<SocketAddr>,
    grpc_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<Result<(), String>>>,
    workers: Vec<std::thread::JoinHandle<()>>,
    queues: Vec<Arc<ModelQueue>>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("http_addr", &self.http_addr)
            .field("grpc_addr", &self.grpc_addr)
            .finish_non_exhaustive()
    }
}

impl RunningServer {
    /// Where HTTP is served.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Where gRPC is served.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.grpc_addr
    }

    /// A handle that starts the graceful shutdown from anywhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            shared: self.shared.clone(),
            shutdown: self.shutdown.clone(),
        }
    }

    /// Starts the graceful shutdown (see [`RunningServer`]).
    pub fn shutdown(&self) {
        self.shutdown_handle().shutdown();
    }

    /// Waits until the server has stopped: after [`RunningServer::shutdown`] (or a server
    /// error), once every admitted request is answered and every worker has exited.
    pub async fn wait(self) -> Result<(), ServeError> {
        let mut errors = Vec::new();
        for task in self.tasks {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => errors.push(e),
                Err(e) => errors.push(format!("a server task failed: {e}")),
            }
        }
        // The front-ends are down: no new request can reach a queue. Drain and stop.
        self.shared.draining.store(true, Ordering::Release);
        for queue in &self.queues {
            queue.close();
        }
        let workers = self.workers;
        tokio::task::spawn_blocking(move || {
            for w in workers {
                let _ = w.join();
            }
        })
        .await
        .map_err(|e| ServeError::Internal(format!("joining the workers: {e}")))?;
        match errors.is_empty() {
            true => Ok(()),
            false => Err(ServeError::Internal(errors.join("; "))),
        }
    }

    /// Serves until Ctrl-C or SIGTERM, then shuts down gracefully (see [`RunningServer`]).
    pub async fn run_until_signal(self) -> Result<(), ServeError> {
        let handle = self.shutdown_handle();
        tokio::spawn(async move {
            shutdown_signal().await;
            tracing::info!("shutting down: draining admitted requests");
            handle.shutdown();
        });
        self.wait().await
    }
}

/// Starts a server's graceful shutdown (see [`RunningServer`]); cheap to clone.
#[derive(Clone)]
pub struct ShutdownHandle {
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
}

impl std::fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownHandle").finish_non_exhaustive()
    }
}

impl ShutdownHandle {
    /// Starts the graceful shutdown.
    pub fn shutdown(&self) {
        self.shared.draining.store(true, Ordering::Release);
        self.shutdown.send_replace(true);
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
