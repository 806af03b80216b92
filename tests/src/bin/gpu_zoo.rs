//! `gpu_zoo OUT_DIR MODEL.onnx… [--streams N] [--runs N] [--torch FILE]`: whole models on
//! GPU 0, against the CPU and against PyTorch.
//!
//! For each model (optimized at the `Basic` level, which keeps every node GPU-runnable), on a
//! seeded input: the CPU kernels run every node and give every value's shape and reference;
//! then the GPU runs it one stream, and on `N` streams as `Lios`, `Opara` and `Greedy` place
//! it from the nodes' GPU times measured alone. Each configuration is checked against the CPU
//! (largest difference relative to the output's largest magnitude, ≤ 1e-3 with TF32 off) and
//! timed with CUDA events after warm-up, both launched eagerly and replayed as a CUDA Graph.
//! With `--torch` (`torch_baseline.json` from `scripts/torch_gpu_bench.py`), the table gives
//! the ratios to PyTorch eager and CUDA Graph. Writes `gpu_zoo.{md,json}`; exits 1 when a
//! configuration's outputs are wrong, 2 when CUDA is unavailable.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use spillway::gpu::{
    CapturedPlan, GpuPlan, StreamAssignment, cost_graph, descs, median_ms, specialize,
};
use spillway::graph::passes::{Level, optimize};
use spillway::graph::{Dim, Graph};
use spillway::{Devices, Session};
use spillway_kernels::Tensor;
use spillway_kernels::cuda::ops::TensorDesc;
use spillway_kernels::cuda::{Gpu, GpuOptions, probe};
use spillway_placement::{Options, Policy, Topology, place, simulate};
use spillway_tests::{max_relative_difference, median_wall_ms, seeded_f32};

/// Relative tolerance of a GPU output against the CPU's (TF32 off).
const TOLERANCE: f64 = 1e-3;

struct Args {
    out: PathBuf,
    models: Vec<PathBuf>,
    streams: usize,
    runs: usize,
    torch: Option<PathBuf>,
}

fn args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let out = PathBuf::from(it.next().context("usage: gpu_zoo OUT_DIR MODEL.onnx…")?);
    let mut a = Args {
        out,
        models: Vec::new(),
        streams: 4,
        runs: 100,
        torch: None,
    };
    while let Some(x) = it.next() {
        match x.as_str() {
            "--streams" => a.streams = it.next().context("--streams N")?.parse()?,
            "--runs" => a.runs = it.next().context("--runs N")?.parse()?,
            "--torch" => a.torch = Some(it.next().context("--torch FILE")?.into()),
            _ => a.models.push(x.into()),
        }
    }
    Ok(a)
}

fn relative_difference(want: &Tensor, got: &Tensor) -> Result<f64> {
    max_relative_difference(want, got).map_err(anyhow::Error::msg)
}

/// The worst output difference of `got` against the CPU reference.
fn check(graph: &Graph, reference: &[Option<Tensor>], got: &[Tensor]) -> Result<f64> {
    let mut worst = 0f64;
    for (v, t) in graph.outputs.iter().zip(got) {
        let want = reference[v.index()].as_ref().context("no CPU output")?;
        worst = worst.max(relative_difference(want, t)?);
    }
    Ok(worst)
}

/// The first node (in graph order) whose output departs from the CPU's, for the report.
fn first_departure(graph: &Graph, plan: &GpuPlan, reference: &[Option<Tensor>]) -> String {
    for node in &graph.nodes {
        for v in node.present_outputs() {
            let (Some(want), Ok(Some(got))) = (&reference[v.index()], plan.read_value(v)) else {
                continue;
            };
            match relative_difference(want, &got) {
                Ok(d) if d <= TOLERANCE => {}
                Ok(d) => {
                    return format!("first at node '{}' ({}): {d:.2e}", node.name, node.op_type);
                }
                Err(e) => return format!("node '{}': {e:#}", node.name),
            }
        }
    }
    "no single node departs".to_string()
}

/// One configuration's results.
#[derive(Debug, serde::Serialize)]
struct Config {
    name: String,
    streams_used: usize,
    predicted_ms: Option<f64>,
    max_rel_diff: f64,
    pass: bool,
    departure: Option<String>,
    eager_ms: Option<f64>,
    graph_ms: Option<f64>,
    /// Median host wall time of a whole run: upload, replay, download.
    run_wall_ms: Option<f64>,
    error: Option<String>,
}

