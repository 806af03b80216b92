//! Speed on the model corpus (trained models shipped in PyPI wheels, `tests/corpus/`): Spillway
//! with 1 and 2 intra-op threads against ONNX Runtime with 1 and 2, in one process, on the
//! seeded inputs of the corpus test.
//!
//! Every configuration of a model runs in interleaved rounds (A B C D A B C D …) after warm-up,
//! so that load on a shared machine hits all of them alike; each sample times enough runs to
//! last about 5 ms. The table gives each configuration's median µs per run and the ratio of
//! Spillway's best to ONNX Runtime's best. Both sides convert their inputs and outputs each run
//! (the ORT side through the `ort` crate). Spillway's kernel threads do not spin between
//! kernels here (`with_spinning(false)`): the spinning workers of one session would take the
//! CPU from the other configurations of the same process.
//!
//! `cargo run --release -p spillway-benches --bin corpus_speed [-- --rounds N]`; writes
//! `benches/results/corpus-speed-<date>.{md,json}`.

use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use spillway::Session;
use spillway_kernels::Tensor;
use spillway_tests::corpus::{CorpusModel, fetch};
use spillway_tests::oracle::{Oracle, OrtConfig};
use spillway_tests::workspace_root;

/// One way to run a model.
enum Runner {
    Spillway(Box<Session>),
    Ort(Oracle),
}

impl Runner {
    fn run(&mut self, inputs: &[(String, Tensor)]) -> Result<()> {
        match self {
            Runner::Spillway(s) => drop(s.run(inputs.to_vec())?),
            Runner::Ort(o) => drop(o.run(inputs)?),
        }
        Ok(())
    }
}

/// The configurations, by name.
fn runners(model: &CorpusModel) -> Result<Vec<(&'static str, Runner)>> {
    let spillway = |threads: usize| -> Result<Runner> {
        // Kernel threads that spin between kernels would take the CPU from the other
        // configurations in the process: they sleep here, as ORT's do between runs.
        let session = Session::builder()
            .with_intra_op_threads(threads)
            .with_spinning(false)
            .commit_from_file(&model.path)?;
        Ok(Runner::Spillway(Box::new(session)))
    };
    let ort = |threads: usize| -> Result<Runner> {
        let config = OrtConfig {
            intra_threads: threads,
            ..OrtConfig::default()
        };
        Ok(Runner::Ort(Oracle::load(&model.path, config)?))
    };
    Ok(vec![
        ("spillway-1t", spillway(1)?),
        ("spillway-2t", spillway(2)?),
        ("ort-1t", ort(1)?),
        ("ort-2t", ort(2)?),
    ])
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .map(|r| r.parse())
        .transpose()?
        .unwrap_or(15);
    let models = fetch()?;
    let mut rows = Vec::new();
    let mut table = String::from(
        "| model | what | Spillway 1t µs | Spillway 2t µs | ORT 1t µs | ORT 2t µs | Spillway best / ORT best |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for model in models.iter().filter(|m| m.expect_failure.is_none()) {
        let label = format!(
            "{} `{}`",
            model.package,
            model.file.rsplit('/').next().unwrap_or("")
        );
        eprintln!("{label}");
        let mut runners = runners(model).with_context(|| label.clone())?;
        // Warm-up, and how many runs make a sample of about 5 ms.
        let mut per_sample = Vec::new();
        for (_, runner) in &mut runners {
            for _ in 0..3 {
                runner.run(&model.inputs)?;
            }
            let start = Instant::now();
            runner.run(&model.inputs)?;
            let one = start.elapsed().as_secs_f64();
            per_sample.push(((5e-3 / one.max(1e-7)).ceil() as usize).clamp(1, 1000));
        }
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); runners.len()];
        for _ in 0..rounds {
            for (i, (_, runner)) in runners.iter_mut().enumerate() {
                let start = Instant::now();
                for _ in 0..per_sample[i] {
                    runner.run(&model.inputs)?;
                }
                samples[i].push(start.elapsed().as_secs_f64() * 1e6 / per_sample[i] as f64);
            }
        }
        let us: Vec<f64> = samples.into_iter().map(median).collect();
        let ratio = us[0].min(us[1]) / us[2].min(us[3]);
        table.push_str(&format!(
            "| {label} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {ratio:.2} |\n",
            model.what, us[0], us[1], us[2], us[3]
        ));
        rows.push(json!({
            "package": model.package,
            "version": model.version,
            "file": model.file,
            "median_us": runners.iter().map(|(n, _)| *n).zip(&us).map(|(n, u)| (n.to_string(), json!(u))).collect::<serde_json::Map<_, _>>(),
            "spillway_best_over_ort_best": ratio,
        }));
    }
    println!("{table}");
    let date = std::process::Command::new("date")
        .arg("+%F")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())?;
    let out = workspace_root().join("benches/results");
    std::fs::write(out.join(format!("corpus-speed-{date}.md")), &table)?;
    std::fs::write(
        out.join(format!("corpus-speed-{date}.json")),
        serde_json::to_string_pretty(&json!({ "rounds": rounds, "models": rows }))?,
    )?;
    Ok(())
}
