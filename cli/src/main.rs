//! The `spillway` command line.

/// `println!` for the commands' results: a closed standard output (`spillway run | head -1`)
/// ends the program quietly with status 0, as it does a Unix filter, instead of a panic.
macro_rules! say {
    () => {
        $crate::commands::write_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::commands::write_line(format_args!($($arg)*))
    };
}

mod commands;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use spillway::Session;
use spillway::profile::ProfileOptions;

use commands::devices::{DeviceArgs, parse_policy};
use commands::engine_options::EngineArgs;
use commands::inputs::DimSizes;
use commands::schedule::ScheduleArgs;

#[derive(Parser)]
#[command(
    name = "spillway",
    version,
    about = "Run ONNX models across the CPU and GPUs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a model and print its outputs and median latency.
    Run {
        /// The .onnx file; without one, a small bundled multi-branch CNN runs.
        model: Option<PathBuf>,
        /// An input as NAME=FILE.npy; inputs not given are filled with seeded random values.
        #[arg(long = "input", value_name = "NAME=FILE.npy")]
        inputs: Vec<String>,
        /// How many timed runs (after one warm-up).
        #[arg(long, default_value_t = 10)]
        repeat: usize,
        #[command(flatten)]
        dims: DimSizes,
        /// Graph optimizations: `disabled`, `basic` (no fusions) or `all`.
        #[arg(long, default_value = "all")]
        optimization: String,
        /// Write a Chrome trace (Perfetto) of the timed runs, one after another: every node's
        /// start and duration.
        #[arg(long, value_name = "FILE.json")]
        trace: Option<PathBuf>,
        /// Sleep this many milliseconds before every timed run, as a server does between
        /// requests; the latency then includes waking an idle machine.
        #[arg(long, value_name = "MS", default_value_t = 0)]
        pause_ms: u64,
        /// Run every node on CUDA GPU 0 with this many streams (a build with feature `cuda`);
        /// the placement measures one stream, Lios, Opara and Greedy and keeps the fastest.
        #[arg(long, value_name = "STREAMS")]
        cuda: Option<usize>,
        /// Write every output as DIR/NAME.npy (created if missing; `/` in a name becomes `_`;
        /// bfloat16, which numpy lacks, as float32).
        #[arg(long, value_name = "DIR")]
        output_dir: Option<PathBuf>,
        /// Write every input the run used (given or made) as DIR/NAME.npy, to rerun the same
        /// inputs elsewhere.
        #[arg(long, value_name = "DIR")]
        save_inputs: Option<PathBuf>,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Measure every node on every device and write the cost model (JSON).
    Profile {
        /// The .onnx file.
        model: PathBuf,
        #[command(flatten)]
        devices: DeviceArgs,
        /// Where the cost model goes.
        #[arg(long, default_value = "cost.json")]
        out: PathBuf,
        /// Untimed runs per node before measuring.
        #[arg(long, default_value_t = 1)]
        warmup: usize,
        /// Timed runs per node (the median is kept).
        #[arg(long, default_value_t = 5)]
        repeats: usize,
        #[command(flatten)]
        dims: DimSizes,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Place a model on several devices, draw the schedule, run it, compare prediction and
    /// measurement.
    Schedule {
        /// The .onnx file.
        model: PathBuf,
        #[command(flatten)]
        devices: DeviceArgs,
        /// Placement policy (case-insensitive: greedy, heft, lios, opara, hios-lp, comm-sd, auto, ...).
        #[arg(long, default_value = "auto")]
        policy: String,
        /// A cost model written by `spillway profile` (same model and devices); without one
        /// the session profiles first.
        #[arg(long)]
        cost_model: Option<PathBuf>,
        /// Write the schedule as a Gantt chart (SVG).
        #[arg(long)]
        gantt: Option<PathBuf>,
        /// Write one real run as a Chrome trace (JSON; open in Perfetto).
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Timed runs; the median is reported.
        #[arg(long, default_value_t = 10)]
        repeat: usize,
        #[command(flatten)]
        dims: DimSizes,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Serve models over the KServe v2 / Open Inference Protocol: HTTP/REST and gRPC, a
    /// bounded queue per model, Prometheus metrics at /metrics; Ctrl-C or SIGTERM drains.
    #[cfg(feature = "serve")]
    Serve(commands::serve::ServeArgs),
    /// List the operators the CPU supports (markdown).
    Ops,
    /// List the environment variables Spillway reads (deployment paths and diagnostics), what
    /// each does and its value here. What a session computes is set by options, not by these.
    Knobs,
    /// Run a torchvision-style detector on photos; write `<name>.detections.{png,json}`.
    Detect {
        /// JPEG or PNG files.
        #[arg(required = true)]
        images: Vec<PathBuf>,
        /// The detector (.onnx; input `image` 3×H×W in [0, 1]).
        #[arg(long)]
        model: PathBuf,
        /// Where the results go.
        #[arg(long, default_value = ".")]
        out: PathBuf,
        /// Detections scoring below this are dropped.
        #[arg(long, default_value_t = 0.5)]
        score_threshold: f32,
        #[command(flatten)]
        engine: EngineArgs,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Run {
            model,
            inputs,
            repeat,
            dims,
            optimization,
            trace,
            pause_ms,
            cuda,
            output_dir,
            save_inputs,
            engine,
        } => commands::run::run(
            model,
            &inputs,
            &commands::run::RunSettings {
                repeat,
                dims,
                optimization,
                trace,
                pause: std::time::Duration::from_millis(pause_ms),
                cuda_streams: cuda,
                output_dir,
                save_inputs,
                engine,
            },
        ),
        Command::Profile {
            model,
            devices,
            out,
            warmup,
            repeats,
            dims,
            engine,
        } => commands::profile::profile(
            &model,
            &devices,
            &out,
            ProfileOptions::default()
                .with_warmup(warmup)
                .with_repeats(repeats.max(1))
                .with_thread_options(engine.thread_options()),
            &dims,
            &engine,
        ),
        Command::Schedule {
            model,
            devices,
            policy,
            cost_model,
            gantt,
            trace,
            repeat,
            dims,
            engine,
        } => commands::schedule::schedule(&ScheduleArgs {
            model,
            devices,
            policy: parse_policy(&policy)?,
            cost_model,
            gantt,
            trace,
            repeat,
            dims,
            engine,
        }),
        Command::Detect {
            images,
            model,
            out,
            score_threshold,
            engine,
        } => {
            let loading = commands::progress::spinner(format!("loading {}", model.display()));
            let session = engine
                .apply(Session::builder())
                .commit_from_file(&model)
                .with_context(|| format!("loading {}", model.display()));
            loading.finish_and_clear();
            let session = session?;
            let bar = commands::progress::bar(images.len() as u64, "detecting", "images");
            for image in &images {
                let r = spillway_cli::detect::detect_file(&session, image, &out, score_threshold)?;
                bar.suspend(|| {
                    say!(
                        "{}: {} detections in {:.3} s -> {}, {}",
                        image.display(),
                        r.kept,
                        r.seconds,
                        r.png.display(),
                        r.json.display()
                    )
                });
                bar.inc(1);
            }
            bar.finish_and_clear();
            Ok(())
        }
        #[cfg(feature = "serve")]
        Command::Serve(args) => commands::serve::serve(&args),
        Command::Knobs => {
            commands::engine_options::knobs();
            Ok(())
        }
        Command::Ops => {
            for op in spillway::supported_ops() {
                say!("- {op}");
            }
            for (domain, op) in spillway::supported_contrib_ops() {
                say!("- {domain}:{op}");
            }
            Ok(())
        }
    }
}
