//! The HIOS §V simulation sweeps for every placement policy.
//!
//! `cargo run --release -p spillway-benches --bin placement_study -- [--quick] [--seeds N]
//! [--streams N] [--rule max|min] [--auto-ms N] [--out DIR]`
//!
//! `... placement_study -- --families [--seeds N] [--slow POLICY,.. --slow-seeds N]
//! [--auto-ms N] [--date YYYY-MM-DD] [--machine TEXT] [--out DIR]`: instead of the sweeps, every
//! graph family of `generate::Family` (the crate's own, the HIOS authors' generator, RandWire,
//! NASNet-A, series-parallel, fork-join) × every policy, 4 GPUs with 1 and 2 streams per GPU:
//! ratio to the lower bound (mean ± sd) and scheduling time; writes `families-<date>.csv`,
//! `.md` and `-s1.svg`/`-s2.svg`. Auto's budget defaults to `Options::default()`'s there.
//!
//! Sweeps (defaults 200 operators, 14 layers, 400 edges, 4 GPUs, p = 0.8): GPUs 2–12, operators
//! 100–400, edges 400–600, layers 6–22, p 0.4–1.2; 30 seeded instances per point (5 with
//! `--quick`). For every policy: mean ± sd makespan, speedup over Sequential, ratio to the lower
//! bound, scheduling time. Writes `<sweep>.csv` and `<sweep>.svg` per sweep and `summary.md`
//! under `benches/results/placement/`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use spillway_placement::generate::{LayeredParams, TransferRule, hios_layered, hios_topology};
use spillway_placement::{Options, Policy, place, simulate};

#[path = "placement_study/families.rs"]
mod families;
#[path = "placement_study/plot.rs"]
mod plot;
#[path = "placement_study/targets.rs"]
mod targets;

/// One (policy, instance) outcome.
#[derive(Clone, Copy)]
pub struct Run {
    makespan: f64,
    lb: f64,
    seq: f64,
    sched_ms: f64,
}

/// Mean and sample standard deviation.
pub fn mean_sd(x: &[f64]) -> (f64, f64) {
    let n = x.len().max(1) as f64;
    let m = x.iter().sum::<f64>() / n;
    let v = if x.len() > 1 {
        x.iter().map(|a| (a - m).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (m, v.sqrt())
}

struct Cfg {
    seeds: u64,
    streams: usize,
    rule: TransferRule,
    opts: Options,
    out: PathBuf,
    quick: bool,
}

fn parse() -> Cfg {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let quick = args.iter().any(|a| a == "--quick");
    let auto_ms = get("--auto-ms")
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 30 } else { 100 });
    Cfg {
        seeds: get("--seeds")
            .and_then(|s| s.parse().ok())
            .unwrap_or(if quick { 5 } else { 30 }),
        streams: get("--streams").and_then(|s| s.parse().ok()).unwrap_or(2),
        rule: if get("--rule").as_deref() == Some("min") {
            TransferRule::Min
        } else {
            TransferRule::Max
        },
        opts: Options {
            auto_budget_ms: auto_ms,
            ..Options::default()
        },
        out: get("--out").map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("results")
                .join("placement")
        }),
        quick,
    }
}

/// Policies that apply to a GPU-only box of this size (the CPU-overflow and exact ones do not).
fn policies() -> Vec<Policy> {
    Policy::ALL
        .into_iter()
        .filter(|p| {
            !matches!(
                p,
                Policy::Qd | Policy::Sd | Policy::CommSd | Policy::Ios | Policy::Milp
            )
        })
        .collect()
}

