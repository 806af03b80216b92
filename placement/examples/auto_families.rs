//! Auto and the fast policies against the lower bound on every graph family, one line per
//! instance (CSV) and a summary per family: what the Auto ablation and the bound study use.
//!
//! `cargo run --release -p spillway-placement --example auto_families -- [--seeds N]
//! [--first N] [--streams 1,2] [--families a,b] [--variant NAME] [--policies a,b]
//! [--auto-ms N] [--evals N]`
//!
//! `--variant` picks which ingredients of Auto's search run (see
//! `spillway_placement::policy::auto::Ingredients::named`); `--policies` which other policies are
//! timed beside it (default heft, hios_lp, hios_mr, sortinghat).

use std::time::Instant;

use spillway_placement::generate::Family;
use spillway_placement::policy::auto::{Ingredients, auto};
use spillway_placement::policy::common::Ctx;
use spillway_placement::{Options, Policy, lower_bound, place, simulate};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let seeds: u64 = get("--seeds").and_then(|s| s.parse().ok()).unwrap_or(5);
    let first: u64 = get("--first").and_then(|s| s.parse().ok()).unwrap_or(0);
    let streams: Vec<usize> = get("--streams")
        .unwrap_or_else(|| "1,2".into())
        .split(',')
        .filter_map(|s| s.parse().ok())
        .collect();
    let families: Vec<Family> = match get("--families") {
        Some(list) => Family::ALL
            .into_iter()
            .filter(|f| list.split(',').any(|x| x == f.name()))
            .collect(),
        None => Family::ALL.to_vec(),
    };
    let variant = get("--variant").unwrap_or_else(|| "full".into());
    let policies: Vec<Policy> = get("--policies")
        .unwrap_or_else(|| "heft,hios_lp,hios_mr,sortinghat".into())
        .split(',')
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    let opts = Options {
        auto_ingredients: Ingredients::named(&variant).expect("unknown --variant"),
        auto_budget_ms: get("--auto-ms")
            .and_then(|s| s.parse().ok())
            .unwrap_or(Options::default().auto_budget_ms),
        auto_max_evals: get("--evals")
            .and_then(|s| s.parse().ok())
            .unwrap_or(Options::default().auto_max_evals),
        ..Options::default()
    };
    println!(
        "family,streams,seed,lb,{}auto,auto_ms,auto_evals,start",
        policies
            .iter()
            .map(|p| format!("{},", p.name()))
            .collect::<String>()
    );
    let mut summary = Vec::new();
    for &s in &streams {
        for &f in &families {
            let t = f.topology(4, s);
            let (mut ratio, mut worst, mut ms, mut k) = (0.0, 0.0f64, 0.0f64, 0.0);
            let mut others = vec![0.0; policies.len()];
            for seed in first..first + seeds {
                let g = f.graph(seed);
                let dag = g.dag().expect("dag");
                let lb = lower_bound(&g, &dag, &t);
                let mut line = format!("{},{s},{seed},{lb:.3},", f.name());
                for (i, &p) in policies.iter().enumerate() {
                    let m = place(p, &g, &t, &opts)
                        .and_then(|x| simulate(&g, &t, &x))
                        .map(|r| r.makespan)
                        .unwrap_or(f64::NAN);
                    others[i] += m / lb;
                    line += &format!("{m:.3},");
                }
                let t0 = Instant::now();
                let c = Ctx::new(&g, &t).expect("inputs");
                let r = auto(&c, &opts).expect("auto");
                let el = t0.elapsed().as_secs_f64() * 1e3;
                let m = simulate(&g, &t, &r.schedule).expect("sim").makespan;
                println!("{line}{m:.3},{el:.1},{},{}", r.evals, r.start);
                ratio += m / lb;
                worst = worst.max(m / lb);
                ms = ms.max(el);
                k += 1.0;
            }
            summary.push(format!(
                "| {} | {s} | {} | {:.4} | {:.4} | {:.0} |",
                f.name(),
                others
                    .iter()
                    .map(|x| format!("{:.3}", x / k))
                    .collect::<Vec<_>>()
                    .join(" | "),
                ratio / k,
                worst,
                ms
            ));
        }
    }
    eprintln!(
        "| family | streams | {} | auto | auto worst | auto max ms |",
        policies
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    for l in summary {
        eprintln!("{l}");
    }
}
