//! What the server tests share: models (the bundled one, one per datatype, one that fails,
//! one held at a gate), a server on ephemeral loopback ports, and small HTTP helpers.

#![allow(dead_code)] // each test file uses part of this

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use serde_json::{Value as Json, json};
use spillway::{Session, Tensor, ThreadOptions};
use spillway_serve::{Model, ModelOptions, RunError, RunningServer, ServerBuilder, TensorSpec};
use spillway_tests::build::ModelBuilder;

/// The datatypes of the `dtypes` model: `(suffix, ONNX element type)`.
pub const DTYPES: [(&str, i32); 14] = [
    ("f32", 1),
    ("u8", 2),
    ("i8", 3),
    ("u16", 4),
    ("i16", 5),
    ("i32", 6),
    ("i64", 7),
    ("str", 8),
    ("bool", 9),
    ("f16", 10),
    ("f64", 11),
    ("u32", 12),
    ("u64", 13),
    ("bf16", 16),
];

/// The model `spillway run` runs by default.
pub fn bundled_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/small/inception_block.onnx")
}

fn quiet() -> spillway::SessionBuilder {
    // Sleeping kernel threads: the tests share a few cores with other builds.
    Session::builder().with_thread_options(ThreadOptions::default().with_spin(false))
}

/// A session of the bundled model.
pub fn bundled_session() -> Session {
    quiet()
        .commit_from_file(bundled_model())
        .expect("the bundled model loads")
}

/// `x_<t>` -> Identity -> `y_<t>` for every datatype the protocol has, shape [2, 3].
pub fn dtypes_model() -> Vec<u8> {
    dtypes_model_of(&DTYPES)
}

/// `x_<t>` -> Identity -> `y_<t>` for the datatypes given, shape [2, 3].
pub fn dtypes_model_of(types: &[(&str, i32)]) -> Vec<u8> {
    let mut b = ModelBuilder::new(1);
    for &(suffix, elem) in types {
        let (x, y) = (format!("x_{suffix}"), format!("y_{suffix}"));
        b.typed_input(&x, elem, &[2, 3]);
        b.node("Identity", &[&x], &[&y], &[]);
        b.typed_output(&y, elem, &[2, 3]);
    }
    b.to_bytes(17)
}

/// A session of [`dtypes_model`].
pub fn dtypes_session() -> Session {
    session_of(&dtypes_model())
}

/// A session of a model in memory.
pub fn session_of(model: &[u8]) -> Session {
    quiet().commit_from_memory(model).expect("the model loads")
}

/// `y = Relu(x)`, `x` FP32 [128, 256]: requests and answers of 128 KiB, which the server
/// decodes and encodes on its blocking pool.
pub fn big_model() -> Vec<u8> {
    let mut b = ModelBuilder::new(3);
    b.typed_input("x", 1, &[128, 256]);
    b.node("Relu", &["x"], &["y"], &[]);
    b.typed_output("y", 1, &[128, 256]);
    b.to_bytes(17)
}

/// `Gather(table, index)`: fails in the Gather node when the index is out of range.
pub fn gather_model() -> Vec<u8> {
    let mut b = ModelBuilder::new(2);
    b.floats("table", &[4], &[10.0, 20.0, 30.0, 40.0]);
    b.typed_input("index", 7, &[1]);
    b.node("Gather", &["table", "index"], &["value"], &[]);
    b.typed_output("value", 1, &[1]);
    b.to_bytes(17)
}

/// A session of [`gather_model`].
pub fn gather_session() -> Session {
    quiet()
        .commit_from_memory(&gather_model())
        .expect("the gather model loads")
}

/// A model whose runs wait until the test opens its gate: one input `x` (FP32 [1]) returned as
/// `y`. It counts the runs that started, so a test knows what ran without timing anything.
#[derive(Default)]
pub struct GatedModel {
    open: Mutex<bool>,
    opened: Condvar,
    started: AtomicUsize,
    finished: AtomicUsize,
}

