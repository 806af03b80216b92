//! The REST front-end: the Open Inference Protocol's HTTP/JSON endpoints, the binary tensor
//! extension, Triton's model-configuration extension and Prometheus `/metrics`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Map, Value as Json, json};
use spillway::Tensor;

use crate::datatype::{self, Datatype};
use crate::error::ServeError;
use crate::server::{MODEL_VERSION, ModelEntry, Shared, deadline_after_micros};

/// The header that gives the length of the JSON part of a body with binary tensors.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

/// The extensions the server implements, as `/v2` lists them.
pub const EXTENSIONS: [&str; 2] = ["binary_tensor_data", "model_configuration"];

type Params = HashMap<String, String>;

/// The HTTP routes.
pub(crate) fn router(shared: Arc<Shared>, max_body: usize) -> Router {
    Router::new()
        .route("/v2/health/live", get(live))
        .route("/v2/health/ready", get(ready))
        .route("/v2", get(server_metadata))
        .route("/v2/models/{model}", get(model_metadata))
        .route("/v2/models/{model}/versions/{version}", get(model_metadata))
        .route("/v2/models/{model}/ready", get(model_ready))
        .route(
            "/v2/models/{model}/versions/{version}/ready",
            get(model_ready),
        )
        .route("/v2/models/{model}/config", get(model_config))
        .route(
            "/v2/models/{model}/versions/{version}/config",
            get(model_config),
        )
        .route("/v2/models/{model}/infer", post(infer))
        .route("/v2/models/{model}/versions/{version}/infer", post(infer))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(shared)
}

fn json_response(status: StatusCode, body: &Json) -> Response {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn error_response(e: &ServeError) -> Response {
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(status, &json!({ "error": e.to_string() }))
}

fn status_only(ok: bool) -> Response {
    let mut r = Response::new(Body::empty());
    if !ok {
        *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    r
}

async fn live() -> Response {
    status_only(true)
}

async fn ready(State(s): State<Arc<Shared>>) -> Response {
    status_only(s.ready())
}

async fn not_found() -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        &json!({ "error": "no such endpoint (see the Open Inference Protocol's /v2 routes)" }),
    )
}

async fn metrics(State(s): State<Arc<Shared>>) -> Response {
    let mut r = Response::new(Body::from(s.metrics_text()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

async fn server_metadata() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "name": "spillway",
            "version": env!("CARGO_PKG_VERSION"),
            "extensions": EXTENSIONS,
        }),
    )
}

fn lookup<'a>(s: &'a Shared, p: &Params) -> Result<&'a ModelEntry, ServeError> {
    let model = p.get("model").map_or("", String::as_str);
    s.model(model, p.get("version").map(String::as_str))
}

fn datatype_name(spec: &crate::model::TensorSpec) -> &'static str {
    spec.dtype
        .and_then(Datatype::from_dtype)
        .map_or("", Datatype::name)
}

/// The model-metadata JSON (also the body of gRPC's ModelMetadata, in its own form).
fn metadata_json(m: &ModelEntry) -> Json {
    let tensors = |specs: &[crate::model::TensorSpec]| -> Vec<Json> {
        specs
            .iter()
            .map(|s| json!({ "name": s.name, "datatype": datatype_name(s), "shape": s.protocol_shape() }))
            .collect()
    };
    json!({
        "name": m.name,
        "versions": [MODEL_VERSION],
        "platform": crate::PLATFORM,
        "inputs": tensors(&m.inputs),
        "outputs": tensors(&m.outputs),
    })
}

async fn model_metadata(State(s): State<Arc<Shared>>, Path(p): Path<Params>) -> Response {
    match lookup(&s, &p) {
        Ok(m) => json_response(StatusCode::OK, &metadata_json(m)),
        Err(e) => error_response(&e),
    }
}

async fn model_ready(State(s): State<Arc<Shared>>, Path(p): Path<Params>) -> Response {
    match lookup(&s, &p) {
        Ok(_) => status_only(s.ready()),
        Err(e) => error_response(&e),
    }
}

