//! Memory over many runs with changing shapes: a detector runs `RUNS` times on seeded images of
//! five sizes in turn, on one session; the process's resident set is sampled after chosen runs.
//! A run-time allocator that kept every shape's buffers (ORT's arena does) would grow here.
//!
//! Each model runs in a fresh child process (so one model's heap does not colour the next's),
//! once with glibc malloc's defaults and once with `MALLOC_ARENA_MAX=2`: with the defaults,
//! every worker thread gets its own malloc arena, whose free lists settle only after the five
//! sizes have come round a few times.
//!
//! `cargo run --release -p spillway-benches --bin detection_memory [-- --runs N] [--models a,b]`;
//! writes `benches/results/detection-memory-<date>.{md,json}`.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use spillway::Session;
use spillway_tests::seeded_f32;

/// Image sizes (height, width), used in turn.
const SIZES: [(usize, usize); 5] = [(480, 640), (320, 320), (600, 800), (300, 400), (512, 512)];
/// The detectors tried, when present in the zoo.
const MODELS: [&str; 2] = [
    "ssdlite320_mobilenet_v3_large",
    "fasterrcnn_mobilenet_v3_large_320_fpn",
];
/// The malloc settings each model runs under: (label, environment).
const ALLOCATORS: [(&str, &[(&str, &str)]); 2] = [
    ("glibc defaults", &[]),
    ("MALLOC_ARENA_MAX=2", &[("MALLOC_ARENA_MAX", "2")]),
];
/// Runs after which the resident set is sampled (and the last run).
const CHECKPOINTS: [usize; 8] = [10, 25, 50, 100, 250, 500, 750, 1000];

/// The resident set in KiB (`VmRSS` of /proc/self/status).
fn rss_kib() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmRSS in /proc/self/status")
}

/// The child's work: loads `model`, runs it `runs` times, prints one JSON line of samples.
fn measure(path: &Path, model: &str, runs: usize) -> Result<()> {
    let checkpoints: Vec<usize> = CHECKPOINTS
        .into_iter()
        .filter(|&c| c < runs)
        .chain(std::iter::once(runs))
        .collect();
    let images: Vec<_> = SIZES
        .iter()
        .enumerate()
        .map(|(i, &(h, w))| seeded_f32(&[3, h, w], 100 + i as u64))
        .collect();
    let session = Session::builder().commit_from_file(path)?;
    let loaded = rss_kib()?;
    let mut samples = Vec::new();
    let started = Instant::now();
    for run in 1..=runs {
        let image = images[(run - 1) % images.len()].clone();
        session
            .run([("image", image)])
            .with_context(|| format!("{model}: run {run}"))?;
        if checkpoints.contains(&run) {
            let kib = rss_kib()?;
            eprintln!("{model}: run {run}: RSS {kib} KiB");
            samples.push(json!({"run": run, "kib": kib}));
        }
    }
    println!(
        "{}",
        json!({"seconds": started.elapsed().as_secs_f64(), "rss_after_load_kib": loaded,
               "rss_kib": samples})
    );
    Ok(())
}

fn main() -> Result<()> {
    let mut runs = 1000usize;
    let mut models: Vec<String> = MODELS.iter().map(|s| s.to_string()).collect();
    let mut child = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => runs = args.next().context("--runs N")?.parse()?,
            "--models" => {
                models = args
                    .next()
                    .context("--models a,b")?
                    .split(',')
                    .map(String::from)
                    .collect()
            }
            "--child" => child = Some(args.next().context("--child MODEL")?),
            other => bail!("unknown argument {other}"),
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("the workspace root")?;
    let path_of = |model: &str| root.join(format!("models/zoo/{model}.onnx"));
    if let Some(model) = child {
        return measure(&path_of(&model), &model, runs);
    }
    let checkpoints: Vec<usize> = CHECKPOINTS
        .into_iter()
        .filter(|&c| c < runs)
        .chain(std::iter::once(runs))
        .collect();
    let mut md = String::from("| model | malloc | RSS after load MiB |");
    for c in &checkpoints {
        md += &format!(" run {c} MiB |");
    }
    md += " growth run 10 → last | growth run 25 → last |\n|---|---|---:|";
    md += &"---:|".repeat(checkpoints.len() + 2);
    md += "\n";
    let mut rows = Vec::new();
    for model in &models {
        let path = path_of(model);
        if !path.exists() {
            eprintln!(
                "{model}: not present at {} (run models/export.sh)",
                path.display()
            );
            continue;
        }
        for (label, env) in ALLOCATORS {
            let out = Command::new(std::env::current_exe()?)
                .args(["--child", model, "--runs", &runs.to_string()])
                .envs(env.iter().copied())
                .stderr(std::process::Stdio::inherit())
                .output()?;
            if !out.status.success() {
                bail!("{model} ({label}): the measuring process failed");
            }
            let row: Value = serde_json::from_slice(&out.stdout)
                .with_context(|| format!("{model} ({label}): its report"))?;
            let kib = |v: &Value| v.as_u64().unwrap_or(0) as f64 / 1024.0;
            let samples = row["rss_kib"].as_array().cloned().unwrap_or_default();
            let at = |run: usize| {
                samples
                    .iter()
                    .find(|s| s["run"].as_u64() == Some(run as u64))
                    .map(|s| kib(&s["kib"]))
            };
            let last = samples.last().map(|s| kib(&s["kib"]));
            md += &format!(
                "| {model} | {label} | {:.1} |",
                kib(&row["rss_after_load_kib"])
            );
            for s in &samples {
                md += &format!(" {:.1} |", kib(&s["kib"]));
            }
            for from in [10, 25] {
                match (at(from), last) {
                    (Some(a), Some(b)) => md += &format!(" {:+.1} MiB |", b - a),
                    _ => md += " – |",
                }
            }
            md += "\n";
            rows.push(json!({"model": model, "malloc": label, "runs": runs, "measured": row}));
        }
    }
    let date = Command::new("date").arg("+%F").output()?;
    let date = String::from_utf8_lossy(&date.stdout).trim().to_string();
    let sizes: Vec<String> = SIZES.iter().map(|(h, w)| format!("3×{h}×{w}")).collect();
    let doc = format!(
        "# Detection memory over {runs} runs ({date})\n\n\
         `cargo run --release -p spillway-benches --bin detection_memory`. One default session \
         per model, each in a fresh process, with glibc malloc's defaults and with \
         `MALLOC_ARENA_MAX=2`; seeded images of {} in turn; `VmRSS` after loading and after \
         the listed runs.\n\n{md}",
        sizes.join(", ")
    );
    let dir = root.join("benches/results");
    std::fs::write(dir.join(format!("detection-memory-{date}.md")), &doc)?;
    std::fs::write(
        dir.join(format!("detection-memory-{date}.json")),
        serde_json::to_string_pretty(&json!({"date": date, "sizes": SIZES, "rows": rows}))?,
    )?;
    println!("{doc}");
    Ok(())
}
