//! Open-loop load generator: Poisson arrivals at each given rate against `spillway serve`
//! (started in-process on loopback with the model given), over HTTP (binary tensors) or gRPC
//! (raw contents), as SIR+ (§7) measures its engine. Latency is taken from each request's
//! *scheduled* arrival, so a slow server cannot hide its queueing (no coordinated omission).
//! Bounded: `--seconds` per rate and `--max-requests` per rate.
//!
//! ```text
//! cargo run --release -p spillway-serve --example loadgen -- \
//!     [--model FILE.onnx] [--protocol http|grpc] [--rates 20,50,100] [--seconds 5] \
//!     [--max-requests 2000] [--instances 1] [--queue 64] [--out-dir benches/results]
//! ```
//!
//! Writes `serve-loadgen-<protocol>-<date>.json` and `.md` to the output directory: per rate the
//! requests sent, answered, refused (429 / RESOURCE_EXHAUSTED), failed, the throughput, and the
//! mean, p50, p90, p99 and p99.9 latency of the answered ones.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use serde_json::json;
use spillway::{DType, Session, Tensor, ThreadOptions};
use spillway_serve::datatype::{self, Datatype};
use spillway_serve::proto::ModelInferRequest;
use spillway_serve::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use spillway_serve::proto::model_infer_request::InferInputTensor;
use spillway_serve::{ModelOptions, ServerBuilder, SessionModel};

struct Args {
    model: PathBuf,
    protocol: String,
    rates: Vec<f64>,
    seconds: f64,
    max_requests: usize,
    instances: usize,
    queue: usize,
    out_dir: PathBuf,
}

fn parse_args() -> Result<Args> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize().unwrap_or(root);
    let mut a = Args {
        model: root.join("models/small/inception_block.onnx"),
        protocol: "http".into(),
        rates: vec![20.0, 50.0, 100.0],
        seconds: 5.0,
        max_requests: 2000,
        instances: 1,
        queue: 64,
        out_dir: root.join("benches/results"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--model" => a.model = value()?.into(),
            "--protocol" => a.protocol = value()?,
            "--rates" => {
                a.rates = value()?
                    .split(',')
                    .map(|r| {
                        r.trim()
                            .parse::<f64>()
                            .context("--rates: numbers, comma-separated")
                    })
                    .collect::<Result<_>>()?
            }
            "--seconds" => a.seconds = value()?.parse()?,
            "--max-requests" => a.max_requests = value()?.parse()?,
            "--instances" => a.instances = value()?.parse()?,
            "--queue" => a.queue = value()?.parse()?,
            "--out-dir" => a.out_dir = value()?.into(),
            "--bench" => {} // passed by `cargo bench`
            other => bail!("unknown flag {other} (see the file's doc comment)"),
        }
    }
    if !matches!(a.protocol.as_str(), "http" | "grpc") {
        bail!("--protocol: http or grpc");
    }
    if a.rates.iter().any(|r| !(r.is_finite() && *r > 0.0)) || a.seconds <= 0.0 {
        bail!("--rates and --seconds must be positive");
    }
    Ok(a)
}

/// xorshift64*: seeded, so every run offers the same arrival times.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn exponential(&mut self, rate: f64) -> f64 {
        -self.uniform().ln() / rate
    }
}

/// Seeded inputs for every model input (symbolic dimensions take 1).
fn inputs(session: &Session) -> Result<Vec<(String, Tensor)>> {
    let mut rng = Rng(0x5eed);
    session
        .inputs()
        .iter()
        .map(|i| {
            let shape: Vec<usize> = i
                .shape
                .as_ref()
                .map(|d| d.iter().map(|d| d.fixed().unwrap_or(1)).collect())
                .unwrap_or_default();
            let n: usize = shape.iter().product();
            let t = match i.dtype {
                Some(DType::F32) | None => Tensor::from_shape_vec(
                    &shape,
                    (0..n).map(|_| rng.uniform() as f32).collect::<Vec<f32>>(),
                ),
                Some(DType::I64) => Tensor::from_shape_vec(&shape, vec![1i64; n]),
                Some(other) => bail!(
                    "input '{}': {} inputs are not generated",
                    i.name,
                    other.name()
                ),
            }?;
            Ok((i.name.clone(), t))
        })
        .collect()
}

