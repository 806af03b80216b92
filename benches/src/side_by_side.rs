//! Spillway and ONNX Runtime on one model in one process, with 1 and 2 intra-op threads each,
//! timed in interleaved rounds (A B C D A B C D …) after warm-up so that load on a shared
//! machine hits every configuration alike. Each sample times enough runs to last about 5 ms.
//! Both sides convert their inputs and outputs each run (the ORT side through the `ort`
//! crate). Spillway's kernel threads do not spin between kernels here (`with_spinning(false)`):
//! the spinning workers of one session would take the CPU from the other configurations.

use std::time::Instant;

use anyhow::Result;
use spillway::Session;
use spillway_kernels::Tensor;
use spillway_tests::oracle::{Oracle, OrtConfig};

/// The configurations, in the order [`time_interleaved`] reports them.
pub const CONFIGURATIONS: [&str; 4] = ["spillway-1t", "spillway-2t", "ort-1t", "ort-2t"];

/// One way to run a model.
pub enum Runner {
    /// A Spillway session.
    Spillway(Box<Session>),
    /// ONNX Runtime through the `ort` crate.
    Ort(Oracle),
}

impl Runner {
    /// One run on `inputs`; the outputs are dropped.
    pub fn run(&mut self, inputs: &[(String, Tensor)]) -> Result<()> {
        match self {
            Runner::Spillway(s) => drop(s.run(inputs.to_vec())?),
            Runner::Ort(o) => drop(o.run(inputs)?),
        }
        Ok(())
    }
}

/// The four [`CONFIGURATIONS`] of the model `bytes`.
pub fn runners(bytes: &[u8]) -> Result<Vec<Runner>> {
    let spillway = |threads: usize| -> Result<Runner> {
        let session = Session::builder()
            .with_intra_op_threads(threads)
            .with_spinning(false)
            .commit_from_memory(bytes)?;
        Ok(Runner::Spillway(Box::new(session)))
    };
    let ort = |threads: usize| -> Result<Runner> {
        let config = OrtConfig {
            intra_threads: threads,
            ..OrtConfig::default()
        };
        Ok(Runner::Ort(Oracle::load_bytes(bytes, config)?))
    };
    Ok(vec![spillway(1)?, spillway(2)?, ort(1)?, ort(2)?])
}

/// The median µs per run of each runner over `rounds` interleaved rounds.
pub fn time_interleaved(
    runners: &mut [Runner],
    inputs: &[(String, Tensor)],
    rounds: usize,
) -> Result<Vec<f64>> {
    // Warm-up, and how many runs make a sample of about 5 ms.
    let mut per_sample = Vec::new();
    for runner in runners.iter_mut() {
        for _ in 0..3 {
            runner.run(inputs)?;
        }
        let start = Instant::now();
        runner.run(inputs)?;
        let one = start.elapsed().as_secs_f64();
        per_sample.push(((5e-3 / one.max(1e-7)).ceil() as usize).clamp(1, 1000));
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); runners.len()];
    for _ in 0..rounds {
        for (i, runner) in runners.iter_mut().enumerate() {
            let start = Instant::now();
            for _ in 0..per_sample[i] {
                runner.run(inputs)?;
            }
            samples[i].push(start.elapsed().as_secs_f64() * 1e6 / per_sample[i] as f64);
        }
    }
    Ok(samples.into_iter().map(median).collect())
}

/// The median of `xs` (the upper one of an even count).
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The `--rounds N` of the command line, else `default`.
pub fn rounds_arg(default: usize) -> Result<usize> {
    let args: Vec<String> = std::env::args().collect();
    Ok(args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .map(|r| r.parse())
        .transpose()?
        .unwrap_or(default))
}

/// Today's date as `YYYY-MM-DD` (for result file names).
pub fn today() -> Result<String> {
    let out = std::process::Command::new("date").arg("+%F").output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
