//! How fast `Milp` proves optimality as graphs grow.
//!
//! `cargo run --release -p spillway-placement --features highs --example milp_study --
//! [--sizes 8,12,16,20,24] [--seeds N] [--gpus N] [--limit S] [--solvers highs,microlp]
//! [--out DIR]`
//!
//! For each size n and seed: a HIOS §V-A random layered DAG (`hios_layered`, n operators,
//! max(2, n/4) layers, 2n edges, p = 0.8, Max transfer rule) on `gpus` fully meshed GPUs with
//! one stream each, solved by `Milp` with the time limit. Reports per size the number proven
//! optimal, the median/max time to proof, the worst gap at the limit, and the MILP makespan
//! against the best heuristic's (HEFT, HIOS-LP, Auto), one table per solver. Writes `milp.md` and `milp.json` under
//! `--out` (default `benches/results/placement/`). Lives in the placement crate so that it
//! builds without the engine.

use std::fmt::Write as _;
use std::path::PathBuf;

use spillway_placement::generate::{LayeredParams, TransferRule, hios_layered, hios_topology};
use spillway_placement::policy::common::Ctx;
use spillway_placement::policy::milp;
use spillway_placement::policy::milp_solver::MilpSolver;
use spillway_placement::{Options, Policy, place, simulate};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let sizes: Vec<usize> = get("--sizes")
        .unwrap_or_else(|| "8,12,16,20,24".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let seeds: u64 = get("--seeds").and_then(|s| s.parse().ok()).unwrap_or(3);
    let gpus: usize = get("--gpus").and_then(|s| s.parse().ok()).unwrap_or(4);
    let limit: f64 = get("--limit").and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let out = get("--out").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../benches/results/placement")
    });
    let solvers: Vec<MilpSolver> = get("--solvers")
        .unwrap_or_else(|| "highs,microlp".into())
        .split(',')
        .map(|s| {
            serde_json::from_value(serde_json::Value::String(s.trim().into()))
                .unwrap_or_else(|_| panic!("unknown solver {s}"))
        })
        .filter(|s: &MilpSolver| s.available())
        .collect();
    let heur_opts = Options {
        auto_exact_ops: 0,
        ..Options::default()
    };
    let t = hios_topology(gpus, 1);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Milp: time to prove optimality\n\n\
         Machine: 2-core x86-64 build machine, no GPU, nothing else running.\n\n\
         Reproduce: `cargo run --release -p spillway-placement --features highs --example \
         milp_study -- --sizes {} --seeds {seeds} --gpus {gpus} --limit {limit} --solvers {}`\n\n\
         Graphs: `hios_layered` (n operators, max(2, n/4) layers, 2n edges, p = 0.8, Max rule, \
         seeds 1..={seeds}) on {gpus} GPUs, one stream each (the `Resource` model gives one \
         machine per GPU). Time limit {limit} s per solve. `heur` = best of HEFT, HIOS-LP and \
         Auto without exact candidates (simulated makespan); `milp` = the simulated makespan of Milp's schedule.",
        sizes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
        solvers
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut json = Vec::new();
    for &solver in &solvers {
        let opts = Options {
            milp_time_limit_s: limit,
            milp_solver: solver,
            ..Options::default()
        };
        let _ = writeln!(
            md,
            "\n## {}\n\n\
         | ops | proven optimal | median s | max s | worst gap at limit | milp / heur (mean) |\n\
         | --- | --- | --- | --- | --- | --- |",
            solver.name()
        );
        for &n in &sizes {
            let mut times = Vec::new();
            let mut proven = 0;
            let mut worst_gap = 0.0f64;
            let mut ratio = Vec::new();
            for seed in 1..=seeds {
                let p = LayeredParams {
                    ops: n,
                    layers: (n / 4).max(2),
                    edges: 2 * n,
                    p: 0.8,
                    rule: TransferRule::Max,
                };
                let g = hios_layered(&p, seed);
                let c = Ctx::new(&g, &t).expect("valid graph");
                let r = milp::milp(&c, &opts).expect("milp");
                let ms = simulate(&g, &t, &r.schedule).expect("sim").makespan;
                let heur = [Policy::Heft, Policy::HiosLp, Policy::Auto]
                    .iter()
                    .filter_map(|&pol| place(pol, &g, &t, &heur_opts).ok())
                    .filter_map(|s| simulate(&g, &t, &s).ok())
                    .map(|r| r.makespan)
                    .fold(f64::INFINITY, f64::min);
                times.push(r.seconds);
                if r.optimal {
                    proven += 1;
                } else {
                    worst_gap = worst_gap.max(r.gap.unwrap_or(f64::INFINITY));
                }
                ratio.push(ms / heur);
                eprintln!(
                    "{} n={n} seed={seed}: optimal={} {:.2}s objective={:.1} gap={:?} sim={ms:.1} heur={heur:.1}",
                    solver.name(),
                    r.optimal,
                    r.seconds,
                    r.objective,
                    r.gap
                );
                json.push(serde_json::json!({
                "solver": solver.name(), "ops": n, "seed": seed, "optimal": r.optimal, "seconds": r.seconds,
                "objective": r.objective, "gap": r.gap, "milp_sim": ms, "best_heuristic": heur,
            }));
            }
            times.sort_by(f64::total_cmp);
            let med = times[times.len() / 2];
            let max = times.last().copied().unwrap_or(0.0);
            let mean_ratio = ratio.iter().sum::<f64>() / ratio.len().max(1) as f64;
            let gap = if proven == times.len() {
                "—".to_string()
            } else {
                format!("{:.1} %", worst_gap * 100.0)
            };
            let _ = writeln!(
                md,
                "| {n} | {proven}/{} | {med:.2} | {max:.2} | {gap} | {mean_ratio:.3} |",
                times.len()
            );
        }
    }
    std::fs::create_dir_all(&out).expect("out dir");
    std::fs::write(out.join("milp.md"), md).expect("write md");
    std::fs::write(
        out.join("milp.json"),
        serde_json::to_string_pretty(&json).expect("json"),
    )
    .expect("write json");
}