#[derive(Debug, serde::Serialize)]
struct ModelResult {
    model: String,
    nodes: usize,
    input: Vec<usize>,
    arena_mib: f64,
    /// Node outputs on the GPU, MiB: as planned (shared) and with one buffer each.
    values_mib: f64,
    unshared_values_mib: f64,
    configs: Vec<Config>,
    error: Option<String>,
}

/// One model, ready to run in several configurations.
struct Subject<'a> {
    graph: &'a Graph,
    descs: &'a [Option<TensorDesc>],
    /// Every value of the CPU run.
    reference: &'a [Option<Tensor>],
    input: &'a [Tensor],
    gpu: &'a Arc<Gpu>,
    /// Timed launches per measurement.
    runs: usize,
}

fn run_config(
    name: &str,
    subject: &Subject<'_>,
    assignment: &StreamAssignment,
) -> Result<(Config, Arc<GpuPlan>)> {
    let Subject {
        graph,
        descs,
        reference,
        input,
        gpu,
        runs,
    } = *subject;
    let plan = Arc::new(GpuPlan::compile(graph, descs, gpu.clone(), assignment)?);
    let eager_out = plan.run(input)?;
    let mut diff = check(graph, reference, &eager_out)?;
    let captured = CapturedPlan::capture(plan.clone())?;
    diff = diff.max(check(graph, reference, &captured.run(input)?)?);
    let pass = diff <= TOLERANCE;
    let departure =
        (!pass).then(
            || match GpuPlan::compile_unshared(graph, descs, gpu.clone(), assignment) {
                Ok(unshared) => {
                    unshared.run(input).ok();
                    first_departure(graph, &unshared, reference)
                }
                Err(e) => format!("{e:#}"),
            },
        );
    let eager_ms = median_ms(gpu, runs, &|| plan.enqueue())?;
    let graph_ms = median_ms(gpu, runs, &|| captured.replay())?;
    let run_wall_ms = wall_ms(runs, &|| captured.run(input).map(drop))?;
    drop(captured);
    Ok((
        Config {
            name: name.to_string(),
            streams_used: plan.streams_used(),
            predicted_ms: None,
            max_rel_diff: diff,
            pass,
            departure,
            eager_ms: Some(eager_ms),
            graph_ms: Some(graph_ms),
            run_wall_ms: Some(run_wall_ms),
            error: None,
        },
        plan,
    ))
}

fn wall_ms(runs: usize, run: &dyn Fn() -> spillway::Result<()>) -> Result<f64> {
    Ok(median_wall_ms(runs, run)?)
}

/// The public API on the same model: a session with GPU 0 (`Auto` picks its streams), its
/// outputs against the CPU's, and the median wall time of `Session::run` (uploads and
/// downloads included).
fn session_config(
    path: &Path,
    graph: &Graph,
    reference: &[Option<Tensor>],
    input: &[Tensor],
    streams: usize,
    runs: usize,
) -> Result<Config> {
    let session = Session::builder()
        .with_devices(Devices::cpu().with_cuda(0, streams))
        .commit_from_file(path)?;
    let report = session
        .placement_report()
        .context("a GPU session has a report")?;
    let named = || {
        graph
            .inputs
            .iter()
            .zip(input)
            .map(|(v, t)| (graph.name(*v).to_string(), t.clone()))
            .collect::<Vec<_>>()
    };
    let outputs = session.run(named())?.try_into_tensors()?;
    let diff = check(graph, reference, &outputs)?;
    let run_wall_ms = wall_ms(runs, &|| session.run(named()).map(drop))?;
    let streams_used = report.nodes.iter().map(|n| n.3).max().map_or(1, |s| s + 1);
    Ok(Config {
        name: format!("Session: {}", report.policy),
        streams_used,
        predicted_ms: Some(report.predicted_makespan_us / 1000.0),
        max_rel_diff: diff,
        pass: diff <= TOLERANCE,
        departure: None,
        eager_ms: None,
        graph_ms: None,
        run_wall_ms: Some(run_wall_ms),
        error: None,
    })
}

fn failed(name: &str, e: anyhow::Error) -> Config {
    Config {
        name: name.to_string(),
        streams_used: 0,
        predicted_ms: None,
        max_rel_diff: f64::NAN,
        pass: false,
        departure: None,
        eager_ms: None,
        graph_ms: None,
        run_wall_ms: None,
        error: Some(format!("{e:#}")),
    }
}

