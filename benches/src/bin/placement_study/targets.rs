//! The scheduling-time and quality targets of the placement issue, measured.

use std::fmt::Write as _;
use std::time::Instant;

use spillway_placement::generate::{
    LayeredParams, TransferRule, hios_layered, hios_topology, sized,
};
use spillway_placement::policy::common::Ctx;
use spillway_placement::policy::{auto, hios_lp, lios, milp, opara};
use spillway_placement::{Options, Policy, place, simulate};

fn median_us(mut f: impl FnMut(), reps: usize) -> f64 {
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let t0 = Instant::now();
            f();
            t0.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Markdown section with every target.
pub fn report(o: &Options, quick: bool) -> String {
    let mut s = String::from("## Targets\n\n");
    let g = sized(374, 576, 1);
    let t8 = hios_topology(1, 8);
    let c = Ctx::new(&g, &t8).expect("valid");
    let l = median_us(|| drop(lios::lios(&c)), 21);
    let a = median_us(|| drop(opara::allocate_streams(&c.dag)), 101);
    let _ = writeln!(
        s,
        "- Lios, 374 ops / 576 edges, 8 streams: {:.0} µs (target < 1 ms).",
        l
    );
    let _ = writeln!(
        s,
        "- Opara stream allocation (Alg. 1), same graph: {:.1} µs (target < 50 µs).",
        a
    );
    let g2 = hios_layered(&LayeredParams::default(), 1);
    let t4 = hios_topology(4, 2);
    let c2 = Ctx::new(&g2, &t4).expect("valid");
    let h = median_us(|| drop(hios_lp::hios_lp(&c2, o.window)), 5);
    let _ = writeln!(
        s,
        "- HiosLp, 200 ops / 4 GPUs (2 streams, w = {}): {:.1} ms (target < 200 ms).",
        o.window,
        h / 1e3
    );
    let seeds = if quick { 5 } else { 30 };
    let _ = writeln!(
        s,
        "\nQuality on HIOS default graphs (200 ops, 400 edges, 4 GPUs, p = 0.8), mean over {seeds} seeds, Auto with its default 600 ms budget:\n"
    );
    let _ = writeln!(
        s,
        "| streams/GPU | transfer rule | policy | makespan / LB | time per graph (ms) |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- |");
    let full = Options::default();
    for streams in [1usize, 2] {
        for rule in [TransferRule::Min, TransferRule::Max] {
            let t = hios_topology(4, streams);
            let mut sums: Vec<(Policy, f64, f64, usize)> =
                Policy::ALL.iter().map(|&p| (p, 0.0, 0.0, 0)).collect();
            for seed in 0..seeds {
                let g = hios_layered(
                    &LayeredParams {
                        rule,
                        ..LayeredParams::default()
                    },
                    seed,
                );
                let c = Ctx::new(&g, &t).expect("valid");
                for row in &mut sums {
                    if matches!(
                        row.0,
                        Policy::Qd | Policy::Sd | Policy::CommSd | Policy::Ios | Policy::Milp
                    ) {
                        continue;
                    }
                    let t0 = Instant::now();
                    let sched = if row.0 == Policy::Auto {
                        auto::auto(&c, &full).map(|r| r.schedule)
                    } else {
                        place(row.0, &g, &t, &full)
                    };
                    let ms = t0.elapsed().as_secs_f64() * 1e3;
                    if let Ok(r) = sched.and_then(|x| simulate(&g, &t, &x)) {
                        row.1 += r.makespan / r.lower_bound;
                        row.2 += ms;
                        row.3 += 1;
                    }
                }
            }
            for (p, ratio, ms, k) in sums {
                if k > 0 {
                    let _ = writeln!(
                        s,
                        "| {streams} | {rule:?} | {} | {:.3} | {:.1} |",
                        p.name(),
                        ratio / k as f64,
                        ms / k as f64
                    );
                }
            }
        }
    }
    let _ = writeln!(
        s,
        "\nMilp (microlp, 10 s limit) on HIOS-style graphs, 2 GPUs, 1 stream:\n"
    );
    let _ = writeln!(
        s,
        "| ops | objective (µs) | proven optimal | gap | seconds |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- |");
    let sizes: &[usize] = if quick {
        &[6, 10]
    } else {
        &[6, 8, 10, 12, 14, 16, 20]
    };
    for &n in sizes {
        let p = LayeredParams {
            ops: n,
            layers: (n / 3).max(2),
            edges: n * 3 / 2,
            ..LayeredParams::default()
        };
        let g = hios_layered(&p, 7);
        let t = hios_topology(2, 1);
        let c = Ctx::new(&g, &t).expect("valid");
        match milp::milp(&c, &full) {
            Ok(r) => {
                let _ = writeln!(
                    s,
                    "| {n} | {:.1} | {} | {:?} | {:.2} |",
                    r.objective, r.optimal, r.gap, r.seconds
                );
            }
            Err(e) => {
                let _ = writeln!(s, "| {n} | {e} | | | |");
            }
        }
    }
    s
}
