//! The Open Inference Protocol over real clients (reqwest for HTTP, the generated tonic client
//! for gRPC) against a server on loopback: every endpoint, JSON and binary tensors, every
//! datatype, errors with their statuses, several models — outputs compared with a direct
//! `Session::run`.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::*;
use serde_json::{Value as Json, json};
use spillway::Tensor;
use spillway_serve::datatype::{self, Datatype};
use spillway_serve::proto::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
use spillway_serve::proto::{self, InferParameter, ModelInferRequest};
use spillway_serve::{ModelOptions, RunningServer, SessionModel};

/// Seeded input of the bundled model: [2, 3, 64, 64].
fn image() -> Tensor {
    let n = 2 * 3 * 64 * 64;
    let data: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    Tensor::from_shape_vec(&[2, 3, 64, 64], data).expect("image")
}

/// The `big` model's input: [128, 256], half of it negative.
fn big_input() -> Tensor {
    let data: Vec<f32> = (0..128 * 256).map(|i| (i % 101) as f32 - 50.0).collect();
    Tensor::from_shape_vec(&[128, 256], data).expect("big input")
}

/// One [2, 3] tensor per datatype of the `dtypes` model, with extreme values.
fn typed_inputs() -> Vec<(String, Tensor)> {
    DTYPES
        .iter()
        .map(|(suffix, _)| {
            let dt = match *suffix {
                "f32" => Datatype::F32,
                "u8" => Datatype::U8,
                "i8" => Datatype::I8,
                "u16" => Datatype::U16,
                "i16" => Datatype::I16,
                "i32" => Datatype::I32,
                "i64" => Datatype::I64,
                "str" => Datatype::Bytes,
                "bool" => Datatype::Bool,
                "f16" => Datatype::F16,
                "f64" => Datatype::F64,
                "u32" => Datatype::U32,
                "u64" => Datatype::U64,
                _ => Datatype::BF16,
            };
            let data = match dt {
                Datatype::Bool => json!([true, false, true, true, false, false]),
                Datatype::Bytes => json!(["", "a", "héllo", "x y", "0", "last"]),
                Datatype::U64 => json!([0, 1, 2, 3, 4, u64::MAX]),
                Datatype::I64 => json!([i64::MIN, -1, 0, 1, 2, i64::MAX]),
                Datatype::U8 | Datatype::U16 | Datatype::U32 => json!([0, 1, 2, 3, 4, 255]),
                Datatype::F16 | Datatype::BF16 | Datatype::F32 | Datatype::F64 => {
                    json!([-1.5, 0.0, 0.25, 3.0, 65504.0, -2.0])
                }
                _ => json!([-128, -1, 0, 1, 2, 127]),
            };
            let t = datatype::tensor_from_json(dt, &[2, 3], &data, suffix).expect("typed input");
            (format!("x_{suffix}"), t)
        })
        .collect()
}

