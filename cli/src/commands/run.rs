//! `spillway run`: run a model, print its outputs and median latency.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use spillway::{
    DType, Devices, OptimizationLevel, RunOptions, Session, Tensor, TraceEvent, chrome_trace_json,
};

use super::engine_options::EngineArgs;
use super::inputs::{DimSizes, model_inputs};
use super::progress;

/// The small multi-branch model `spillway run` uses when no model is given
/// (built by `models/make_small.py`).
pub(crate) const DEFAULT_MODEL: &[u8] =
    include_bytes!("../../../models/small/inception_block.onnx");

/// How `spillway run` runs a model.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Timed runs after one warm-up.
    pub repeat: usize,
    /// Sizes of symbolic dims not fixed by an input file.
    pub dims: DimSizes,
    /// `disabled`, `basic` or `all`.
    pub optimization: String,
    /// Where the timed runs' Chrome trace goes.
    pub trace: Option<PathBuf>,
    /// Sleep before each timed run.
    pub pause: Duration,
    /// Run every node on CUDA GPU 0 with this many streams (`Auto` picks how they are used).
    pub cuda_streams: Option<usize>,
    /// Where every output goes as `NAME.npy`.
    pub output_dir: Option<PathBuf>,
    /// Where every input goes as `NAME.npy`.
    pub save_inputs: Option<PathBuf>,
    /// Threads, layout and kernel algorithms.
    pub engine: EngineArgs,
}

