//! Microseconds per "same" 3×3 max pool on googlenet's shapes (the flat AVX-512 path),
//! beside a copy of the input, with one and with all threads:
//! `cargo run --release -p spillway-kernels --example pool_rate [-- CHANNELS SIDE]`; `AVERAGE=1`
//! times an average without the padding's cells (NASNet's) instead.

mod timing;

use timing::{median_secs, number_args, switch};

use spillway_kernels::cpu::nn::pool_same::{Reduce, SameWindow, pool_same_f32};

fn main() {
    let args = number_args();
    let shapes = match args[..] {
        [c, side] => vec![(c, side)],
        _ => vec![(192, 28), (256, 28), (480, 14), (832, 7)],
    };
    let reduce = match switch("AVERAGE") {
        true => Reduce::Average { include_pad: false },
        false => Reduce::Max,
    };
    for threads in [1, rayon::current_num_threads()] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for &(c, side) in &shapes {
            let x: Vec<f32> = (0..c * side * side).map(|i| (i % 13) as f32).collect();
            let mut y = vec![0.0f32; x.len()];
            let window = SameWindow {
                kernel: [3, 3],
                pad_begin: [1, 1],
            };
            let us = pool.install(|| {
                1e6 * median_secs(
                    || {
                        pool_same_f32(&x, (side, side), window, reduce, &mut y);
                    },
                    200,
                )
            });
            let copy = 1e6 * median_secs(|| y.copy_from_slice(&x), 200);
            println!("threads {threads} {c}x{side}x{side}: {us:.1} us (a copy: {copy:.1} us)");
        }
    }
}
