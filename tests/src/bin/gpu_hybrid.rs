//! `gpu_hybrid OUT_DIR MODEL.onnx… [--image PHOTO] [--streams N] [--runs N] [--splits P,…]`: the detection
//! models on the CPU and GPU 0 together (SIR+'s overflow), against a CPU session.
//!
//! Each model is a session with `Devices::cpu().with_cuda(0, N)`, built for the photo's size
//! (its profile input is random data of that size) and run on the photo, split three ways:
//! GPU first (`Sequential`: every node that can run on the GPU does, as ONNX Runtime's CUDA
//! provider places them), `CommSd` (SIR+'s overflow from measured CPU and GPU times) and
//! `Auto` (GPU first with the GPU segments the CPU runs faster moved to it); `--splits` picks
//! some of them. Each is checked against a CPU session on the photo as the detection check
//! compares engines (`spillway_tests::detections`: same count and labels, scores within 1e-4,
//! boxes within 1e-3 relative, order-ambiguous runs (scores within 2e-4) as sets, masks by IoU ≥ 0.99) and timed: median
//! wall time of `Session::run` over `--runs` runs, the splits taking turns run by run, and
//! GPU memory of its plans. A CPU session (every core) is timed too. Writes `gpu_hybrid.{md,json}`; exits 1 when a
//! split's outputs are wrong, 2 when CUDA is unavailable.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use spillway::{Devices, OptimizationLevel, Session, SessionOutputs};
use spillway_cli::detect::{read_rgb, to_chw_tensor};
use spillway_kernels::Tensor;
use spillway_kernels::cuda::probe;
use spillway_placement::Policy;
use spillway_tests::detections::{compare, extract};
use spillway_tests::{max_relative_difference, median_wall_ms, min_mask_iou};

struct Args {
    out: PathBuf,
    models: Vec<PathBuf>,
    image: PathBuf,
    streams: usize,
    runs: usize,
    splits: Vec<Policy>,
}

fn args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let out = it
        .next()
        .context("usage: gpu_hybrid OUT_DIR MODEL.onnx…")?
        .into();
    let mut a = Args {
        out,
        models: Vec::new(),
        image: "models/images/astronaut.jpg".into(),
        streams: 4,
        runs: 10,
        splits: vec![Policy::Sequential, Policy::CommSd, Policy::Auto],
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--image" => a.image = it.next().context("--image PHOTO")?.into(),
            "--streams" => a.streams = it.next().context("--streams N")?.parse()?,
            "--runs" => a.runs = it.next().context("--runs N")?.parse()?,
            "--splits" => {
                // Policy names as the CLI spells them: sequential, comm_sd, auto, …
                a.splits = it
                    .next()
                    .context("--splits P,…")?
                    .split(',')
                    .map(|p| p.parse().map_err(anyhow::Error::msg))
                    .collect::<Result<_>>()?
            }
            _ => a.models.push(arg.into()),
        }
    }
    Ok(a)
}

#[derive(serde::Serialize)]
struct Split {
    name: String,
    report: String,
    gpu_nodes: usize,
    nodes: usize,
    gpu_mib: f64,
    /// Values passed from GPU segment to GPU segment without leaving the GPU.
    kept_on_gpu: usize,
    build_s: f64,
    run_ms: f64,
    detections: usize,
    max_rel_diff: f64,
    /// Per output, in the model's order: its difference from the CPU's (after the timed runs).
    output_diffs: Vec<(String, f64)>,
    /// How the GPU segments compiled per shape ran, over all runs (`None`: one GPU plan).
    shape_stats: Option<String>,
    /// Per segment, in order: its device, node count, commonest ops and first node.
    segments: Vec<String>,
    /// The smallest IoU of a detection's mask (`p > 0.5`) with the CPU's, for a model with masks.
    mask_iou: Option<f64>,
    pass: bool,
    /// The first detection that differs from the CPU's (see `spillway_tests::detections`).
    mismatch: Option<String>,
    error: Option<String>,
}

#[derive(serde::Serialize)]
struct ModelResult {
    model: String,
    image: Vec<usize>,
    cpu_ms: f64,
    cpu_detections: usize,
    splits: Vec<Split>,
}

