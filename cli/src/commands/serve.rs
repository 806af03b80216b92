//! `spillway serve`: serve models over the KServe v2 / Open Inference Protocol (HTTP and gRPC).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use spillway::{Devices, Session};
use spillway_serve::{ModelOptions, ServerBuilder, SessionModel};

use super::devices::parse_policy;
use super::engine_options::EngineArgs;
use super::run::DEFAULT_MODEL;

/// The flags of `spillway serve`.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// The models: FILE.onnx (served under its file name without the extension) or
    /// NAME=FILE.onnx; without one, the bundled inception block as `inception_block`.
    #[arg(value_name = "MODEL")]
    pub models: Vec<String>,
    /// The address to listen on (`0.0.0.0` for every interface).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The HTTP/REST port (0: any free port).
    #[arg(long, default_value_t = 8000)]
    pub http_port: u16,
    /// The gRPC port (0: any free port).
    #[arg(long, default_value_t = 8001)]
    pub grpc_port: u16,
    /// Runs of each model at once (worker threads per model, sharing one session).
    #[arg(long, default_value_t = 1)]
    pub instances: usize,
    /// Requests that may wait per model; one more is refused at once (429 /
    /// RESOURCE_EXHAUSTED).
    #[arg(long, default_value_t = 64)]
    pub queue: usize,
    /// Kernel threads each run may use (default: the cores divided by the lanes).
    #[arg(long)]
    pub threads: Option<usize>,
    /// CPU lanes of each session (parallel branches of one run).
    #[arg(long, default_value_t = 1)]
    pub lanes: usize,
    /// Placement policy of each session (greedy, lios, opara, hios-lp, auto, ...; default:
    /// sequential on one lane, auto on several).
    #[arg(long)]
    pub placement: Option<String>,
    /// The largest request or response, MiB.
    #[arg(long, default_value_t = 256)]
    pub max_message_mb: usize,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// The name and file of each `MODEL` argument.
fn model_specs(models: &[String]) -> Result<Vec<(String, Option<PathBuf>)>> {
    if models.is_empty() {
        return Ok(vec![("inception_block".into(), None)]);
    }
    models
        .iter()
        .map(|m| match m.split_once('=') {
            Some((name, path)) if !name.is_empty() && !name.contains('/') => {
                Ok((name.to_string(), Some(PathBuf::from(path))))
            }
            _ => {
                let path = PathBuf::from(m);
                let name = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .filter(|s| !s.is_empty())
                    .with_context(|| format!("cannot name a model after '{m}': use NAME={m}"))?;
                Ok((name.to_string(), Some(path)))
            }
        })
        .collect()
}

fn load(args: &ServeArgs, path: Option<&Path>) -> Result<Session> {
    let mut builder = args.engine.apply(Session::builder());
    if args.lanes == 0 {
        bail!("--lanes must be at least 1");
    }
    if args.lanes > 1 {
        builder = builder.with_devices(Devices::cpu().with_cpu_lanes(args.lanes));
    }
    if let Some(p) = &args.placement {
        builder = builder.with_placement(parse_policy(p)?);
    }
    if let Some(t) = args.threads {
        builder = builder.with_intra_op_threads(t);
    }
    match path {
        Some(p) => builder
            .commit_from_file(p)
            .with_context(|| format!("loading {}", p.display())),
        None => builder
            .commit_from_memory(DEFAULT_MODEL)
            .context("loading the bundled model"),
    }
}

/// Loads every model and serves them until Ctrl-C or SIGTERM, then drains.
pub fn serve(args: &ServeArgs) -> Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    if args.instances == 0 || args.queue == 0 {
        bail!("--instances and --queue must be at least 1");
    }
    let options = ModelOptions {
        instances: args.instances,
        queue: args.queue,
    };
    let mut server =
        ServerBuilder::new().max_message_bytes(args.max_message_mb.saturating_mul(1 << 20));
    for (name, path) in model_specs(&args.models)? {
        let session = load(args, path.as_deref())?;
        server = server.model(name, Arc::new(SessionModel::new(session)), options);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let bind = |port: u16| {
            let addr: SocketAddr = format!("{}:{port}", args.host)
                .parse()
                .with_context(|| format!("--host {}: not an IP address", args.host))?;
            anyhow::Ok(addr)
        };
        let http = tokio::net::TcpListener::bind(bind(args.http_port)?)
            .await
            .with_context(|| format!("listening for HTTP on port {}", args.http_port))?;
        let grpc = tokio::net::TcpListener::bind(bind(args.grpc_port)?)
            .await
            .with_context(|| format!("listening for gRPC on port {}", args.grpc_port))?;
        let running = server.start(Some(http), Some(grpc)).await?;
        if let (Some(h), Some(g)) = (running.http_addr(), running.grpc_addr()) {
            say!("serving HTTP on http://{h} and gRPC on {g}; Ctrl-C or SIGTERM stops");
        }
        running.run_until_signal().await?;
        say!("stopped: every admitted request was answered");
        anyhow::Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_named_after_their_files_or_explicitly() {
        let specs = model_specs(&["a/b/resnet.onnx".into(), "det=x/y.onnx".into()]).unwrap();
        assert_eq!(
            specs[0],
            ("resnet".into(), Some(PathBuf::from("a/b/resnet.onnx")))
        );
        assert_eq!(specs[1], ("det".into(), Some(PathBuf::from("x/y.onnx"))));
        assert_eq!(model_specs(&[]).unwrap()[0].0, "inception_block");
    }
}
