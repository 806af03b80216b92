//! MILP on growing random graphs: `cargo run --release -p spillway-placement --example milp_scale`.

use spillway_placement::generate::{LayeredParams, hios_layered, hios_topology};
use spillway_placement::policy::common::Ctx;
use spillway_placement::policy::milp::milp;
use spillway_placement::*;

fn main() {
    let t = hios_topology(2, 1);
    let o = Options {
        milp_time_limit_s: 10.0,
        ..Options::default()
    };
    for n in [6usize, 8, 10, 12, 14, 16, 20, 24, 30] {
        let p = LayeredParams {
            ops: n,
            layers: (n / 3).max(2),
            edges: n * 3 / 2,
            ..LayeredParams::default()
        };
        let g = hios_layered(&p, 7);
        let c = Ctx::new(&g, &t).expect("valid");
        match milp(&c, &o) {
            Ok(r) => {
                let sim = simulate(&g, &t, &r.schedule).expect("sim");
                println!(
                    "n={n:3} objective {:9.1} sim {:9.1} lb {:9.1} optimal {} gap {:?} {:.2}s",
                    r.objective, sim.makespan, sim.lower_bound, r.optimal, r.gap, r.seconds
                );
            }
            Err(e) => println!("n={n}: {e}"),
        }
    }
}
