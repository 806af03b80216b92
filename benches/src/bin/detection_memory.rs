//! Memory over many runs with changing shapes: a detector runs `RUNS` times on seeded images of
//! five sizes in turn, on one session; the process's resident set is sampled after chosen runs.
//! A run-time allocator that kept every shape's buffers (ORT's arena does) would grow here.
//!
//! `cargo run --release -p spillway-benches --bin detection_memory [-- --runs N] [--models a,b]`;
//! writes `benches/results/detection-memory-<date>.{md,json}`.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::json;
use spillway::Session;
use spillway_tests::seeded_f32;

/// Image sizes (height, width), used in turn.
const SIZES: [(usize, usize); 5] = [(480, 640), (320, 320), (600, 800), (300, 400), (512, 512)];
/// The detectors tried, when present in the zoo.
const MODELS: [&str; 2] = [
    "ssdlite320_mobilenet_v3_large",
    "fasterrcnn_mobilenet_v3_large_320_fpn",
];

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

fn main() -> Result<()> {
    let mut runs = 1000usize;
    let mut models: Vec<String> = MODELS.iter().map(|s| s.to_string()).collect();
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
            other => bail!("unknown argument {other}"),
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("the workspace root")?;
    let checkpoints: Vec<usize> = [10, 100, 250, 500, 750, 1000]
        .into_iter()
        .filter(|&c| c < runs)
        .chain(std::iter::once(runs))
        .collect();
    let images: Vec<_> = SIZES
        .iter()
        .enumerate()
        .map(|(i, &(h, w))| seeded_f32(&[3, h, w], 100 + i as u64))
        .collect();
    let mut md = String::from("| model | runs | RSS after load MiB |");
    for c in &checkpoints {
        md += &format!(" run {c} MiB |");
    }
    md += " growth run 10 → last |\n|---|---:|---:|";
    md += &"---:|".repeat(checkpoints.len() + 1);
    md += "\n";
    let mut rows = Vec::new();
    for model in &models {
        let path = root.join(format!("models/zoo/{model}.onnx"));
        if !path.exists() {
            eprintln!(
                "{model}: not present at {} (run models/export.sh)",
                path.display()
            );
            continue;
        }
        let session = Session::builder().commit_from_file(&path)?;
        let loaded = rss_kib()?;
        let mut samples = Vec::new();
        let started = Instant::now();
        for run in 1..=runs {
            let image = images[(run - 1) % images.len()].clone();
            session
                .run([("image", image)])
                .with_context(|| format!("{model}: run {run}"))?;
            if checkpoints.contains(&run) {
                samples.push((run, rss_kib()?));
                eprintln!(
                    "{model}: run {run}: RSS {} KiB",
                    samples.last().map_or(0, |s| s.1)
                );
            }
        }
        let mib = |k: u64| k as f64 / 1024.0;
        let first = samples.first().map_or(loaded, |s| s.1);
        let last = samples.last().map_or(loaded, |s| s.1);
        md += &format!("| {model} | {runs} | {:.1} |", mib(loaded));
        for (_, k) in &samples {
            md += &format!(" {:.1} |", mib(*k));
        }
        md += &format!(" {:+.1} MiB |\n", mib(last) as f64 - mib(first));
        rows.push(json!({
            "model": model, "runs": runs, "seconds": started.elapsed().as_secs_f64(),
            "rss_after_load_kib": loaded,
            "rss_kib": samples.iter().map(|(r, k)| json!({"run": r, "kib": k})).collect::<Vec<_>>(),
        }));
    }
    let date = std::process::Command::new("date").arg("+%F").output()?;
    let date = String::from_utf8_lossy(&date.stdout).trim().to_string();
    let sizes: Vec<String> = SIZES.iter().map(|(h, w)| format!("3×{h}×{w}")).collect();
    let doc = format!(
        "# Detection memory over {runs} runs ({date})\n\n\
         `cargo run --release -p spillway-benches --bin detection_memory`. One default session \
         per model; seeded images of {} in turn; `VmRSS` after loading and after the listed \
         runs.\n\n{md}",
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
