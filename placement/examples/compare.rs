//! Runs every policy on a few HIOS default graphs and prints makespan / lower bound and time.
//! `cargo run --release -p spillway-placement --example compare [seeds] [gpus] [streams] [min|max]`

use std::time::Instant;

use spillway_placement::generate::{LayeredParams, TransferRule, hios_layered, hios_topology};
use spillway_placement::*;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seeds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let gpus: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4);
    let streams: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(2);
    let rule = if args.get(4).map(String::as_str) == Some("min") {
        TransferRule::Min
    } else {
        TransferRule::Max
    };
    let params = LayeredParams {
        rule,
        ..LayeredParams::default()
    };
    let t = hios_topology(gpus, streams);
    let o = Options::default();
    for p in Policy::ALL {
        let (mut ratio, mut ms, mut ok) = (0.0, 0.0, 0);
        let mut err = String::new();
        for seed in 0..seeds {
            let g = hios_layered(&params, seed);
            let t0 = Instant::now();
            match place(p, &g, &t, &o).and_then(|s| simulate(&g, &t, &s)) {
                Ok(r) => {
                    ms += t0.elapsed().as_secs_f64() * 1e3;
                    ratio += r.makespan / r.lower_bound;
                    ok += 1;
                }
                Err(e) => err = e.to_string(),
            }
        }
        if ok > 0 {
            println!(
                "{:12} ratio {:.3}  time {:8.2} ms",
                p.name(),
                ratio / ok as f64,
                ms / ok as f64
            );
        } else {
            println!("{:12} {}", p.name(), err);
        }
    }
}
