//! Auto against the lower bound on HIOS default graphs with several streams per GPU, with the
//! bound before and after the head–body–tail windows.
//!
//! `cargo run --release -p spillway-placement --example lb_study -- [--seeds N] [--streams N]
//! [--auto-ms N]`
//!
//! Graphs: `hios_layered` defaults (200 ops, 14 layers, 400 edges, p = 0.8) with the Min and
//! Max transfer rules, seeds 0..N, on 4 GPUs. "old LB" = max(critical path, work / lanes,
//! resource-weighted work / GPUs), recomputed here; "LB" = [`lower_bound`] (adds the windows).

use spillway_placement::generate::{LayeredParams, TransferRule, hios_layered, hios_topology};
use spillway_placement::policy::{auto::auto, common::Ctx};
use spillway_placement::{DeviceKind, Options, lower_bound, simulate};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .and_then(|s| s.parse::<u64>().ok())
    };
    let seeds = get("--seeds").unwrap_or(5);
    let streams = get("--streams").unwrap_or(2) as usize;
    let opts = Options {
        auto_budget_ms: get("--auto-ms").unwrap_or(1000),
        ..Options::default()
    };
    let t = hios_topology(4, streams);
    println!("| rule | auto / old LB | auto / LB | LB / old LB | auto ms | evals |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for rule in [TransferRule::Min, TransferRule::Max] {
        let (mut r_old, mut r_new, mut lift, mut ms, mut evals) = (0.0, 0.0, 0.0, 0.0, 0);
        for seed in 0..seeds {
            let g = hios_layered(
                &LayeredParams {
                    rule,
                    ..LayeredParams::default()
                },
                seed,
            );
            let dag = g.dag().expect("dag");
            let cost = |v: usize| g.ops[v].cost_us[&DeviceKind::Gpu];
            let mut fin = vec![0.0f64; g.ops.len()];
            for &v in &dag.topo {
                let s = dag.preds[v]
                    .iter()
                    .map(|&(u, _)| fin[u])
                    .fold(0.0, f64::max);
                fin[v] = s + cost(v);
            }
            let cp = fin.iter().copied().fold(0.0, f64::max);
            let work: f64 = (0..g.ops.len()).map(cost).sum::<f64>() / (4 * streams) as f64;
            let area: f64 = (0..g.ops.len())
                .map(|v| cost(v) * g.ops[v].resource.min(1.0))
                .sum::<f64>()
                / 4.0;
            let old = cp.max(work).max(area);
            let lb = lower_bound(&g, &dag, &t);
            let t0 = std::time::Instant::now();
            let report = auto(&Ctx::new(&g, &t).expect("inputs"), &opts).expect("auto");
            ms += t0.elapsed().as_secs_f64() * 1e3;
            evals += report.evals;
            let s = report.schedule;
            let m = simulate(&g, &t, &s).expect("sim").makespan;
            r_old += m / old;
            r_new += m / lb;
            lift += lb / old;
        }
        let k = seeds as f64;
        println!(
            "| {rule:?} | {:.3} | {:.3} | {:.3} | {:.0} | {} |",
            r_old / k,
            r_new / k,
            lift / k,
            ms / k,
            evals / seeds as usize
        );
    }
}