/// Median wall milliseconds of `run` over `runs` calls (after one).
fn wall_ms(runs: usize, run: &dyn Fn() -> spillway::Result<SessionOutputs>) -> Result<f64> {
    Ok(median_wall_ms(runs, &|| run().map(drop))?)
}

/// [`max_relative_difference`]; infinite when the shapes differ.
fn relative_difference(want: &Tensor, got: &Tensor) -> Result<f64> {
    if want.shape() != got.shape() {
        return Ok(f64::INFINITY);
    }
    max_relative_difference(want, got).map_err(anyhow::Error::msg)
}

/// A split's session, built.
struct Built {
    policy: Policy,
    session: Session,
    build_s: f64,
}

fn build(path: &Path, policy: Policy, image: &Tensor, streams: usize) -> Result<Built> {
    let start = Instant::now();
    let session = Session::builder()
        .with_devices(Devices::cpu().with_cuda(0, streams))
        .with_placement(policy)
        .with_profile_shape("image", image.shape())
        .commit_from_file(path)?;
    Ok(Built {
        policy,
        session,
        build_s: start.elapsed().as_secs_f64(),
    })
}

/// Wall milliseconds of one run of `session` on `image`.
fn one_run_ms(session: &Session, image: &Tensor) -> Result<f64> {
    let start = Instant::now();
    session.run([("image", image.clone())])?;
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// The median of `ms`.
fn median(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms.get(ms.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `built`'s outputs on `image` against the CPU's (`want`), with its median time `run_ms`.
fn check(
    built: &Built,
    image: &Tensor,
    want: &[Tensor],
    names: &[String],
    run_ms: f64,
) -> Result<Split> {
    let session = &built.session;
    let report = session
        .placement_report()
        .context("a GPU session has a report")?;
    let got = session
        .run([("image", image.clone())])?
        .try_into_tensors()?;
    let output_diffs = (names.iter().cloned())
        .zip(want.iter().zip(&got))
        .map(|(name, (w, g))| Ok((name, relative_difference(w, g)?)))
        .collect::<Result<Vec<_>>>()?;
    let max_rel_diff = output_diffs.iter().fold(0f64, |m, (_, d)| m.max(*d));
    let masks = output_diffs.iter().position(|(n, _)| n == "masks");
    let mask_iou = masks
        .map(|i| min_mask_iou(&want[i], &got[i]).map_err(anyhow::Error::msg))
        .transpose()?;
    // Compared as the detection check compares engines: order-ambiguous runs as sets, masks by IoU.
    let mismatch = compare(&extract(names, want)?, &extract(names, &got)?).err();
    Ok(Split {
        name: format!("{:?}", built.policy),
        report: report.policy.clone(),
        gpu_nodes: report
            .nodes
            .iter()
            .filter(|n| n.2.starts_with("cuda"))
            .count(),
        nodes: report.nodes.len(),
        gpu_mib: report.gpu_bytes.unwrap_or(0) as f64 / (1 << 20) as f64,
        kept_on_gpu: report.kept_on_gpu.unwrap_or(0),
        build_s: built.build_s,
        run_ms,
        shape_stats: session.shape_stats().map(|s| format!("{s:?}")),
        segments: segments(&report.nodes),
        detections: got
            .first()
            .map_or(0, |t| t.shape().first().copied().unwrap_or(0)),
        max_rel_diff,
        output_diffs,
        mask_iou,
        pass: mismatch.is_none(),
        mismatch,
        error: None,
    })
}

/// One line per segment of a placement report's nodes (name, op, device, segment).
fn segments(nodes: &[(String, String, String, usize)]) -> Vec<String> {
    let count = nodes.iter().map(|n| n.3 + 1).max().unwrap_or(0);
    (0..count)
        .map(|s| {
            let members: Vec<_> = nodes.iter().filter(|n| n.3 == s).collect();
            let mut ops: Vec<(String, usize)> = Vec::new();
            for n in &members {
                match ops.iter_mut().find(|(op, _)| *op == n.1) {
                    Some(e) => e.1 += 1,
                    None => ops.push((n.1.clone(), 1)),
                }
            }
            ops.sort_by_key(|o| std::cmp::Reverse(o.1));
            let ops: Vec<String> = ops
                .iter()
                .take(5)
                .map(|(o, c)| format!("{c} {o}"))
                .collect();
            format!(
                "{s} {}: {} nodes ({}), first {}",
                members.first().map_or("", |n| n.2.as_str()),
                members.len(),
                ops.join(", "),
                members.first().map_or("", |n| n.0.as_str())
            )
        })
        .collect()
}

fn run_model(args: &Args, path: &Path, image: &Tensor) -> Result<ModelResult> {
    let cpu = Session::builder()
        .with_optimization(OptimizationLevel::Basic)
        .commit_from_file(path)?;
    let run = || cpu.run([("image", image.clone())]);
    let outputs = run()?;
    let names: Vec<String> = outputs.iter_values().map(|(n, _)| n.to_string()).collect();
    let want = outputs.try_into_tensors()?;
    let cpu_ms = wall_ms(args.runs.min(5), &run)?;
    let failed = |policy: Policy, e: anyhow::Error| Split {
        name: format!("{policy:?}"),
        report: String::new(),
        gpu_nodes: 0,
        nodes: 0,
        gpu_mib: 0.0,
        kept_on_gpu: 0,
        build_s: 0.0,
        run_ms: f64::NAN,
        detections: 0,
        max_rel_diff: f64::NAN,
        output_diffs: Vec::new(),
        shape_stats: None,
        segments: Vec::new(),
        mask_iou: None,
        pass: false,
        mismatch: None,
        error: Some(format!("{e:#}")),
    };
    // A GPU segment after a data-dependent op runs a shape new to it on the CPU, and compiles
    // it when it comes back: two runs of warm-up.
    let warm = |b: &Built| -> Result<()> {
        one_run_ms(&b.session, image)?;
        one_run_ms(&b.session, image).map(drop)
    };
    let mut built = Vec::new();
    let mut splits: Vec<Option<Split>> = Vec::new();
    for &policy in &args.splits {
        match build(path, policy, image, args.streams).and_then(|b| warm(&b).map(|_| b)) {
            Ok(b) => {
                built.push(b);
                splits.push(None);
            }
            Err(e) => splits.push(Some(failed(policy, e))),
        }
    }
    // The splits take turns, run by run, so that the machine's drift falls on all alike.
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); built.len()];
    let mut errors: Vec<Option<anyhow::Error>> = built.iter().map(|_| None).collect();
    for _ in 0..args.runs {
        for ((b, t), e) in built.iter().zip(&mut times).zip(&mut errors) {
            if e.is_none() {
                match one_run_ms(&b.session, image) {
                    Ok(ms) => t.push(ms),
                    Err(err) => *e = Some(err),
                }
            }
        }
    }
    let mut checked = built
        .iter()
        .zip(times)
        .zip(errors)
        .map(|((b, t), e)| match e {
            Some(e) => failed(b.policy, e),
            None => {
                check(b, image, &want, &names, median(t)).unwrap_or_else(|e| failed(b.policy, e))
            }
        });
    let splits = splits
        .into_iter()
        .map(|s| s.or_else(|| checked.next()))
        .collect::<Option<Vec<Split>>>()
        .context("a split was neither built nor failed")?;
    Ok(ModelResult {
        model: path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into(),
        image: image.shape().to_vec(),
        cpu_ms,
        cpu_detections: want
            .first()
            .map_or(0, |t| t.shape().first().copied().unwrap_or(0)),
        splits,
    })
}

fn markdown(gpu: &str, args: &Args, results: &[ModelResult]) -> String {
    let mut md = format!(
        "# CPU + GPU in one inference (SIR+ overflow), {gpu}\n\n\
         `gpu_hybrid` on `{}`, {} streams per GPU segment, median of {} runs of `Session::run` \
         (wall, uploads and downloads included). GPU first = every node with a GPU kernel whose \
         shapes are fixed or follow from its input shapes on the GPU. Splits take turns run by run. Detections vs a CPU session on the same photo as the detection check compares engines (labels equal, scores within 1e-4, boxes within 1e-3 relative, order-ambiguous runs (scores within 2e-4) as sets, masks: IoU of `p > 0.5` ≥ 0.99); max rel diff is the largest elementwise difference over the output's largest magnitude, for scale.\n\n\
         | model | split | placement | GPU nodes | kept on GPU | run ms | vs GPU first | GPU MiB | vs GPU first | \
         detections (CPU) | max rel diff | pass | build s |\n\
         |---|---|---|---|---:|---:|---:|---:|---:|---|---:|---|---:|\n",
        args.image.display(),
        args.streams,
        args.runs
    );
    for r in results {
        let first = r.splits.first();
        for s in &r.splits {
            let ratio = |a: f64, b: Option<f64>| {
                b.filter(|b| *b > 0.0)
                    .map_or(String::new(), |b| format!("{:.3}", a / b))
            };
            md += &format!(
                "| {} {:?} | {} | {} | {}/{} | {} | {:.2} | {} | {:.1} | {} | {} ({}) | {:.1e} | {} | {:.1} |\n",
                r.model,
                r.image,
                s.name,
                s.error.as_deref().unwrap_or(&s.report),
                s.gpu_nodes,
                s.nodes,
                s.kept_on_gpu,
                s.run_ms,
                ratio(s.run_ms, first.map(|f| f.run_ms)),
                s.gpu_mib,
                ratio(s.gpu_mib, first.map(|f| f.gpu_mib)),
                s.detections,
                r.cpu_detections,
                s.max_rel_diff,
                if s.pass { "yes" } else { "**no**" },
                s.build_s
            );
        }
        md += &format!(
            "| {} | CPU session (every core) | | 0/- | | {:.2} | | | | {} | | | |\n",
            r.model, r.cpu_ms, r.cpu_detections
        );
    }
    md += "\n## Per split: each output's difference from the CPU, and the GPU segments compiled per shape\n\n";
    for r in results {
        for s in &r.splits {
            let diffs: Vec<String> = s
                .output_diffs
                .iter()
                .map(|(n, d)| format!("{n} {d:.1e}"))
                .collect();
            let iou = s
                .mask_iou
                .map_or(String::new(), |iou| format!(", smallest mask IoU {iou:.4}"));
            md += &format!(
                "- {} {}: {}{iou}; {}{}\n",
                r.model,
                s.name,
                diffs.join(", "),
                s.shape_stats.as_deref().unwrap_or("one GPU plan"),
                s.mismatch
                    .as_ref()
                    .map_or(String::new(), |m| format!("; **{m}**"))
            );
        }
    }
    md
}

fn main() -> Result<()> {
    // `RUST_LOG=spillway=info` shows what `Auto` timed.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = args()?;
    let gpu = match probe::probe().and_then(|p| p.gpu(0).cloned()) {
        Ok(info) => info.name.clone(),
        Err(e) => {
            eprintln!("CUDA is unavailable: {e}");
            std::process::exit(2);
        }
    };
    let image = to_chw_tensor(&read_rgb(&args.image)?)?;
    std::fs::create_dir_all(&args.out)?;
    let mut results = Vec::new();
    for path in &args.models {
        println!("{}", path.display());
        match run_model(&args, path, &image) {
            Ok(r) => {
                for s in &r.splits {
                    println!(
                        "  {}: {:.2} ms, {:.1} MiB, diff {:.1e} {:?}, {:?}, {}",
                        s.name,
                        s.run_ms,
                        s.gpu_mib,
                        s.max_rel_diff,
                        s.output_diffs,
                        s.shape_stats,
                        s.error.as_deref().unwrap_or(&s.report)
                    );
                }
                results.push(r);
            }
            Err(e) => println!("  failed: {e:#}"),
        }
        // Written after each model, so that a run cut short keeps what it measured.
        std::fs::write(
            args.out.join("gpu_hybrid.json"),
            serde_json::to_string_pretty(&results)?,
        )?;
        std::fs::write(
            args.out.join("gpu_hybrid.md"),
            markdown(&gpu, &args, &results),
        )?;
    }
    print!("{}", markdown(&gpu, &args, &results));
    if results.len() < args.models.len() || results.iter().any(|r| r.splits.iter().any(|s| !s.pass))
    {
        bail!("a model or a split failed");
    }
    Ok(())
}