#[derive(Default)]
struct RateResult {
    sent: usize,
    ok: usize,
    refused: usize,
    failed: usize,
    latencies: Vec<f64>,
    wall: f64,
}

/// Today's UTC date, `YYYY-MM-DD` (the results' file names carry it).
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Howard Hinnant's days-to-civil.
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

enum Outcome {
    Ok,
    Refused,
    Failed,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let load_before = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string));
    let session = Session::builder()
        .with_thread_options(ThreadOptions::default().with_spin(false))
        .commit_from_file(&args.model)
        .with_context(|| format!("loading {}", args.model.display()))?;
    let inputs = inputs(&session)?;
    let model_name = "model";
    let server = ServerBuilder::new()
        .model(
            model_name,
            Arc::new(SessionModel::new(session)),
            ModelOptions {
                instances: args.instances,
                queue: args.queue,
            },
        )
        .start(
            Some(tokio::net::TcpListener::bind("127.0.0.1:0").await?),
            Some(tokio::net::TcpListener::bind("127.0.0.1:0").await?),
        )
        .await?;

    // The request, encoded once.
    let mut tail = Vec::new();
    let mut head_inputs = Vec::new();
    let mut grpc = ModelInferRequest {
        model_name: model_name.into(),
        ..Default::default()
    };
    for (name, t) in &inputs {
        let dt = Datatype::from_dtype(t.dtype()).context("input datatype")?;
        let raw = datatype::tensor_to_raw(t, dt);
        head_inputs.push(json!({ "name": name, "shape": t.shape(), "datatype": dt.name(), "parameters": { "binary_data_size": raw.len() } }));
        grpc.inputs.push(InferInputTensor {
            name: name.clone(),
            datatype: dt.name().into(),
            shape: t.shape().iter().map(|&d| d as i64).collect(),
            ..Default::default()
        });
        grpc.raw_input_contents.push(Bytes::from(raw.clone()));
        tail.extend_from_slice(&raw);
    }
    let head =
        json!({ "inputs": head_inputs, "parameters": { "binary_data_output": true } }).to_string();
    let head_len = head.len();
    let mut body = head.into_bytes();
    body.extend_from_slice(&tail);
    let body = Bytes::from(body);
    let url = format!(
        "http://{}/v2/models/{model_name}/infer",
        server.http_addr().context("HTTP")?
    );
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .build()?;
    let grpc_client = GrpcInferenceServiceClient::connect(format!(
        "http://{}",
        server.grpc_addr().context("gRPC")?
    ))
    .await?
    .max_decoding_message_size(256 << 20)
    .max_encoding_message_size(256 << 20);

    let mut rows = Vec::new();
    for &rate in &args.rates {
        let mut rng = Rng(0x1234_5678 ^ rate.to_bits());
        let start = Instant::now();
        let horizon = Duration::from_secs_f64(args.seconds);
        let mut at = Duration::ZERO;
        let mut tasks = Vec::new();
        while tasks.len() < args.max_requests {
            at += Duration::from_secs_f64(rng.exponential(rate));
            if at >= horizon {
                break;
            }
            let scheduled = start + at;
            tokio::time::sleep_until(tokio::time::Instant::from_std(scheduled)).await;
            let (http, url, body, mut g, req) = (
                http.clone(),
                url.clone(),
                body.clone(),
                grpc_client.clone(),
                grpc.clone(),
            );
            let protocol = args.protocol.clone();
            tasks.push(tokio::spawn(async move {
                let outcome = if protocol == "http" {
                    match http
                        .post(url)
                        .header(spillway_serve::HEADER_LENGTH, head_len.to_string())
                        .body(body)
                        .send()
                        .await
                    {
                        Ok(r) if r.status().as_u16() == 200 => match r.bytes().await {
                            Ok(_) => Outcome::Ok,
                            Err(_) => Outcome::Failed,
                        },
                        Ok(r) if r.status().as_u16() == 429 => Outcome::Refused,
                        _ => Outcome::Failed,
                    }
                } else {
                    match g.model_infer(req).await {
                        Ok(_) => Outcome::Ok,
                        Err(s) if s.code() == tonic::Code::ResourceExhausted => Outcome::Refused,
                        Err(_) => Outcome::Failed,
                    }
                };
                (outcome, scheduled.elapsed().as_secs_f64())
            }));
        }
        let mut r = RateResult {
            sent: tasks.len(),
            ..Default::default()
        };
        for t in tasks {
            let (outcome, latency) = t.await?;
            match outcome {
                Outcome::Ok => {
                    r.ok += 1;
                    r.latencies.push(latency);
                }
                Outcome::Refused => r.refused += 1,
                Outcome::Failed => r.failed += 1,
            }
        }
        r.wall = start.elapsed().as_secs_f64();
        r.latencies.sort_by(f64::total_cmp);
        let ms = |x: f64| (x * 1e5).round() / 100.0;
        let mean = r.latencies.iter().sum::<f64>() / r.latencies.len().max(1) as f64;
        let row = json!({
            "rate_per_s": rate,
            "sent": r.sent,
            "answered": r.ok,
            "refused": r.refused,
            "failed": r.failed,
            "throughput_per_s": (r.ok as f64 / r.wall * 100.0).round() / 100.0,
            "mean_ms": ms(mean),
            "p50_ms": ms(percentile(&r.latencies, 50.0)),
            "p90_ms": ms(percentile(&r.latencies, 90.0)),
            "p99_ms": ms(percentile(&r.latencies, 99.0)),
            "p999_ms": ms(percentile(&r.latencies, 99.9)),
        });
        eprintln!("{row}");
        rows.push(row);
    }
    server.shutdown();
    server.wait().await?;

    std::fs::create_dir_all(&args.out_dir)?;
    let stem = format!("serve-loadgen-{}-{}", args.protocol, today());
    let report = json!({
        "model": args.model.file_name().map(|f| f.to_string_lossy().to_string()),
        "protocol": args.protocol,
        "instances": args.instances,
        "queue": args.queue,
        "seconds_per_rate": args.seconds,
        "max_requests_per_rate": args.max_requests,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        // Other work on the machine (1-minute load average before the run), for honest reading.
        "load_average": load_before,
        "rates": rows,
    });
    std::fs::write(
        args.out_dir.join(format!("{stem}.json")),
        serde_json::to_string_pretty(&report)?,
    )?;
    let mut md = format!(
        "# `spillway serve` under open-loop Poisson load ({})\n\nModel {}, {} instance(s), queue {}, {} s or {} requests per rate, {} cores (1-minute load average {} before the run), loopback; the load generator runs in the server's process. Latency from each request's scheduled arrival (answered requests only).\n\n| rate/s | sent | answered | refused | failed | throughput/s | mean ms | p50 ms | p90 ms | p99 ms | p99.9 ms |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        args.protocol,
        report["model"].as_str().unwrap_or("?"),
        args.instances,
        args.queue,
        args.seconds,
        args.max_requests,
        report["cores"],
        report["load_average"].as_str().unwrap_or("?"),
    );
    for r in report["rates"].as_array().into_iter().flatten() {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r["rate_per_s"],
            r["sent"],
            r["answered"],
            r["refused"],
            r["failed"],
            r["throughput_per_s"],
            r["mean_ms"],
            r["p50_ms"],
            r["p90_ms"],
            r["p99_ms"],
            r["p999_ms"]
        ));
    }
    md.push_str(&format!(
        "\nMade by `cargo run --release -p spillway-serve --example loadgen -- --protocol {} --rates {} --seconds {} --instances {} --queue {}`.\n",
        args.protocol,
        args.rates.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(","),
        args.seconds,
        args.instances,
        args.queue
    ));
    std::fs::write(args.out_dir.join(format!("{stem}.md")), md)?;
    eprintln!("wrote {}/{stem}.json and .md", args.out_dir.display());
    Ok(())
}
