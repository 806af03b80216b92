//! Overload and faults, counted: a full queue refuses at once, a request past its deadline
//! never runs, a client that leaves takes its request out of the queue, shutdown drains every
//! admitted request and refuses new ones. Every test checks sent = answered + refused +
//! expired (+ cancelled) on the client side, the same counts in `/metrics`, and the model's
//! own count of runs — nothing lost, nothing answered or run twice.
//!
//! The runs wait at a gate the test opens ([`GatedModel`]), so which requests wait, expire
//! or are refused follows from the test's steps, not from timing.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::json;
use spillway_serve::proto::model_infer_request::InferInputTensor;
use spillway_serve::proto::{InferParameter, InferTensorContents, ModelInferRequest};
use spillway_serve::{ModelOptions, RunningServer, SessionModel};

fn outcome(text: &str, model: &str, o: &str) -> f64 {
    metric(
        text,
        &format!("spillway_requests_total{{model=\"{model}\",outcome=\"{o}\"}}"),
    )
    .unwrap_or(-1.0)
}

fn grpc_request(value: f32, timeout_us: Option<i64>) -> ModelInferRequest {
    let mut r = ModelInferRequest {
        model_name: "gated".into(),
        inputs: vec![InferInputTensor {
            name: "x".into(),
            datatype: "FP32".into(),
            shape: vec![1],
            contents: Some(InferTensorContents {
                fp32_contents: vec![value],
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    if let Some(t) = timeout_us {
        r.parameters.insert(
            "timeout".into(),
            InferParameter {
                parameter_choice: Some(
                    spillway_serve::proto::infer_parameter::ParameterChoice::Int64Param(t),
                ),
            },
        );
    }
    r
}

async fn gated_server(instances: usize, queue: usize) -> (RunningServer, Arc<GatedModel>) {
    let model = Arc::new(GatedModel::default());
    let server = start(vec![(
        "gated",
        model.clone(),
        ModelOptions { instances, queue },
    )])
    .await;
    (server, model)
}

/// Waits until `n` runs have started (a condition, polled).
async fn wait_started(model: &GatedModel, n: usize) {
    for _ in 0..6000 {
        if model.started() == n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("{n} runs never started (started: {})", model.started());
}

fn spawn_http(
    client: &reqwest::Client,
    server: &RunningServer,
    value: f32,
    timeout: Option<i64>,
) -> tokio::task::JoinHandle<(u16, serde_json::Value)> {
    let client = client.clone();
    let url = format!("{}/v2/models/gated/infer", base(server));
    tokio::spawn(async move { post_json(&client, &url, &gated_request(value, timeout)).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_at_once_and_every_admitted_request_is_answered() {
    let (server, model) = gated_server(1, 3).await;
    let client = reqwest::Client::new();
    let running = spawn_http(&client, &server, 0.0, None);
    wait_started(&model, 1).await;
    let queued: Vec<_> = (1..=3)
        .map(|i| spawn_http(&client, &server, i as f32, None))
        .collect();
    wait_for_depth(&client, &server, 3.0).await;
    // The gate is closed: these can only be answered by refusal, and they are.
    let url = format!("{}/v2/models/gated/infer", base(&server));
    let mut refused = 0;
    for i in 0..5 {
        let (status, body) = post_json(&client, &url, &gated_request(10.0 + i as f32, None)).await;
        assert_eq!(status, 429, "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap_or_default()
                .contains("queue of 3"),
            "{body}"
        );
        refused += 1;
    }
    let mut g = grpc_client(&server).await;
    let status = g
        .model_infer(grpc_request(99.0, None))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    refused += 1;
    model.open();
    let mut answered = 0;
    for (i, h) in std::iter::once(running).chain(queued).enumerate() {
        let (status, body) = h.await.expect("task");
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["outputs"][0]["data"],
            json!([i as f64]),
            "each answer is its own"
        );
        answered += 1;
    }
    let sent = 4 + 6;
    assert_eq!(sent, answered + refused);
    assert_eq!(
        model.finished(),
        answered,
        "every admitted request ran once"
    );
    let text = metrics(&client, &server).await;
    assert_eq!(
        outcome(&text, "gated", "success"),
        answered as f64,
        "{text}"
    );
    assert_eq!(outcome(&text, "gated", "refused"), refused as f64, "{text}");
    assert_eq!(
        metric(&text, "spillway_queue_depth{model=\"gated\"}"),
        Some(0.0)
    );
    let gauge = |name: &str| metric(&text, &format!("{name}{{model=\"gated\"}}"));
    assert_eq!(gauge("spillway_queue_capacity"), Some(3.0));
    assert_eq!(gauge("spillway_instances"), Some(1.0));
    assert_eq!(gauge("spillway_runs_in_flight"), Some(0.0));
    assert_eq!(
        metric(&text, "spillway_compute_seconds_count{model=\"gated\"}"),
        Some(answered as f64)
    );
    server.shutdown();
    server.wait().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_their_deadline_are_answered_504_and_never_run() {
    let (server, model) = gated_server(1, 8).await;
    let client = reqwest::Client::new();
    let running = spawn_http(&client, &server, 0.0, None);
    wait_started(&model, 1).await;
    // Deadlines of 1 ms while the only worker is held: they expire in the queue.
    let http: Vec<_> = (0..3)
        .map(|i| spawn_http(&client, &server, i as f32, Some(1000)))
        .collect();
    let mut g = grpc_client(&server).await;
    let grpc: Vec<_> = (0..2)
        .map(|i| {
            let mut g = g.clone();
            tokio::spawn(async move { g.model_infer(grpc_request(i as f32, Some(1000))).await })
        })
        .collect();
    let mut expired = 0;
    for h in http {
        let (status, body) = h.await.expect("task");
        assert_eq!(status, 504, "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap_or_default()
                .contains("deadline"),
            "{body}"
        );
        expired += 1;
    }
    for h in grpc {
        let status = h.await.expect("task").expect_err("expired");
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
        expired += 1;
    }
    // gRPC's own deadline (the grpc-timeout header): the call ends at the deadline, the
    // request never runs, and the server counts it expired.
    let mut with_header = tonic::Request::new(grpc_request(5.0, None));
    with_header.set_timeout(std::time::Duration::from_millis(1));
    let status = g
        .model_infer(with_header)
        .await
        .expect_err("the deadline passes");
    assert!(
        matches!(
            status.code(),
            tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
        ),
        "{status:?}"
    );
    expired += 1;
    wait_for_metric(
        &client,
        &server,
        "spillway_requests_total{model=\"gated\",outcome=\"expired\"}",
        6.0,
    )
    .await;
    // A generous deadline is no obstacle.
    let patient = spawn_http(&client, &server, 7.0, Some(600_000_000));
    wait_for_depth(&client, &server, 1.0).await;
    assert_eq!(model.started(), 1, "the expired requests never started");
    model.open();
    let (status, _) = running.await.expect("task");
    assert_eq!(status, 200);
    let (status, body) = patient.await.expect("task");
    assert_eq!(status, 200);
    assert_eq!(body["outputs"][0]["data"], json!([7.0]));
    let answered = 2;
    assert_eq!(1 + 6 + 1, answered + expired);
    assert_eq!(model.finished(), answered);
    let ok = g.model_infer(grpc_request(1.0, Some(0))).await;
    assert!(ok.is_ok(), "timeout 0 is no deadline: {ok:?}");
    let text = metrics(&client, &server).await;
    assert_eq!(outcome(&text, "gated", "expired"), expired as f64, "{text}");
    assert_eq!(
        outcome(&text, "gated", "success"),
        answered as f64 + 1.0,
        "{text}"
    );
    server.shutdown();
    server.wait().await.expect("clean stop");
}

/// Waits until the gated model's queue holds `n` requests.
async fn wait_for_depth(client: &reqwest::Client, server: &RunningServer, n: f64) {
    wait_for_metric(client, server, "spillway_queue_depth{model=\"gated\"}", n).await;
}

/// With `running` holding the only instance and `leaving` queued behind it, drops `leaving`'s
/// call and checks that its request leaves the queue, is counted cancelled and never runs.
async fn leave_the_queue<T>(
    server: RunningServer,
    model: &GatedModel,
    client: &reqwest::Client,
    running: tokio::task::JoinHandle<(u16, serde_json::Value)>,
    leaving: tokio::task::JoinHandle<T>,
) {
    wait_for_depth(client, &server, 1.0).await;
    // Aborting the task drops the call: gRPC cancels the stream, HTTP closes the connection.
    leaving.abort();
    let cancelled = "spillway_requests_total{model=\"gated\",outcome=\"cancelled\"}";
    wait_for_metric(client, &server, cancelled, 1.0).await;
    wait_for_depth(client, &server, 0.0).await;
    model.open();
    let (status, _) = running.await.expect("task");
    assert_eq!(status, 200);
    server.shutdown();
    server.wait().await.expect("clean stop");
    assert_eq!(model.started(), 1, "the abandoned request never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_client_that_cancels_takes_its_request_out_of_the_queue() {
    let (server, model) = gated_server(1, 4).await;
    let client = reqwest::Client::new();
    let running = spawn_http(&client, &server, 0.0, None);
    wait_started(&model, 1).await;
    let g = grpc_client(&server).await;
    let leaving = {
        let mut g = g.clone();
        tokio::spawn(async move { g.model_infer(grpc_request(1.0, None)).await })
    };
    leave_the_queue(server, &model, &client, running, leaving).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_client_that_disconnects_takes_its_request_out_of_the_queue() {
    let (server, model) = gated_server(1, 4).await;
    let client = reqwest::Client::new();
    let running = spawn_http(&client, &server, 0.0, None);
    wait_started(&model, 1).await;
    // Its own client: aborting the task closes that connection.
    let leaving = spawn_http(&reqwest::Client::new(), &server, 1.0, None);
    leave_the_queue(server, &model, &client, running, leaving).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_every_admitted_request_and_refuses_new_ones() {
    let (server, model) = gated_server(2, 4).await;
    let client = reqwest::Client::new();
    let g = grpc_client(&server).await;
    let mut admitted = Vec::new();
    for i in 0..2 {
        admitted.push(spawn_http(&client, &server, i as f32, None));
    }
    wait_started(&model, 2).await;
    let mut grpc_admitted = Vec::new();
    for i in 2..4 {
        admitted.push(spawn_http(&client, &server, i as f32, None));
    }
    for i in 4..6 {
        let mut g = g.clone();
        grpc_admitted.push(tokio::spawn(async move {
            g.model_infer(grpc_request(i as f32, None)).await
        }));
    }
    wait_for_depth(&client, &server, 4.0).await;
    let http_url = format!("{}/v2/models/gated/infer", base(&server));
    let handle = server.shutdown_handle();
    handle.shutdown();
    let stopping = tokio::spawn(server.wait());
    // New requests are refused: 503 / UNAVAILABLE, or the connection is refused outright.
    let mut refused = 0;
    for i in 0..3 {
        let r = reqwest::Client::new()
            .post(&http_url)
            .body(gated_request(100.0 + i as f32, None).to_string())
            .send()
            .await;
        match r {
            Ok(r) => assert_eq!(r.status().as_u16(), 503),
            Err(e) => assert!(e.is_connect() || e.is_request(), "{e}"),
        }
        refused += 1;
    }
    {
        let mut g = g.clone();
        let status = g
            .model_infer(grpc_request(200.0, None))
            .await
            .expect_err("refused");
        assert!(
            matches!(
                status.code(),
                tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
            ),
            "{status:?}"
        );
        refused += 1;
    }
    assert!(
        !stopping.is_finished(),
        "the server waits for its admitted requests"
    );
    model.open();
    let mut answered = 0;
    for (i, h) in admitted.into_iter().enumerate() {
        let (status, body) = h.await.expect("task");
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["outputs"][0]["data"], json!([i as f64]));
        answered += 1;
    }
    for (i, h) in grpc_admitted.into_iter().enumerate() {
        let r = h.await.expect("task").expect("answered").into_inner();
        assert_eq!(
            r.raw_output_contents[0].as_ref(),
            (4.0 + i as f32).to_le_bytes()
        );
        answered += 1;
    }
    stopping.await.expect("task").expect("clean stop");
    assert_eq!(6 + 4, answered + refused);
    assert_eq!(model.started(), 6);
    assert_eq!(
        model.finished(),
        6,
        "every admitted request ran exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_the_real_engine_is_fully_accounted_for() {
    let model = Arc::new(SessionModel::new(bundled_session()));
    let server = start(vec![(
        "inception_block",
        model,
        ModelOptions {
            instances: 2,
            queue: 3,
        },
    )])
    .await;
    let client = reqwest::Client::new();
    let url = format!("{}/v2/models/inception_block/infer", base(&server));
    let data: Vec<f32> = (0..3 * 64 * 64).map(|i| (i % 17) as f32 / 17.0).collect();
    let sent = 48;
    let tasks: Vec<_> = (0..sent)
        .map(|i| {
            let client = client.clone();
            let url = url.clone();
            let mut body = json!({ "inputs": [{ "name": "input", "shape": [1, 3, 64, 64], "datatype": "FP32", "data": data }] });
            if i % 4 == 3 {
                body["parameters"] = json!({ "timeout": 1 }); // 1 µs: expires before it runs
            }
            tokio::spawn(async move { post_json(&client, &url, &body).await.0 })
        })
        .collect();
    let (mut answered, mut refused, mut expired) = (0, 0, 0);
    for t in tasks {
        match t.await.expect("task") {
            200 => answered += 1,
            429 => refused += 1,
            504 => expired += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    eprintln!("burst: sent {sent} = answered {answered} + refused {refused} + expired {expired}");
    assert_eq!(sent, answered + refused + expired);
    assert!(answered >= 1, "some requests ran");
    let text = metrics(&client, &server).await;
    assert_eq!(
        outcome(&text, "inception_block", "success"),
        answered as f64,
        "{text}"
    );
    assert_eq!(
        outcome(&text, "inception_block", "refused"),
        refused as f64,
        "{text}"
    );
    assert_eq!(
        outcome(&text, "inception_block", "expired"),
        expired as f64,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "spillway_compute_seconds_count{model=\"inception_block\"}"
        ),
        Some(answered as f64)
    );
    server.shutdown();
    server.wait().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_overloaded_model_does_not_hold_up_another() {
    let gated = Arc::new(GatedModel::default());
    let server = start(vec![
        (
            "gated",
            gated.clone(),
            ModelOptions {
                instances: 1,
                queue: 1,
            },
        ),
        (
            "gather",
            Arc::new(SessionModel::new(gather_session())),
            ModelOptions::default(),
        ),
    ])
    .await;
    let client = reqwest::Client::new();
    let running = spawn_http(&client, &server, 0.0, None);
    wait_started(&gated, 1).await;
    let queued = spawn_http(&client, &server, 1.0, None);
    wait_for_depth(&client, &server, 1.0).await;
    let (status, _) = post_json(
        &client,
        &format!("{}/v2/models/gated/infer", base(&server)),
        &gated_request(2.0, None),
    )
    .await;
    assert_eq!(status, 429, "the gated model is full");
    // Its neighbour answers while it is stuck.
    let index =
        json!({ "inputs": [{ "name": "index", "shape": [1], "datatype": "INT64", "data": [3] }] });
    let (status, body) = post_json(
        &client,
        &format!("{}/v2/models/gather/infer", base(&server)),
        &index,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outputs"][0]["data"], json!([40.0]));
    assert_eq!(gated.finished(), 0, "the gated model is still held");
    gated.open();
    assert_eq!(running.await.expect("task").0, 200);
    assert_eq!(queued.await.expect("task").0, 200);
    server.shutdown();
    server.wait().await.expect("clean stop");
}
