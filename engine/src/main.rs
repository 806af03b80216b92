//! The `spillway` command line.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use spillway::graph::Dim;
use spillway::{DType, Session, Tensor};

/// The small multi-branch model `spillway run` uses when no model is given
/// (built by `models/make_small.py`).
const DEFAULT_MODEL: &[u8] = include_bytes!("../../models/small/inception_block.onnx");

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
        /// Symbolic dimensions not fixed by an input file take this size.
        #[arg(long, default_value_t = 1)]
        dim_default: usize,
    },
    /// List the operators the CPU supports (markdown).
    Ops,
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
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Run {
            model,
            inputs,
            repeat,
            dim_default,
        } => run(model, &inputs, repeat, dim_default),
        Command::Detect {
            images,
            model,
            out,
            score_threshold,
        } => {
            let session = Session::builder()
                .commit_from_file(&model)
                .with_context(|| format!("loading {}", model.display()))?;
            for image in &images {
                let r = spillway::detect::detect_file(&session, image, &out, score_threshold)?;
                println!(
                    "{}: {} detections in {:.3} s -> {}, {}",
                    image.display(),
                    r.kept,
                    r.seconds,
                    r.png.display(),
                    r.json.display()
                );
            }
            Ok(())
        }
        Command::Ops => {
            for op in spillway_kernels::cpu::supported_ops() {
                println!("- {op}");
            }
            Ok(())
        }
    }
}

fn run(model: Option<PathBuf>, given: &[String], repeat: usize, dim_default: usize) -> Result<()> {
    let session = match &model {
        Some(path) => Session::builder()
            .commit_from_file(path)
            .with_context(|| format!("loading {}", path.display()))?,
        None => Session::builder()
            .commit_from_memory(DEFAULT_MODEL)
            .context("loading the bundled model")?,
    };
    let label = model
        .as_ref()
        .map_or("bundled inception_block.onnx".to_string(), |p| {
            p.display().to_string()
        });
    println!("model: {label}");
    let mut inputs: Vec<(String, Tensor)> = Vec::new();
    for spec in given {
        let (name, file) = spec
            .split_once('=')
            .with_context(|| format!("--input '{spec}' is not NAME=FILE.npy"))?;
        inputs.push((name.to_string(), read_npy(file.as_ref())?));
    }
    for (i, info) in session.inputs().iter().enumerate() {
        if inputs.iter().any(|(n, _)| n == &info.name) {
            continue;
        }
        let shape: Vec<usize> = match &info.shape {
            Some(dims) => dims
                .iter()
                .map(|d| {
                    if let Dim::Fixed(n) = d {
                        *n
                    } else {
                        dim_default
                    }
                })
                .collect(),
            None => bail!(
                "input '{}' has no declared shape: give it with --input",
                info.name
            ),
        };
        let dtype = info.dtype.unwrap_or(DType::F32);
        inputs.push((info.name.clone(), random_tensor(dtype, &shape, i as u64)?));
    }
    for (name, t) in &inputs {
        println!("input  {name}: {:?} {}", t.shape(), t.dtype());
    }
    let (outputs, stats) = session.run_with_stats(inputs.clone())?;
    let mut times = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let start = Instant::now();
        session.run(inputs.clone())?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    for (name, t) in outputs.iter() {
        println!(
            "output {name}: {:?} {} first values {}",
            t.shape(),
            t.dtype(),
            first_values(t, 6)
        );
    }
    println!(
        "peak intermediate memory: {:.1} KiB",
        stats.peak_intermediate_bytes as f64 / 1024.0
    );
    if !times.is_empty() {
        times.sort_by(f64::total_cmp);
        println!(
            "median latency: {:.3} ms over {repeat} runs",
            times[times.len() / 2]
        );
    }
    Ok(())
}

fn first_values(t: &Tensor, n: usize) -> String {
    match t.to_f64_vec() {
        Ok(v) => {
            let shown: Vec<String> = v.iter().take(n).map(|x| format!("{x:.6}")).collect();
            format!(
                "[{}{}]",
                shown.join(", "),
                if v.len() > n { ", …" } else { "" }
            )
        }
        Err(_) => format!("({} elements)", t.len()),
    }
}

/// Seeded values in [-1, 1) for floats, small non-negative integers for ints.
fn random_tensor(dtype: DType, shape: &[usize], seed: u64) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    Ok(match dtype {
        DType::F32 => {
            Tensor::from_shape_vec(shape, (0..n).map(|_| (next() * 2.0 - 1.0) as f32).collect())?
        }
        DType::F64 => Tensor::from_shape_vec(shape, (0..n).map(|_| next() * 2.0 - 1.0).collect())?,
        DType::I64 => {
            Tensor::from_shape_vec(shape, (0..n).map(|_| (next() * 4.0) as i64).collect())?
        }
        DType::I32 => {
            Tensor::from_shape_vec(shape, (0..n).map(|_| (next() * 4.0) as i32).collect())?
        }
        DType::Bool => Tensor::from_shape_vec(shape, (0..n).map(|_| next() < 0.5).collect())?,
        DType::U8 => {
            Tensor::from_shape_vec(shape, (0..n).map(|_| (next() * 255.0) as u8).collect())?
        }
        other => bail!("cannot make random {other} inputs: give this input with --input"),
    })
}

fn read_npy(path: &std::path::Path) -> Result<Tensor> {
    use ndarray::ArrayD;
    use ndarray_npy::ReadNpyExt;
    let open = || std::fs::File::open(path).with_context(|| format!("opening {}", path.display()));
    macro_rules! try_type {
        ($($t:ty),*) => {$(
            if let Ok(a) = ArrayD::<$t>::read_npy(open()?) {
                return Ok(Tensor::from(a));
            }
        )*};
    }
    try_type!(f32, f64, i64, i32, i16, i8, u8, u16, u32, u64, bool);
    bail!(
        "{}: not a .npy file of a supported element type",
        path.display()
    )
}