/// Runs `model` (or the bundled one) as `settings` say, with the inputs `given` (NAME=FILE.npy;
/// the rest seeded), and prints its outputs and median latency.
pub fn run(model: Option<PathBuf>, given: &[String], settings: &RunSettings) -> Result<()> {
    let RunSettings { repeat, pause, .. } = *settings;
    let dims = &settings.dims;
    let trace = settings.trace.as_deref();
    let level = match settings.optimization.as_str() {
        "disabled" => OptimizationLevel::Disabled,
        "basic" => OptimizationLevel::Basic,
        "all" => OptimizationLevel::All,
        other => anyhow::bail!("--optimization {other}: expected disabled, basic or all"),
    };
    let mut builder = settings
        .engine
        .apply(Session::builder().with_optimization(level));
    if let Some(streams) = settings.cuda_streams {
        // A GPU session is compiled for fixed input shapes: those of the inputs this run makes,
        // which the model's declarations (read by an unoptimized CPU session) give.
        let unoptimized = Session::builder().with_optimization(OptimizationLevel::Disabled);
        let declared = match &model {
            Some(path) => unoptimized.commit_from_file(path),
            None => unoptimized.commit_from_memory(DEFAULT_MODEL),
        }?;
        for (name, t) in model_inputs(&declared.inputs(), given, dims)? {
            builder = builder.with_profile_shape(&name, t.shape());
        }
        builder = builder.with_devices(Devices::cpu().with_cuda(0, streams));
    }
    // A GPU session measures its stream policies while it is built: that can take seconds.
    let loading = progress::spinner("loading the model");
    let session = match &model {
        Some(path) => builder
            .commit_from_file(path)
            .with_context(|| format!("loading {}", path.display())),
        None => builder
            .commit_from_memory(DEFAULT_MODEL)
            .context("loading the bundled model"),
    };
    loading.finish_and_clear();
    let session = session?;
    let label = model
        .as_ref()
        .map_or("bundled inception_block.onnx".to_string(), |p| {
            p.display().to_string()
        });
    say!("model: {label}");
    if let Some(report) = session
        .placement_report()
        .filter(|_| session.devices().has_cuda())
    {
        say!("placement: {}", report.policy);
    }
    let inputs = model_inputs(&session.inputs(), given, dims)?;
    for (name, t) in &inputs {
        say!("input  {name}: {:?} {}", t.shape(), t.dtype());
    }
    if let Some(dir) = &settings.save_inputs {
        crate::commands::outputs::write_tensors(dir, inputs.iter().map(|(n, t)| (n.as_str(), t)))?;
        say!("inputs written to {}", dir.display());
    }
    // One warm-up run (its outputs are printed), then the timed ones.
    let bar = progress::bar(repeat as u64 + 1, "running", "runs");
    let (outputs, mut stats) = session.run_with_stats(inputs.clone())?;
    bar.inc(1);
    let mut times = Vec::with_capacity(repeat);
    let options = RunOptions::default().with_trace(trace.is_some());
    let mut events: Vec<TraceEvent> = Vec::new();
    for _ in 0..repeat {
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
        let start = Instant::now();
        let (_, report) = session.run_with_options(inputs.clone(), &options)?;
        let elapsed_us = start.elapsed().as_secs_f64() * 1e6;
        // The memory figures printed are the last run's: the steady state.
        stats = report.stats;
        // Runs follow one another on the trace's time axis.
        let offset = times.iter().sum::<f64>() * 1e3;
        events.extend(report.trace.into_iter().flatten().map(|mut e| {
            e.start_us += offset;
            e
        }));
        times.push(elapsed_us / 1e3);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(path) = trace {
        let devices: Vec<String> = session
            .devices()
            .specs()
            .iter()
            .map(|s| s.device.to_string())
            .collect();
        std::fs::write(path, chrome_trace_json(&events, &devices))
            .with_context(|| format!("writing {}", path.display()))?;
        say!(
            "chrome trace of {repeat} runs written to {}",
            path.display()
        );
    }
    for (name, v) in outputs.iter_values() {
        match v.as_tensor() {
            Some(t) => say!(
                "output {name}: {:?} {} first values {}",
                t.shape(),
                t.dtype(),
                first_values(t, 6)
            ),
            None => say!("output {name}: {}", v.type_string()),
        }
    }
    if let Some(dir) = &settings.output_dir {
        super::outputs::write_npy_dir(dir, &outputs)?;
        say!("outputs written to {}", dir.display());
    }
    // A GPU session's values live in its device arena, planned once; these are the CPU's.
    if !session.devices().has_cuda() {
        say!(
            "peak intermediate memory: {:.1} KiB ({} outputs written into reused buffers, {} \
             into pooled ones; {:.1} KiB pooled for the next run)",
            stats.peak_intermediate_bytes as f64 / 1024.0,
            stats.reused_outputs,
            stats.pooled_outputs,
            stats.pool_bytes as f64 / 1024.0
        );
    }
    if !times.is_empty() {
        times.sort_by(f64::total_cmp);
        say!(
            "median latency: {:.3} ms over {repeat} runs{}",
            times[times.len() / 2],
            if pause.is_zero() {
                String::new()
            } else {
                format!(", each after a {} ms pause", pause.as_millis())
            }
        );
    }
    Ok(())
}

/// The first `n` values of `t`, printed as its type reads: floats to 6 decimals, integers
/// exactly (an int64 beyond 2^53 too), booleans as `true`/`false`.
fn first_values(t: &Tensor, n: usize) -> String {
    let dtype = t.dtype();
    let values: Option<Vec<String>> = match dtype {
        DType::I64 => t
            .view::<i64>()
            .ok()
            .map(|a| a.iter().take(n).map(i64::to_string).collect()),
        DType::U64 => t
            .view::<u64>()
            .ok()
            .map(|a| a.iter().take(n).map(u64::to_string).collect()),
        DType::Bool => t
            .view::<bool>()
            .ok()
            .map(|a| a.iter().take(n).map(bool::to_string).collect()),
        _ => t.to_f64_vec().ok().map(|v| {
            v.iter()
                .take(n)
                .map(|x| {
                    if dtype.is_float() {
                        format!("{x:.6}")
                    } else {
                        format!("{}", *x as i64)
                    }
                })
                .collect()
        }),
    };
    match values {
        Some(v) => format!("[{}{}]", v.join(", "), if t.len() > n { ", …" } else { "" }),
        None => format!("({} elements)", t.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_as_their_type_reads() {
        let big = Tensor::from_shape_vec(&[2], vec![(1i64 << 60) + 1, -3]).unwrap();
        assert_eq!(first_values(&big, 6), "[1152921504606846977, -3]");
        let flags = Tensor::from_shape_vec(&[3], vec![true, false, true]).unwrap();
        assert_eq!(first_values(&flags, 2), "[true, false, …]");
        let small = Tensor::from_shape_vec(&[2], vec![7i32, -1]).unwrap();
        assert_eq!(first_values(&small, 6), "[7, -1]");
        let x = Tensor::from_shape_vec(&[1], vec![0.5f32]).unwrap();
        assert_eq!(first_values(&x, 6), "[0.500000]");
    }
}