/// The raw bytes of every tensor, by name: outputs compared bit for bit.
fn raw(outputs: &[(String, Tensor)]) -> Vec<(String, Vec<usize>, Vec<u8>)> {
    let mut v: Vec<_> = outputs
        .iter()
        .map(|(n, t)| {
            let dt = Datatype::from_dtype(t.dtype()).expect("a protocol datatype");
            (
                n.clone(),
                t.shape().to_vec(),
                datatype::tensor_to_raw(t, dt),
            )
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn direct(session: &spillway::Session, inputs: &[(String, Tensor)]) -> Vec<(String, Tensor)> {
    session
        .run(inputs.to_vec())
        .expect("direct run")
        .iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect()
}

async fn server() -> RunningServer {
    let two = ModelOptions {
        instances: 2,
        queue: 16,
    };
    start(vec![
        (
            "inception_block",
            Arc::new(SessionModel::new(bundled_session())),
            two,
        ),
        ("dtypes", Arc::new(SessionModel::new(dtypes_session())), two),
        (
            "gather",
            Arc::new(SessionModel::new(gather_session())),
            ModelOptions::default(),
        ),
        (
            "big",
            Arc::new(SessionModel::new(session_of(&big_model()))),
            ModelOptions::default(),
        ),
    ])
    .await
}

/// The JSON request for `inputs` (binary: data after the JSON, `binary_data` outputs).
fn http_request(inputs: &[(String, Tensor)], binary: bool) -> (Vec<u8>, Option<usize>) {
    let mut tail = Vec::new();
    let ins: Vec<Json> = inputs
        .iter()
        .map(|(name, t)| {
            let dt = Datatype::from_dtype(t.dtype()).expect("datatype");
            let mut i = json!({ "name": name, "shape": t.shape(), "datatype": dt.name() });
            if binary {
                let r = datatype::tensor_to_raw(t, dt);
                i["parameters"] = json!({ "binary_data_size": r.len() });
                tail.extend_from_slice(&r);
            } else {
                i["data"] = datatype::tensor_to_json(t, dt);
            }
            i
        })
        .collect();
    let mut body = json!({ "id": "req-1", "inputs": ins });
    if binary {
        body["parameters"] = json!({ "binary_data_output": true });
    }
    let mut bytes = body.to_string().into_bytes();
    let head = bytes.len();
    bytes.extend_from_slice(&tail);
    (bytes, binary.then_some(head))
}

/// Decodes an HTTP inference answer (JSON or binary) into tensors.
fn http_outputs(head: &Json, binary: &[u8]) -> Vec<(String, Tensor)> {
    let mut offset = 0;
    head["outputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .map(|o| {
            let name = o["name"].as_str().expect("name").to_string();
            let dt = Datatype::parse(o["datatype"].as_str().expect("datatype")).expect("known");
            let shape: Vec<i64> = serde_json::from_value(o["shape"].clone()).expect("shape");
            let t = match o["parameters"]["binary_data_size"].as_u64() {
                Some(n) => {
                    let n = n as usize;
                    let t =
                        datatype::tensor_from_raw(dt, &shape, &binary[offset..offset + n], &name);
                    offset += n;
                    t
                }
                None => datatype::tensor_from_json(dt, &shape, &o["data"], &name),
            };
            (name, t.expect("output decodes"))
        })
        .collect()
}

async fn http_infer(
    client: &reqwest::Client,
    url: &str,
    inputs: &[(String, Tensor)],
    binary: bool,
) -> Vec<(String, Tensor)> {
    let (body, head) = http_request(inputs, binary);
    let mut req = client.post(url).body(body);
    if let Some(n) = head {
        req = req.header(spillway_serve::HEADER_LENGTH, n.to_string());
    }
    let r = req.send().await.expect("answer");
    assert_eq!(r.status().as_u16(), 200, "{url}");
    let head_len = r.headers().get(spillway_serve::HEADER_LENGTH).map(|v| {
        v.to_str()
            .expect("ascii")
            .parse::<usize>()
            .expect("a length")
    });
    assert_eq!(head_len.is_some(), binary, "binary answers only when asked");
    let bytes = r.bytes().await.expect("body");
    let n = head_len.unwrap_or(bytes.len());
    let head: Json = serde_json::from_slice(&bytes[..n]).expect("JSON head");
    assert_eq!(head["id"], "req-1");
    assert_eq!(head["model_version"], "1");
    http_outputs(&head, &bytes[n..])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_json_and_binary_match_a_direct_run_for_every_datatype() {
    let server = server().await;
    let client = reqwest::Client::new();
    let b = base(&server);
    let cases = [
        (
            "inception_block",
            vec![("input".to_string(), image())],
            bundled_session(),
        ),
        ("dtypes", typed_inputs(), dtypes_session()),
        (
            "big",
            vec![("x".to_string(), big_input())],
            session_of(&big_model()),
        ),
    ];
    for (model, inputs, session) in &cases {
        let want = raw(&direct(session, inputs));
        for binary in [false, true] {
            for path in [
                format!("{b}/v2/models/{model}/infer"),
                format!("{b}/v2/models/{model}/versions/1/infer"),
            ] {
                let got = http_infer(&client, &path, inputs, binary).await;
                // Bit for bit even as JSON: every float travels as the shortest decimal of
                // its double, which converts back to the same value.
                assert_eq!(raw(&got), want, "{model} binary={binary}");
            }
        }
    }
    server.shutdown();
    server.wait().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_raw_and_typed_contents_match_a_direct_run() {
    let server = server().await;
    let mut g = grpc_client(&server).await;
    let cases = [
        (
            "inception_block",
            vec![("input".to_string(), image())],
            bundled_session(),
        ),
        ("dtypes", typed_inputs(), dtypes_session()),
    ];
    for (model, inputs, session) in &cases {
        let want = raw(&direct(session, inputs));
        for typed in [false, true] {
            let mut req = ModelInferRequest {
                model_name: model.to_string(),
                id: "g-1".into(),
                ..Default::default()
            };
            for (name, t) in inputs {
                let dt = Datatype::from_dtype(t.dtype()).expect("datatype");
                let contents = typed.then(|| datatype::tensor_to_contents(t, dt)).flatten();
                if contents.is_none() {
                    req.raw_input_contents
                        .push(Bytes::from(datatype::tensor_to_raw(t, dt)));
                }
                req.inputs.push(InferInputTensor {
                    name: name.clone(),
                    datatype: dt.name().into(),
                    shape: t.shape().iter().map(|&d| d as i64).collect(),
                    contents,
                    ..Default::default()
                });
            }
            let mixes_raw_and_typed = !req.raw_input_contents.is_empty()
                && req.raw_input_contents.len() != req.inputs.len();
            let answer = g.model_infer(req).await;
            if mixes_raw_and_typed {
                // FP16/BF16 have no typed contents: raw for some inputs and typed for others
                // is not a valid request.
                let status = answer.expect_err("a mix of raw and typed inputs is refused");
                assert_eq!(status.code(), tonic::Code::InvalidArgument);
                continue;
            }
            let r = answer.expect("inference").into_inner();
            assert_eq!(r.id, "g-1");
            assert_eq!(r.outputs.len(), r.raw_output_contents.len());
            let got: Vec<(String, Tensor)> = r
                .outputs
                .iter()
                .zip(&r.raw_output_contents)
                .map(|(o, bytes)| {
                    let dt = Datatype::parse(&o.datatype).expect("datatype");
                    let t =
                        datatype::tensor_from_raw(dt, &o.shape, bytes, &o.name).expect("decodes");
                    (o.name.clone(), t)
                })
                .collect();
            assert_eq!(raw(&got), want, "{model} typed={typed}");
        }
    }
    // Asking for one output returns that one only.
    let inputs = typed_inputs();
    let mut req = ModelInferRequest {
        model_name: "dtypes".into(),
        outputs: vec![InferRequestedOutputTensor {
            name: "y_i64".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    for (name, t) in &inputs {
        let dt = Datatype::from_dtype(t.dtype()).expect("datatype");
        req.raw_input_contents
            .push(datatype::tensor_to_raw(t, dt).into());
        req.inputs.push(InferInputTensor {
            name: name.clone(),
            datatype: dt.name().into(),
            shape: vec![2, 3],
            ..Default::default()
        });
    }
    let r = g.model_infer(req).await.expect("inference").into_inner();
    assert_eq!(r.outputs.len(), 1);
    assert_eq!(r.outputs[0].name, "y_i64");
    server.shutdown();
    server.wait().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_metadata_and_config_answer_on_both_protocols() {
    let server = server().await;
    let client = reqwest::Client::new();
    let b = base(&server);
    for path in [
        "/v2/health/live",
        "/v2/health/ready",
        "/v2/models/dtypes/ready",
        "/v2/models/dtypes/versions/1/ready",
    ] {
        let r = client
            .get(format!("{b}{path}"))
            .send()
            .await
            .expect("answer");
        assert_eq!(r.status().as_u16(), 200, "{path}");
    }
    let get = |path: &str| {
        let client = client.clone();
        let url = format!("{b}{path}");
        async move {
            let r = client.get(url).send().await.expect("answer");
            let status = r.status().as_u16();
            let bytes = r.bytes().await.unwrap_or_default();
            (
                status,
                serde_json::from_slice::<Json>(&bytes).unwrap_or(Json::Null),
            )
        }
    };
    let (s, meta) = get("/v2").await;
    assert_eq!(s, 200);
    assert_eq!(meta["name"], "spillway");
    assert_eq!(meta["extensions"], json!(spillway_serve::EXTENSIONS));
    let (s, m) = get("/v2/models/inception_block").await;
    assert_eq!(s, 200);
    assert_eq!(
        m["inputs"],
        json!([{ "name": "input", "datatype": "FP32", "shape": [-1, 3, 64, 64] }])
    );
    assert_eq!(m["outputs"][0]["name"], "probabilities");
    assert_eq!(m["versions"], json!(["1"]));
    let (s, m) = get("/v2/models/dtypes/versions/1").await;
    assert_eq!(s, 200);
    let types: Vec<&str> = m["inputs"]
        .as_array()
        .expect("inputs")
        .iter()
        .map(|i| i["datatype"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(types.len(), DTYPES.len());
    for dt in Datatype::ALL {
        assert!(types.contains(&dt.name()), "{} in {types:?}", dt.name());
    }
    let (s, c) = get("/v2/models/inception_block/config").await;
    assert_eq!(s, 200);
    assert_eq!(c["input"][0]["data_type"], "TYPE_FP32");
    assert_eq!(c["instance_group"][0]["count"], 2);
    let (s, e) = get("/v2/models/nope").await;
    assert_eq!(s, 404);
    assert!(e["error"].as_str().expect("error text").contains("nope"));
    let (s, _) = get("/v2/models/dtypes/versions/7").await;
    assert_eq!(s, 404);
    let (s, _) = get("/v2/no/such/route").await;
    assert_eq!(s, 404);

    let mut g = grpc_client(&server).await;
    assert!(
        g.server_live(proto::ServerLiveRequest {})
            .await
            .expect("live")
            .into_inner()
            .live
    );
    assert!(
        g.server_ready(proto::ServerReadyRequest {})
            .await
            .expect("ready")
            .into_inner()
            .ready
    );
    let ready = g
        .model_ready(proto::ModelReadyRequest {
            name: "gather".into(),
            version: String::new(),
        })
        .await
        .expect("model ready");
    assert!(ready.into_inner().ready);
    let sm = g
        .server_metadata(proto::ServerMetadataRequest {})
        .await
        .expect("metadata")
        .into_inner();
    assert_eq!(sm.name, "spillway");
    let mm = g
        .model_metadata(proto::ModelMetadataRequest {
            name: "inception_block".into(),
            version: "1".into(),
        })
        .await
        .expect("model metadata")
        .into_inner();
    assert_eq!(mm.inputs[0].shape, vec![-1, 3, 64, 64]);
    assert_eq!(mm.inputs[0].datatype, "FP32");
    let missing = g
        .model_metadata(proto::ModelMetadataRequest {
            name: "nope".into(),
            version: String::new(),
        })
        .await
        .expect_err("unknown model");
    assert_eq!(missing.code(), tonic::Code::NotFound);
    server.shutdown();
    server.wait().await.expect("clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_right_status_and_a_failed_run_answers_only_its_request() {
    let server = server().await;
    let client = reqwest::Client::new();
    let b = base(&server);
    let url = format!("{b}/v2/models/gather/infer");
    let index = |i: i64| json!({ "inputs": [{ "name": "index", "shape": [1], "datatype": "INT64", "data": [i] }] });
    let cases: Vec<(Json, u16, &str)> = vec![
        (
            json!({ "inputs": [{ "name": "index", "shape": [1], "datatype": "FP32", "data": [1.0] }] }),
            400,
            "expects INT64",
        ),
        (
            json!({ "inputs": [{ "name": "index", "shape": [2], "datatype": "INT64", "data": [1, 2] }] }),
            400,
            "shape",
        ),
        (
            json!({ "inputs": [{ "name": "index", "shape": [1], "datatype": "INT64", "data": [1, 2] }] }),
            400,
            "elements",
        ),
        (
            json!({ "inputs": [{ "name": "other", "shape": [1], "datatype": "INT64", "data": [1] }] }),
            400,
            "no input 'other'",
        ),
        (json!({ "inputs": [] }), 400, "missing"),
        (
            json!({ "inputs": [{ "name": "index", "shape": [1], "datatype": "INT99", "data": [1] }] }),
            400,
            "unknown datatype",
        ),
        (
            json!({ "inputs": [{ "name": "index", "shape": [1], "datatype": "INT64", "data": [1] }], "outputs": [{ "name": "nope" }] }),
            400,
            "no output 'nope'",
        ),
        (
            json!({ "inputs": [{ "name": "index", "shape": [1], "datatype": "INT64", "data": [1] }], "parameters": { "timeout": -5 } }),
            400,
            "negative",
        ),
        (json!({ "inputs": "not a list" }), 400, "malformed"),
        (index(9), 500, "Gather"),
    ];
    for (body, status, text) in &cases {
        let (s, answer) = post_json(&client, &url, body).await;
        assert_eq!(s, *status, "{body} -> {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(text),
            "{body}: '{error}' should mention '{text}'"
        );
    }
    // After all of that, a good request to the same model succeeds.
    let (s, answer) = post_json(&client, &url, &index(2)).await;
    assert_eq!(s, 200, "{answer}");
    assert_eq!(answer["outputs"][0]["data"], json!([30.0]));
    let (s, _) = post_json(&client, &format!("{b}/v2/models/nope/infer"), &index(1)).await;
    assert_eq!(s, 404);
    // Malformed binary framing.
    let r = client
        .post(&url)
        .header(spillway_serve::HEADER_LENGTH, "100000")
        .body("{}")
        .send()
        .await
        .expect("answer");
    assert_eq!(r.status().as_u16(), 400);
    let body = json!({ "inputs": [{ "name": "index", "shape": [1], "datatype": "INT64", "parameters": { "binary_data_size": 8 } }] }).to_string();
    let head = body.len();
    let mut bytes = body.into_bytes();
    bytes.extend_from_slice(&[1, 0, 0, 0]); // 4 of the 8 bytes promised
    let r = client
        .post(&url)
        .header(spillway_serve::HEADER_LENGTH, head.to_string())
        .body(bytes)
        .send()
        .await
        .expect("answer");
    assert_eq!(r.status().as_u16(), 400);

    // gRPC: the same failure is INTERNAL naming the node; bad input is INVALID_ARGUMENT.
    let mut g = grpc_client(&server).await;
    let grpc_index = |i: i64, datatype: &str| ModelInferRequest {
        model_name: "gather".into(),
        inputs: vec![InferInputTensor {
            name: "index".into(),
            datatype: datatype.into(),
            shape: vec![1],
            contents: Some(proto::InferTensorContents {
                int64_contents: vec![i],
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    let failed = g
        .model_infer(grpc_index(9, "INT64"))
        .await
        .expect_err("fails");
    assert_eq!(failed.code(), tonic::Code::Internal);
    assert!(failed.message().contains("Gather"), "{}", failed.message());
    let invalid = g
        .model_infer(grpc_index(1, "FP32"))
        .await
        .expect_err("invalid");
    assert_eq!(invalid.code(), tonic::Code::InvalidArgument);
    let mut bad_timeout = grpc_index(1, "INT64");
    bad_timeout.parameters.insert(
        "timeout".into(),
        InferParameter {
            parameter_choice: Some(proto::infer_parameter::ParameterChoice::StringParam(
                "soon".into(),
            )),
        },
    );
    let invalid = g.model_infer(bad_timeout).await.expect_err("invalid");
    assert_eq!(invalid.code(), tonic::Code::InvalidArgument);
    let ok = g
        .model_infer(grpc_index(3, "INT64"))
        .await
        .expect("succeeds")
        .into_inner();
    assert_eq!(ok.raw_output_contents[0].as_ref(), 40.0f32.to_le_bytes());

    // Every request was counted once: 13 HTTP + 4 gRPC to `gather` (the 404s have no model).
    let text = metrics(&client, &server).await;
    let count = |o: &str| {
        metric(
            &text,
            &format!("spillway_requests_total{{model=\"gather\",outcome=\"{o}\"}}"),
        )
        .unwrap_or(-1.0)
    };
    assert_eq!(count("success"), 2.0, "{text}");
    assert_eq!(count("failed"), 2.0, "{text}");
    assert_eq!(count("invalid"), 9.0 + 2.0 + 2.0, "{text}");
    server.shutdown();
    server.wait().await.expect("clean stop");
}
