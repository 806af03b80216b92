//! `spillway-bench`: Spillway against ONNX Runtime on the benchmark zoo, on the CPU.
//!
//! Every configuration of every model runs in the same process on the same seeded input, in
//! interleaved rounds (A B C … A B C …) after warm-up rounds, so that load on a shared machine
//! hits all of them alike. Outputs are checked against ONNX Runtime. Results go to
//! `<out>/cpu-<date>.{md,json}`. Built with the `tract` feature, tract runs beside them.
//!
//! ```text
//! spillway-bench [--rounds N] [--warmup N] [--models a,b] [--all] [--out DIR] [--zoo DIR]
//!                [--no-op-profile]
//! ```

#[path = "spillway_bench/inputs.rs"]
mod inputs;
#[path = "spillway_bench/machine.rs"]
mod machine;
#[path = "spillway_bench/report.rs"]
mod report;
#[path = "spillway_bench/runner.rs"]
mod runner;
#[cfg(feature = "tract")]
#[path = "spillway_bench/tract.rs"]
mod tract;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use spillway::profile::{ProfileOptions, profile};
use spillway::{Devices, Session};

use inputs::ZooModel;
use report::{ConfigResult, ModelResult, OpShare};
use runner::{CONFIGS, Engine, is_ort, is_tract, relative_l2};

/// The pause before every timed run.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(100);

/// The models run when `--models` and `--all` are not given.
const DEFAULT_MODELS: [&str; 5] = [
    "squeezenet1_1",
    "googlenet",
    "inception_v3",
    "resnet50",
    "randwire",
];

/// The seed of every input.
const SEED: u64 = 20_261_122;

struct Args {
    rounds: usize,
    warmup: usize,
    models: Option<Vec<String>>,
    all: bool,
    out: PathBuf,
    zoo: PathBuf,
    op_profile: bool,
}