/// Runs every policy on one instance.
fn instance(params: &LayeredParams, gpus: usize, cfg: &Cfg, seed: u64) -> Vec<Option<Run>> {
    let g = hios_layered(params, seed);
    let t = hios_topology(gpus, cfg.streams);
    let seq_s = place(Policy::Sequential, &g, &t, &cfg.opts).and_then(|s| simulate(&g, &t, &s));
    let Ok(seq) = seq_s else {
        return vec![None; policies().len()];
    };
    policies()
        .into_iter()
        .map(|p| {
            let t0 = Instant::now();
            let s = place(p, &g, &t, &cfg.opts).ok()?;
            let sched_ms = t0.elapsed().as_secs_f64() * 1e3;
            let r = simulate(&g, &t, &s).ok()?;
            Some(Run {
                makespan: r.makespan,
                lb: r.lower_bound,
                seq: seq.makespan,
                sched_ms,
            })
        })
        .collect()
}

/// All instances of one point, spread over the machine's cores.
fn point(params: &LayeredParams, gpus: usize, cfg: &Cfg) -> Vec<Vec<Run>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(cfg.seeds as usize)
        .max(1);
    let chunks: Vec<Vec<u64>> = (0..threads)
        .map(|k| {
            (0..cfg.seeds)
                .filter(|s| *s as usize % threads == k)
                .collect()
        })
        .collect();
    let results: Vec<Vec<Vec<Option<Run>>>> = std::thread::scope(|sc| {
        let hs: Vec<_> = chunks
            .iter()
            .map(|seeds| {
                sc.spawn(move || {
                    seeds
                        .iter()
                        .map(|&s| instance(params, gpus, cfg, s))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut per_policy = vec![Vec::new(); policies().len()];
    for runs in results.into_iter().flatten() {
        for (i, r) in runs.into_iter().enumerate() {
            if let Some(r) = r {
                per_policy[i].push(r);
            }
        }
    }
    per_policy
}

/// `--families`: every graph family × every policy (see the module doc).
fn families_main(cfg: &Cfg) -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let slow: Vec<Policy> = get("--slow")
        .map(|s| s.split(',').filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default();
    let opts = Options {
        auto_budget_ms: get("--auto-ms")
            .and_then(|s| s.parse().ok())
            .unwrap_or(Options::default().auto_budget_ms),
        ..Options::default()
    };
    let date = get("--date").unwrap_or_else(|| "undated".into());
    let machine = get("--machine").unwrap_or_else(|| "not given".into());
    let c = families::FamilyCfg {
        seeds: cfg.seeds,
        slow_seeds: get("--slow-seeds")
            .and_then(|s| s.parse().ok())
            .unwrap_or(cfg.seeds),
        slow,
        policies: policies(),
        opts,
        gpus: 4,
        out: &cfg.out,
        date: &date,
        machine: &machine,
    };
    println!("{}", families::run(&c)?);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cfg = parse();
    std::fs::create_dir_all(&cfg.out)?;
    if std::env::args().any(|a| a == "--families") {
        return families_main(&cfg);
    }
    let base = LayeredParams {
        rule: cfg.rule,
        ..LayeredParams::default()
    };
    type Sweep = (&'static str, &'static str, Vec<f64>);
    let sweeps: Vec<Sweep> = vec![
        ("gpus", "GPUs", vec![2., 4., 6., 8., 10., 12.]),
        (
            "operators",
            "operators",
            (0..7).map(|i| 100. + 50. * i as f64).collect(),
        ),
        (
            "edges",
            "edges",
            (0..5).map(|i| 400. + 50. * i as f64).collect(),
        ),
        (
            "layers",
            "layers",
            (0..5).map(|i| 6. + 4. * i as f64).collect(),
        ),
        (
            "p",
            "p (transfer / exec)",
            (0..5).map(|i| 0.4 + 0.2 * i as f64).collect(),
        ),
    ];
    let names: Vec<&str> = policies().iter().map(|p| p.name()).collect();
    let mut summary = String::new();
    let started = Instant::now();
    let _ = writeln!(summary, "# Placement study (HIOS §V sweeps)\n");
    let _ = writeln!(
        summary,
        "Random layered DAGs (HIOS §V-A; defaults 200 operators, 14 layers, 400 edges, 4 GPUs, p = 0.8, \
         transfer rule `{:?}`), {} instances per point, {} streams per GPU, `Resource` slowdown model, \
         Auto local-search budget {} ms. Makespans from the crate's discrete-event simulator; LB = \
         max(critical path, work / capacity, resource-weighted work / GPUs). Qd/Sd/CommSd need a CPU \
         and Ios/Milp refuse 100+ operators, so they are not in the sweeps.{}\n",
        cfg.rule,
        cfg.seeds,
        cfg.streams,
        cfg.opts.auto_budget_ms,
        if cfg.quick { " **Quick run.**" } else { "" }
    );
    for (key, label, xs) in &sweeps {
        let mut csv = String::from(
            "sweep,x,policy,instances,makespan_mean_ms,makespan_sd_ms,speedup_vs_sequential,ratio_to_lb_mean,ratio_to_lb_sd,sched_ms_mean\n",
        );
        let mut series: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); names.len()];
        let mut default_rows = String::new();
        for &x in xs {
            let mut p = base;
            let mut gpus = 4;
            match *key {
                "gpus" => gpus = x as usize,
                "operators" => {
                    p.ops = x as usize;
                    p.edges = 2 * p.ops;
                }
                "edges" => p.edges = x as usize,
                "layers" => p.layers = x as usize,
                _ => p.p = x,
            }
            let per = point(&p, gpus, &cfg);
            for (i, runs) in per.iter().enumerate() {
                if runs.is_empty() {
                    continue;
                }
                let ms: Vec<f64> = runs.iter().map(|r| r.makespan / 1e3).collect();
                let (m, sd) = mean_sd(&ms);
                let sp = mean_sd(&runs.iter().map(|r| r.seq / r.makespan).collect::<Vec<_>>()).0;
                let (lb, lbsd) =
                    mean_sd(&runs.iter().map(|r| r.makespan / r.lb).collect::<Vec<_>>());
                let t = mean_sd(&runs.iter().map(|r| r.sched_ms).collect::<Vec<_>>()).0;
                let _ = writeln!(
                    csv,
                    "{key},{x},{},{},{m:.4},{sd:.4},{sp:.4},{lb:.4},{lbsd:.4},{t:.4}",
                    names[i],
                    runs.len()
                );
                series[i].push((x, m, sd));
                let is_default = match *key {
                    "gpus" => gpus == 4,
                    _ => false,
                };
                if is_default {
                    let _ = writeln!(
                        default_rows,
                        "| {} | {m:.2} ± {sd:.2} | {sp:.2} | {lb:.3} ± {lbsd:.3} | {t:.2} |",
                        names[i]
                    );
                }
            }
            eprintln!(
                "{key} = {x} done ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
        }
        std::fs::write(cfg.out.join(format!("{key}.csv")), &csv)?;
        let svg = plot::lines(
            &format!("Makespan vs {label}"),
            label,
            "makespan (ms)",
            &names,
            &series,
        );
        std::fs::write(cfg.out.join(format!("{key}.svg")), svg)?;
        if !default_rows.is_empty() {
            let _ = writeln!(
                summary,
                "## Default point (200 ops, 400 edges, 14 layers, 4 GPUs, p = 0.8)\n"
            );
            let _ = writeln!(
                summary,
                "| policy | makespan (ms) | speedup vs sequential | makespan / LB | scheduling time (ms) |"
            );
            let _ = writeln!(summary, "| --- | --- | --- | --- | --- |");
            summary.push_str(&default_rows);
            summary.push('\n');
        }
        let _ = writeln!(summary, "- `{key}.csv`, `{key}.svg`: sweep over {label}.");
    }
    let _ = writeln!(summary, "\n{}", targets::report(&cfg.opts, cfg.quick));
    let _ = writeln!(
        summary,
        "Total study time {:.0} s.",
        started.elapsed().as_secs_f64()
    );
    std::fs::write(cfg.out.join("summary.md"), &summary)?;
    println!("{summary}");
    Ok(())
}