/// Triton's model configuration (the `model_configuration` extension), enough for Triton's
/// clients and tools: names, types, dims, instance count.
async fn model_config(State(s): State<Arc<Shared>>, Path(p): Path<Params>) -> Response {
    let m = match lookup(&s, &p) {
        Ok(m) => m,
        Err(e) => return error_response(&e),
    };
    let tensors = |specs: &[crate::model::TensorSpec]| -> Vec<Json> {
        specs
            .iter()
            .map(|s| {
                let data_type = s
                    .dtype
                    .and_then(Datatype::from_dtype)
                    .map_or("TYPE_INVALID", Datatype::config_name);
                json!({ "name": s.name, "data_type": data_type, "dims": s.protocol_shape() })
            })
            .collect()
    };
    json_response(
        StatusCode::OK,
        &json!({
            "name": m.name,
            "platform": crate::PLATFORM,
            "backend": "spillway",
            "max_batch_size": 0,
            "input": tensors(&m.inputs),
            "output": tensors(&m.outputs),
            "instance_group": [{ "name": format!("{}_0", m.name), "kind": "KIND_CPU", "count": m.options.instances }],
            "parameters": { "queue": { "string_value": m.options.queue.to_string() } },
        }),
    )
}

#[derive(Deserialize)]
struct InferRequest {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    parameters: Map<String, Json>,
    inputs: Vec<InputTensor>,
    #[serde(default)]
    outputs: Vec<RequestedOutput>,
}

#[derive(Deserialize)]
struct InputTensor {
    name: String,
    shape: Vec<i64>,
    datatype: String,
    #[serde(default)]
    parameters: Map<String, Json>,
    #[serde(default)]
    data: Option<Json>,
}

#[derive(Deserialize)]
struct RequestedOutput {
    name: String,
    #[serde(default)]
    parameters: Map<String, Json>,
}

fn bool_param(p: &Map<String, Json>, key: &str) -> Result<bool, ServeError> {
    match p.get(key) {
        None => Ok(false),
        Some(Json::Bool(b)) => Ok(*b),
        Some(other) => Err(ServeError::BadRequest(format!(
            "parameter '{key}' must be a boolean, got {other}"
        ))),
    }
}

/// Requests and answers from this size on are decoded and encoded on the blocking pool, not
/// on the async workers.
const DECODE_ON_BLOCKING_POOL: usize = 64 << 10;

async fn infer(
    State(s): State<Arc<Shared>>,
    Path(p): Path<Params>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let arrived = Instant::now();
    let m = match lookup(&s, &p) {
        Ok(m) => m,
        Err(e) => return error_response(&e),
    };
    let mut tracker = m.track();
    let span = tracing::info_span!("infer", protocol = "http", model = %m.name, id = tracing::field::Empty);
    let large = body.len() >= DECODE_ON_BLOCKING_POOL;
    let decode = {
        let (s, name, span) = (s.clone(), m.name.clone(), span.clone());
        move || {
            let _enter = span.enter();
            let m = s.model(&name, None)?;
            decode(&s, m, &headers, body, arrived, &span)
        }
    };
    let prepared = match large {
        // Parsing megabytes of JSON would hold an async worker and every connection on it.
        true => tokio::task::spawn_blocking(decode)
            .await
            .unwrap_or_else(|e| Err(ServeError::Internal(format!("decoding the request: {e}")))),
        false => decode(),
    };
    let result = match prepared {
        Ok(prepared) => {
            tracker.set_deadline(prepared.deadline);
            tracing::Instrument::instrument(prepared.run(m), span.clone()).await
        }
        Err(e) => Err(e),
    };
    tracker.finish(&result);
    match result {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(parent: &span, error = %e, "request failed");
            error_response(&e)
        }
    }
}

/// A decoded request, ready to run.
struct Prepared {
    id: Option<String>,
    inputs: Vec<(String, Tensor)>,
    outputs: Vec<(String, bool)>,
    deadline: Option<Instant>,
}