fn run_model(path: &Path, gpu: &Arc<Gpu>, streams: usize, runs: usize) -> Result<ModelResult> {
    let mut graph = spillway::onnx::load_file(path)?;
    // Symbolic dims (the exported batch) become 1 before optimizing, so shapes fold to
    // constants: batch 1, as the issue measures.
    for &v in &graph.inputs.clone() {
        if let Some(dims) = &mut graph.values[v.index()].shape {
            for d in dims.iter_mut().filter(|d| d.fixed().is_none()) {
                *d = Dim::Fixed(1);
            }
        }
    }
    optimize(&mut graph, Level::Basic)?;
    let input: Vec<Tensor> = graph
        .inputs
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let shape = graph
                .value(v)
                .fixed_shape()
                .with_context(|| format!("input '{}' has no declared shape", graph.name(v)))?;
            Ok(seeded_f32(&shape, 7 + i as u64))
        })
        .collect::<Result<_>>()?;
    let reference = specialize(&mut graph, &input)?;
    let descs = descs(&reference);
    let mut result = ModelResult {
        model: path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into(),
        nodes: graph.nodes.len(),
        input: input
            .first()
            .map(|t| t.shape().to_vec())
            .unwrap_or_default(),
        arena_mib: 0.0,
        values_mib: 0.0,
        unshared_values_mib: 0.0,
        configs: Vec::new(),
        error: None,
    };
    let subject = Subject {
        graph: &graph,
        descs: &descs,
        reference: &reference,
        input: &input,
        gpu,
        runs,
    };
    let single = StreamAssignment::single_stream(graph.nodes.len());
    let (config, plan) = run_config("1 stream", &subject, &single)?;
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    result.arena_mib = mib(plan.arena_bytes());
    result.values_mib = mib(plan.value_memory().bytes);
    result.unshared_values_mib = mib(plan.value_memory().unshared_bytes);
    println!(
        "  memory: arena {:.1} MiB; node outputs {:.1} MiB shared, {:.1} MiB one buffer each",
        result.arena_mib, result.values_mib, result.unshared_values_mib
    );
    println!("  {:<10} {}", config.name, summary(&config));
    result.configs.push(config);
    let node_us = plan.profile_nodes(5)?;
    drop(plan);
    let costs = cost_graph(&graph, &node_us, &descs);
    let topology = Topology::gpus(1, streams);
    for policy in [Policy::Lios, Policy::Opara, Policy::Greedy] {
        let name = format!("{policy:?} ×{streams}");
        let outcome = place(policy, &costs, &topology, &Options::default())
            .map_err(anyhow::Error::from)
            .and_then(|schedule| {
                let predicted = simulate(&costs, &topology, &schedule)?.makespan / 1000.0;
                let assignment = StreamAssignment::from_schedule(&schedule);
                let (mut c, _) = run_config(&name, &subject, &assignment)?;
                c.predicted_ms = Some(predicted);
                Ok(c)
            });
        let config = outcome.unwrap_or_else(|e| failed(&name, e));
        println!("  {:<10} {}", config.name, summary(&config));
        result.configs.push(config);
    }
    let config = session_config(path, &graph, &reference, &input, streams, runs)
        .unwrap_or_else(|e| failed("Session", e));
    println!("  {:<10} {}", config.name, summary(&config));
    result.configs.push(config);
    Ok(result)
}

fn summary(c: &Config) -> String {
    if let Some(e) = &c.error {
        return format!("ERROR {e}");
    }
    let ms =
        |label: &str, x: Option<f64>| x.map_or(String::new(), |x| format!("  {label} {x:.3} ms"));
    format!(
        "{} rel {:.1e}{}{}{}  ({} streams used)",
        if c.pass { "ok  " } else { "FAIL" },
        c.max_rel_diff,
        ms("eager", c.eager_ms),
        ms("graph", c.graph_ms),
        ms("run (wall)", c.run_wall_ms),
        c.streams_used
    )
}

/// PyTorch medians by model name: (eager ms, CUDA Graph ms).
fn torch_medians(path: Option<&Path>) -> HashMap<String, (f64, f64)> {
    let Some(text) = path.and_then(|p| std::fs::read_to_string(p).ok()) else {
        return HashMap::new();
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
        return HashMap::new();
    };
    let mut map = HashMap::new();
    for row in json["rows"].as_array().into_iter().flatten() {
        if let (Some(m), Some(e), Some(g)) = (
            row["model"].as_str(),
            row["eager_ms_median"].as_f64(),
            row["cuda_graph_ms_median"].as_f64(),
        ) {
            map.insert(m.to_string(), (e, g));
        }
    }
    map
}

