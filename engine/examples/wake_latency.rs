//! How long a rayon pool takes to start a second worker on a parallel loop after a serial
//! stretch, with the idle workers left to sleep (rayon's default) and kept spinning
//! ([`spillway::exec::with_workers_awake`], what a run on the kernel pool does).
//! `cargo run --release -p spillway --example wake_latency`.
//!
//! Each line joins two equal tasks after `gap` µs of work on the calling worker alone; the
//! join ideally takes one task's time. Measured 2026-11-25 on the 2-vCPU AMD EPYC build
//! machine (a Firecracker VM), median / p90 µs:
//!
//! | gap | tasks | sleeping workers | spinning workers |
//! |---:|---:|---:|---:|
//! | 5 | 2 × 50 | 50 / 51 | 51 / 51 |
//! | 100 | 2 × 50 | 71 / 72 | 51 / 51 |
//! | 1000 | 2 × 100 | 133 / 158 | 101 / 102 |
//!
//! A worker that found no work for a few tens of microseconds sleeps, and waking it cost
//! 20–80 µs here (an earlier run of the same loop: 89 / 113 and 176 / 216 µs sleeping), a
//! large part of a 14×14 convolution's time on one of two threads.

use std::time::{Duration, Instant};

use spillway::exec::with_workers_awake;

/// Busy for `us` microseconds.
fn work(us: u64) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_micros(us) {
        std::hint::spin_loop();
    }
}

fn main() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("a pool of 2");
    for spinning in [false, true] {
        for (gap, task) in [(5, 50), (100, 50), (1000, 100)] {
            let joins = || {
                let mut times: Vec<u128> = (0..300)
                    .map(|_| {
                        work(gap);
                        let start = Instant::now();
                        rayon::join(|| work(task), || work(task));
                        start.elapsed().as_micros()
                    })
                    .collect();
                times.sort_unstable();
                (times[150], times[270])
            };
            let (median, p90) = pool.install(|| match spinning {
                true => with_workers_awake(joins),
                false => joins(),
            });
            let workers = if spinning { "spinning" } else { "sleeping" };
            println!(
                "gap {gap:4} us, 2 x {task} us, {workers} workers: median {median} us, p90 {p90} us"
            );
        }
    }
}
