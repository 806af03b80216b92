//! Writes Gantt charts of HEFT and Auto on one HIOS default graph:
//! `cargo run --release -p spillway-placement --example gantt -- OUT_DIR`.

use spillway_placement::generate::{
    LayeredParams, cpu_gpu_topology, hios_layered, hios_topology, inception,
};
use spillway_placement::*;

fn main() -> Result<()> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let cases = [
        (
            "hios200_4gpu",
            hios_layered(&LayeredParams::default(), 0),
            hios_topology(4, 2),
        ),
        (
            "inception3_cpu_gpu",
            inception(3, 0),
            cpu_gpu_topology(4, 1, 2, 12.0, 50.0),
        ),
    ];
    for (name, g, t) in cases {
        for p in [Policy::Heft, Policy::Auto, Policy::CommSd, Policy::HiosLp] {
            let Ok(s) = place(p, &g, &t, &Options::default()) else {
                continue;
            };
            let r = simulate(&g, &t, &s)?;
            let path = format!("{dir}/gantt_{name}_{}.svg", p.name());
            if let Err(e) = std::fs::write(&path, gantt::gantt_svg(&g, &t, &r)) {
                eprintln!("{path}: {e}");
            }
            println!(
                "{path}: makespan {:.1} µs, lower bound {:.1} µs",
                r.makespan, r.lower_bound
            );
        }
    }
    Ok(())
}