fn markdown(gpu: &str, args: &Args, results: &[ModelResult]) -> String {
    let torch = torch_medians(args.torch.as_deref());
    let mut md = format!(
        "# Spillway on the GPU: the zoo against the CPU and PyTorch\n\n\
         GPU {gpu}. float32, TF32 off, batch 1, seeded input. Each configuration's outputs are \
         checked against Spillway's CPU kernels (largest difference over the output's largest \
         magnitude, pass ≤ {TOLERANCE:.0e}); times are medians of {} launches of the whole \
         model between CUDA events on stream 0, after 10 warm-ups: `eager` enqueues every node \
         from the host, `graph` replays the captured CUDA Graph; `run (wall)` is the host's \
         median time of a whole run (pinned upload, replay, download; for `Session`, \
         `Session::run`). Multi-stream schedules are \
         placed from each node's GPU time measured alone; `predicted` is the placement \
         simulator's makespan. PyTorch columns from `torch_baseline.json` of the same run.\n\n\
         | model | config | streams | pass | max rel diff | eager ms | graph ms | run ms (wall) | \
         predicted ms | PyTorch eager / ours (graph) | PyTorch graph / ours (graph) |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
        args.runs
    );
    let f = |x: Option<f64>| x.map_or("".to_string(), |x| format!("{x:.3}"));
    for r in results {
        if let Some(e) = &r.error {
            md += &format!("| {} | | | | | | | | | | error: {e} |\n", r.model);
        }
        for c in &r.configs {
            let (te, tg) = match (torch.get(&r.model), c.graph_ms) {
                (Some(&(e, g)), Some(ours)) => {
                    (format!("{:.2}", e / ours), format!("{:.2}", g / ours))
                }
                _ => (String::new(), String::new()),
            };
            let status = match &c.error {
                Some(e) => format!("error: {}", e.replace('|', "/")),
                None if c.pass => "yes".into(),
                None => format!("NO ({})", c.departure.clone().unwrap_or_default()),
            };
            md += &format!(
                "| {} | {} | {} | {} | {:.1e} | {} | {} | {} | {} | {te} | {tg} |\n",
                r.model,
                c.name,
                c.streams_used,
                status,
                c.max_rel_diff,
                f(c.eager_ms),
                f(c.graph_ms),
                f(c.run_wall_ms),
                f(c.predicted_ms)
            );
        }
    }
    md += "\n## Device memory (one-stream plan)\n\nNode outputs share bytes where the \
           plan's happens-before order (data edges and stream order) allows.\n\n\
           | model | nodes | arena MiB (weights, input, values, workspace) | node outputs MiB | \
           one buffer each MiB |\n|---|---|---|---|---|\n";
    for r in results.iter().filter(|r| r.error.is_none()) {
        md += &format!(
            "| {} | {} | {:.1} | {:.1} | {:.1} |\n",
            r.model, r.nodes, r.arena_mib, r.values_mib, r.unshared_values_mib
        );
    }
    md
}

fn main() -> Result<()> {
    let args = args()?;
    std::fs::create_dir_all(&args.out)?;
    let system = match probe() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("CUDA is unavailable: {e}");
            std::fs::write(
                args.out.join("gpu_zoo.md"),
                format!("CUDA unavailable: {e}\n"),
            )?;
            std::process::exit(2);
        }
    };
    let name = system.gpu(0)?.name.clone();
    let gpu = Arc::new(Gpu::open(0, args.streams, GpuOptions::default())?);
    let mut results = Vec::new();
    for path in &args.models {
        println!("{}", path.display());
        let r = run_model(path, &gpu, args.streams, args.runs).unwrap_or_else(|e| {
            println!("  ERROR {e:#}");
            ModelResult {
                model: path
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into(),
                nodes: 0,
                input: Vec::new(),
                arena_mib: 0.0,
                values_mib: 0.0,
                unshared_values_mib: 0.0,
                configs: Vec::new(),
                error: Some(format!("{e:#}")),
            }
        });
        results.push(r);
        // Keep what is done if a later model takes the process down.
        let json = serde_json::json!({ "gpu": name, "runs": args.runs, "models": results });
        std::fs::write(
            args.out.join("gpu_zoo.json"),
            serde_json::to_string_pretty(&json)?,
        )?;
        std::fs::write(
            args.out.join("gpu_zoo.md"),
            markdown(&name, &args, &results),
        )?;
    }
    let wrong = results
        .iter()
        .any(|r| r.error.is_some() || r.configs.iter().any(|c| c.error.is_none() && !c.pass));
    std::process::exit(i32::from(wrong));
}