/// Reads, checks and decodes an inference request.
fn decode(
    s: &Shared,
    m: &ModelEntry,
    headers: &HeaderMap,
    body: Bytes,
    arrived: Instant,
    span: &tracing::Span,
) -> Result<Prepared, ServeError> {
    s.admit()?;
    let json_len = match headers.get(HEADER_LENGTH) {
        None => body.len(),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|n| *n <= body.len())
            .ok_or_else(|| {
                ServeError::BadRequest(format!(
                    "header {HEADER_LENGTH} must be a length within the body's {} bytes",
                    body.len()
                ))
            })?,
    };
    let request: InferRequest = serde_json::from_slice(&body[..json_len])
        .map_err(|e| ServeError::BadRequest(format!("malformed inference request JSON: {e}")))?;
    if let Some(id) = &request.id {
        span.record("id", id.as_str());
    }
    let deadline = match request.parameters.get("timeout") {
        None => None,
        Some(t) => {
            let micros = t.as_i64().ok_or_else(|| {
                ServeError::BadRequest(format!(
                    "parameter 'timeout' must be an integer (microseconds), got {t}"
                ))
            })?;
            deadline_after_micros(arrived, micros)?
        }
    };
    let mut binary = body.slice(json_len..);
    let mut inputs = Vec::with_capacity(request.inputs.len());
    for input in &request.inputs {
        let dt = datatype::parse_datatype(&input.datatype, &input.name)?;
        let tensor = match input.parameters.get("binary_data_size") {
            Some(size) => {
                let size = size
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|n| *n <= binary.len())
                    .ok_or_else(|| {
                        ServeError::BadRequest(format!(
                            "input '{}': binary_data_size {size} is not a length within the {} binary bytes left",
                            input.name,
                            binary.len()
                        ))
                    })?;
                let raw = binary.split_to(size);
                datatype::tensor_from_raw(dt, &input.shape, &raw, &input.name)?
            }
            None => {
                let data = input.data.as_ref().ok_or_else(|| {
                    ServeError::BadRequest(format!(
                        "input '{}' has neither data nor binary_data_size",
                        input.name
                    ))
                })?;
                datatype::tensor_from_json(dt, &input.shape, data, &input.name)?
            }
        };
        inputs.push((input.name.clone(), tensor));
    }
    if !binary.is_empty() {
        return Err(ServeError::BadRequest(format!(
            "{} bytes of binary data after the inputs' binary_data_size",
            binary.len()
        )));
    }
    m.check_inputs(&inputs)?;
    let all_binary = bool_param(&request.parameters, "binary_data_output")?;
    let outputs = match request.outputs.is_empty() {
        true => m
            .outputs
            .iter()
            .map(|o| (o.name.clone(), all_binary))
            .collect(),
        false => {
            m.check_outputs(request.outputs.iter().map(|o| o.name.as_str()))?;
            request
                .outputs
                .iter()
                .map(|o| {
                    if o.parameters.contains_key("classification") {
                        return Err(ServeError::BadRequest(
                            "the classification extension is not supported".into(),
                        ));
                    }
                    Ok((
                        o.name.clone(),
                        all_binary || bool_param(&o.parameters, "binary_data")?,
                    ))
                })
                .collect::<Result<_, _>>()?
        }
    };
    Ok(Prepared {
        id: request.id,
        inputs,
        outputs,
        deadline,
    })
}

impl Prepared {
    async fn run(self, m: &ModelEntry) -> Result<Response, ServeError> {
        let results = m.infer(self.inputs, self.deadline).await?;
        let bytes: usize = results.iter().map(|(_, t)| t.byte_len()).sum();
        let (model, id, outputs) = (m.name.clone(), self.id, self.outputs);
        match bytes >= DECODE_ON_BLOCKING_POOL {
            true => tokio::task::spawn_blocking(move || encode(&model, id, &outputs, results))
                .await
                .unwrap_or_else(|e| Err(ServeError::Internal(format!("encoding the answer: {e}")))),
            false => encode(&model, id, &outputs, results),
        }
    }
}

/// The answer: a JSON head, then the binary outputs' bytes when any output is asked for
/// as binary data.
fn encode(
    model: &str,
    id: Option<String>,
    wanted: &[(String, bool)],
    results: Vec<(String, Tensor)>,
) -> Result<Response, ServeError> {
    let mut outputs = Vec::with_capacity(wanted.len());
    let mut binary: Vec<u8> = Vec::new();
    for (name, as_binary) in wanted {
        let i = results.iter().position(|(n, _)| n == name).ok_or_else(|| {
            ServeError::Internal(format!("model '{model}' returned no output '{name}'"))
        })?;
        let tensor = &results[i].1;
        let dt = datatype::output_datatype(tensor, name)?;
        let shape: Vec<usize> = tensor.shape().to_vec();
        let mut out = json!({ "name": name, "datatype": dt.name(), "shape": shape });
        if *as_binary {
            let raw = datatype::tensor_to_raw(tensor, dt);
            out["parameters"] = json!({ "binary_data_size": raw.len() });
            binary.extend_from_slice(&raw);
        } else {
            out["data"] = datatype::tensor_to_json(tensor, dt);
        }
        outputs.push(out);
    }
    drop(results);
    let mut head = json!({
        "model_name": model,
        "model_version": MODEL_VERSION,
        "outputs": outputs,
    });
    if let Some(id) = id {
        head["id"] = Json::String(id);
    }
    let head = head.to_string();
    if !wanted.iter().any(|(_, b)| *b) {
        let mut r = Response::new(Body::from(head));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return Ok(r);
    }
    let head_len = head.len();
    let mut body = head.into_bytes();
    body.extend_from_slice(&binary);
    let mut r = Response::new(Body::from(body));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    r.headers_mut()
        .insert(HEADER_LENGTH, HeaderValue::from(head_len));
    Ok(r)
}