fn parse_args() -> Result<Args> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut args = Args {
        rounds: 10,
        warmup: 2,
        models: None,
        all: false,
        out: root.join("results"),
        zoo: root.join("../models/zoo"),
        op_profile: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--rounds" => args.rounds = value()?.parse().context("--rounds")?,
            "--warmup" => args.warmup = value()?.parse().context("--warmup")?,
            "--models" => {
                args.models = Some(value()?.split(',').map(str::to_string).collect());
            }
            "--all" => args.all = true,
            "--out" => args.out = PathBuf::from(value()?),
            "--zoo" => args.zoo = PathBuf::from(value()?),
            "--no-op-profile" => args.op_profile = false,
            "-h" | "--help" => {
                println!(
                    "spillway-bench [--rounds N] [--warmup N] [--models a,b] [--all] [--out DIR] \
                     [--zoo DIR] [--no-op-profile]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument {other} (try --help)"),
        }
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    Ok(args)
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let load_start = machine::load_average();
    let (date, time) = machine::utc_now();
    let zoo = inputs::zoo(&args.zoo)?;
    let selected: Vec<&ZooModel> = zoo
        .iter()
        .filter(|m| match &args.models {
            Some(names) => names.iter().any(|n| n == &m.name),
            None => args.all || DEFAULT_MODELS.contains(&m.name.as_str()),
        })
        .filter(|m| m.path.exists())
        .collect();
    if let Some(names) = &args.models {
        for n in names {
            if !selected.iter().any(|m| &m.name == n) {
                bail!(
                    "model {n} is not in the manifest at {} or its file is missing",
                    args.zoo.display()
                );
            }
        }
    }
    let per_model = (args.warmup + args.rounds) * CONFIGS.len() + CONFIGS.len();
    let bar = ProgressBar::new((selected.len() * per_model) as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let peak_reset_works = machine::reset_peak_rss();
    let mut results = Vec::new();
    for model in selected {
        let r = bench_model(model, &args, &bar);
        bar.println(report::summary_line(&r));
        results.push(r);
    }
    bar.finish_and_clear();
    let (cpu, cpus) = machine::cpu_model();
    let meta = report::Meta {
        date: date.clone(),
        time,
        cpu,
        cpus,
        load_start,
        load_end: machine::load_average(),
        rounds: args.rounds,
        warmup: args.warmup,
        seed: SEED,
        peak_reset_works,
    };
    std::fs::create_dir_all(&args.out)?;
    let md = args.out.join(format!("cpu-{date}.md"));
    let json = args.out.join(format!("cpu-{date}.json"));
    std::fs::write(&md, report::markdown(&meta, &results))?;
    std::fs::write(
        &json,
        serde_json::to_string_pretty(&report::json(&meta, &results))?,
    )?;
    println!("{}", report::markdown(&meta, &results));
    println!("wrote {} and {}", md.display(), json.display());
    Ok(())
}

/// Loads every configuration, checks it, times it in interleaved rounds, and measures memory.
fn bench_model(model: &ZooModel, args: &Args, bar: &ProgressBar) -> ModelResult {
    let mut result = ModelResult::new(&model.name, model);
    let inputs = match inputs::make_inputs(model, SEED) {
        Ok(i) => i,
        Err(e) => {
            result.error = Some(format!("{e:#}"));
            bar.inc(((args.warmup + args.rounds + 1) * CONFIGS.len()) as u64);
            return result;
        }
    };
    let mut engines: Vec<(usize, Engine)> = Vec::new();
    let mut reference = None;
    for (i, &label) in CONFIGS.iter().enumerate() {
        bar.set_message(format!("{}: loading {label}", model.name));
        let mut cfg = ConfigResult::new(label);
        machine::reset_peak_rss();
        let rss0 = machine::rss();
        let t = Instant::now();
        let loaded = Engine::load(label, model).and_then(|mut e| {
            cfg.load_ms = t.elapsed().as_secs_f64() * 1e3;
            let (out, ms) = e.run(&inputs)?;
            cfg.first_run_ms = ms;
            Ok((e, out))
        });
        cfg.rss_growth = machine::rss().saturating_sub(rss0);
        cfg.peak_rss_growth = machine::peak_rss().saturating_sub(rss0);
        match loaded {
            Ok((e, out)) => {
                if label == "ort-seq-1t" {
                    reference = Some(out.clone());
                }
                cfg.outputs = Some(out);
                engines.push((i, e));
            }
            Err(e) => cfg.error = Some(format!("{e:#}")),
        }
        result.configs.push(cfg);
        bar.inc(1);
    }
    for cfg in &mut result.configs {
        if let (Some(out), Some(want)) = (cfg.outputs.take(), &reference) {
            cfg.rel_l2 = Some(relative_l2(&out, want).map_err(|e| format!("{e:#}")));
        }
    }
    // Interleaved rounds: every live configuration once per round.
    for round in 0..args.warmup + args.rounds {
        let phase = if round < args.warmup {
            "warm-up"
        } else {
            "round"
        };
        bar.set_message(format!("{}: {phase} {}", model.name, round + 1));
        for (i, engine) in &mut engines {
            let cfg = &mut result.configs[*i];
            if cfg.error.is_none() {
                // ORT's (and rayon's) idle threads spin for a while after a run; on a machine
                // with few cores they would slow whichever engine runs next.
                std::thread::sleep(SETTLE);
                match engine.run(&inputs) {
                    Ok((_, ms)) if round >= args.warmup => cfg.times_ms.push(ms),
                    Ok(_) => {}
                    Err(e) => cfg.error = Some(format!("while timing: {e:#}")),
                }
            }
            bar.inc(1);
        }
        bar.inc((CONFIGS.len() - engines.len()) as u64);
    }
    for (i, engine) in &engines {
        if let Engine::Spillway(s) = engine {
            spillway_memory(s, model, &inputs, &mut result.configs[*i]);
        }
    }
    if args.op_profile {
        bar.set_message(format!("{}: per-op profile", model.name));
        if let Some((_, Engine::Spillway(s))) = engines.iter().find(|(i, _)| *i == 0) {
            match op_profile(s, &inputs) {
                Ok(ops) => result.top_ops = ops,
                Err(e) => result.op_profile_error = Some(format!("{e:#}")),
            }
        }
    }
    result.finish(is_ort, is_tract);
    result
}

/// The planned arena of the intermediates and, on a one-lane session, the measured peak.
fn spillway_memory(
    session: &Session,
    model: &ZooModel,
    inputs: &[(String, spillway::Tensor)],
    cfg: &mut ConfigResult,
) {
    let shapes: Vec<(&str, &[usize])> = model
        .inputs
        .iter()
        .map(|(n, _, s)| (n.as_str(), s.as_slice()))
        .collect();
    match session.memory_plan(&shapes) {
        Ok(plan) => {
            cfg.planned_peak = Some(plan.peak_bytes as u64);
            cfg.planned_naive = Some(plan.naive_bytes as u64);
        }
        Err(e) => cfg.notes.push(format!("memory_plan: {e}")),
    }
    if let Some(report) = session.placement_report() {
        cfg.notes.push(format!(
            "placement: {} (predicted {:.1} ms)",
            report.policy,
            report.predicted_makespan_us / 1e3
        ));
    }
    if session.execution_plan().is_none() {
        match session.run_with_stats(inputs.iter().cloned()) {
            Ok((_, stats)) => cfg.measured_peak = Some(stats.peak_intermediate_bytes as u64),
            Err(e) => cfg.notes.push(format!("run_with_stats: {e}")),
        }
    }
}

/// Each node of the optimized graph timed alone (the placement profiler: 1 warm-up, median of
/// 3), summed per op type.
fn op_profile(session: &Session, inputs: &[(String, spillway::Tensor)]) -> Result<Vec<OpShare>> {
    let tensors: Vec<spillway::Tensor> = inputs.iter().map(|(_, t)| t.clone()).collect();
    let options = ProfileOptions::default().with_warmup(1).with_repeats(3);
    let costs = profile(session, &Devices::cpu(), &tensors, options, &mut |_, _| {})?;
    let mut by_kind: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for op in &costs.graph.ops {
        let us = op.cost_us.values().copied().fold(0.0, f64::max);
        let e = by_kind.entry(op.kind.clone()).or_default();
        e.0 += us;
        e.1 += 1;
    }
    let total: f64 = by_kind.values().map(|v| v.0).sum();
    let mut ops: Vec<OpShare> = by_kind
        .into_iter()
        .map(|(kind, (us, count))| OpShare {
            kind,
            count,
            ms: us / 1e3,
            share: if total > 0.0 { us / total } else { 0.0 },
        })
        .collect();
    ops.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    Ok(ops)
}