impl GatedModel {
    /// Lets every run (present and future) through.
    pub fn open(&self) {
        *self.open.lock().expect("gate") = true;
        self.opened.notify_all();
    }

    /// Runs that started.
    pub fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }

    /// Runs that finished.
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }
}

impl Model for GatedModel {
    fn inputs(&self) -> Vec<TensorSpec> {
        vec![TensorSpec {
            name: "x".into(),
            dtype: Some(spillway::DType::F32),
            shape: Some(vec![Some(1)]),
        }]
    }

    fn outputs(&self) -> Vec<TensorSpec> {
        vec![TensorSpec {
            name: "y".into(),
            dtype: Some(spillway::DType::F32),
            shape: Some(vec![Some(1)]),
        }]
    }

    fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<Vec<(String, Tensor)>, RunError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        let mut open = self
            .open
            .lock()
            .map_err(|e| RunError::Failed(e.to_string()))?;
        while !*open {
            open = self
                .opened
                .wait(open)
                .map_err(|e| RunError::Failed(e.to_string()))?;
        }
        drop(open);
        self.finished.fetch_add(1, Ordering::SeqCst);
        let x = inputs
            .into_iter()
            .next()
            .ok_or_else(|| RunError::InvalidInput("no input".into()))?;
        Ok(vec![("y".into(), x.1)])
    }
}

/// Starts a server with `models` on ephemeral loopback ports (HTTP and gRPC).
pub async fn start(models: Vec<(&str, Arc<dyn Model>, ModelOptions)>) -> RunningServer {
    let mut b = ServerBuilder::new();
    for (name, model, options) in models {
        b = b.model(name, model, options);
    }
    let http = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind HTTP");
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind gRPC");
    b.start(Some(http), Some(grpc))
        .await
        .expect("server starts")
}

/// The base URL of the server's HTTP side.
pub fn base(server: &RunningServer) -> String {
    format!("http://{}", server.http_addr().expect("HTTP address"))
}

/// A gRPC client of the server.
pub async fn grpc_client(
    server: &RunningServer,
) -> spillway_serve::proto::grpc_inference_service_client::GrpcInferenceServiceClient<
    tonic::transport::Channel,
> {
    let addr = server.grpc_addr().expect("gRPC address");
    spillway_serve::proto::grpc_inference_service_client::GrpcInferenceServiceClient::connect(
        format!("http://{addr}"),
    )
    .await
    .expect("gRPC connects")
    .max_decoding_message_size(256 << 20)
}

/// POSTs `body` as JSON; the status and the JSON answer.
pub async fn post_json(client: &reqwest::Client, url: &str, body: &Json) -> (u16, Json) {
    let r = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("the server answers");
    let status = r.status().as_u16();
    let bytes = r.bytes().await.expect("a body");
    (status, serde_json::from_slice(&bytes).unwrap_or(Json::Null))
}

/// The JSON body of an inference request for the gated model.
pub fn gated_request(value: f32, timeout_us: Option<i64>) -> Json {
    let mut r = json!({
        "inputs": [{ "name": "x", "shape": [1], "datatype": "FP32", "data": [value] }]
    });
    if let Some(t) = timeout_us {
        r["parameters"] = json!({ "timeout": t });
    }
    r
}

/// The value of a Prometheus sample `name{labels}` in `text`.
pub fn metric(text: &str, sample: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(sample)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// `/metrics` of the server.
pub async fn metrics(client: &reqwest::Client, server: &RunningServer) -> String {
    client
        .get(format!("{}/metrics", base(server)))
        .send()
        .await
        .expect("metrics answer")
        .text()
        .await
        .expect("metrics text")
}

/// Polls `/metrics` until `sample` reaches `value` (a condition, not a timing: it waits as
/// long as it takes, up to a generous bound that only a broken server reaches).
pub async fn wait_for_metric(
    client: &reqwest::Client,
    server: &RunningServer,
    sample: &str,
    value: f64,
) {
    for _ in 0..6000 {
        if metric(&metrics(client, server).await, sample) == Some(value) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{sample} never reached {value}");
}
