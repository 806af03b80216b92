//! Winograd F(4×4, 3×3) and F(2×2, 3×3) against the blocked convolution's position tiles, on
//! 3×3 "same" convolutions with blocked input and output, a bias and a ReLU, with one and with
//! all threads (`COLD=1`: 64 MiB written before each run, so that the weights come from
//! memory): `cargo run --release -p spillway-kernels --example winograd_rate [-- C M SIDE]`.
//! Prints each one's median microseconds and its ratio to the direct one's.

mod timing;

use std::mem::MaybeUninit;

use rayon::prelude::*;
use timing::{number_args, switch};

use spillway_kernels::cpu::nn::epilogue::{Activation, Epilogue};
use spillway_kernels::cpu::nn::packed_gemm::{BlockedInput, Image2d, PackedA};
use spillway_kernels::cpu::nn::winograd::{self, WinogradImage};

fn main() {
    let args = number_args();
    let shapes = match args[..] {
        [c, m, side] => vec![(c, m, side)],
        // resnet50's four stages, googlenet's 3×3 branches, VGG16 at 300² (SSD300).
        _ => vec![
            (64, 64, 56),
            (128, 128, 28),
            (256, 256, 14),
            (512, 512, 7),
            (96, 128, 28),
            (112, 224, 14),
            (160, 320, 7),
            (64, 64, 150),
            (256, 256, 75),
            (512, 512, 38),
        ],
    };
    let cold = switch("COLD");
    let mut flush = vec![0u8; if cold { 64 << 20 } else { 0 }];
    for threads in [1, rayon::current_num_threads()] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for &(c, m, side) in &shapes {
            let x: Vec<f32> = (0..c * side * side).map(|i| (i % 5) as f32 * 0.1).collect();
            let w: Vec<f32> = (0..m * c * 9).map(|i| (i % 7) as f32 * 0.01).collect();
            let bias: Vec<f32> = (0..m).map(|i| (i % 3) as f32 - 1.0).collect();
            let relu = Epilogue {
                add: None,
                activation: Activation::Relu,
            };
            let direct = PackedA::new(&w, m, c * 9).expect("an ISA");
            // Packed for outputs large and small: F(4×4, 3×3) and F(2×2, 3×3).
            let wide = winograd::pack_filters(&w, m, c, [32, 32]).expect("AVX-512");
            let small = winograd::pack_filters(&w, m, c, [14, 14]).expect("AVX-512");
            let mut y = vec![MaybeUninit::new(0.0f32); m * side * side];
            let image = Image2d {
                img: &x,
                size: [side, side],
                kernel: [3, 3],
                strides: [1, 1],
                dilations: [1, 1],
                pads: [1, 1],
                out: [side, side],
            };
            let wino = WinogradImage {
                x: &x,
                blocked: true,
                channels: c,
                size: [side, side],
                pads: [1, 1],
                out: [side, side],
            };
            let reps = (2e9 / (9.0 * (c * m * side * side) as f64)).clamp(5.0, 41.0) as usize;
            let mut time = |f: &mut (dyn FnMut() + Send)| {
                pool.install(|| {
                    f();
                    let mut times: Vec<f64> = (0..reps)
                        .map(|r| {
                            flush.par_chunks_mut(1 << 16).for_each(|p| {
                                p.iter_mut().for_each(|b| *b = b.wrapping_add(r as u8))
                            });
                            let start = std::time::Instant::now();
                            f();
                            start.elapsed().as_secs_f64()
                        })
                        .collect();
                    times.sort_by(f64::total_cmp);
                    times[reps / 2]
                })
            };
            let input = BlockedInput {
                image,
                blocked: true,
            };
            let d = time(&mut || {
                direct.multiply_blocked(&input, &mut y, true, Some(&bias), Some(&relu))
            });
            let g = time(&mut || {
                winograd::convolve(&wide, &wino, &mut y, true, Some(&bias), Some(&relu))
            });
            let g2 = time(&mut || {
                winograd::convolve(&small, &wino, &mut y, true, Some(&bias), Some(&relu))
            });
            println!(
                "{threads} thread(s) {c:>3}->{m:<3} {side:>3}²: direct {:8.1} µs, F(4×4) {:8.1} µs ({:.3}), F(2×2) {:8.1} µs ({:.3})",
                d * 1e6,
                g * 1e6,
                g / d,
                g2 * 1e6,
                g2 / d
            );
        }
    }
}
