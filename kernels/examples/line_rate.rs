//! Winograd's 1-D F(4, r) against the blocked convolution's position tiles, on 1×r "same"
//! convolutions (`VERTICAL=1`: r×1) with blocked input and output, a bias and a ReLU, with
//! one and with all threads, beside the `r + 3` products alone (the transforms' share is
//! the rest): `cargo run --release -p spillway-kernels --example line_rate [-- C M SIDE R]`
//! (default: inception_v3's 1×7 and 1×3 shapes). Prints median microseconds.

mod timing;

use std::mem::MaybeUninit;

use rayon::prelude::*;
use timing::{median_secs, number_args, switch};

use spillway_kernels::cpu::nn::epilogue::{Activation, Epilogue};
use spillway_kernels::cpu::nn::packed_gemm::{self, BlockedInput, Image2d, PackedA};
use spillway_kernels::cpu::nn::winograd::WinogradImage;
use spillway_kernels::cpu::nn::winograd::line::{self, Along};

fn main() {
    let args = number_args();
    let shapes = match args[..] {
        [c, m, side, r] => vec![(c, m, side, r)],
        _ => vec![(128, 128, 17, 7), (192, 192, 17, 7), (384, 384, 8, 3)],
    };
    let (along, vertical) = match switch("VERTICAL") {
        true => (Along::Height, true),
        false => (Along::Width, false),
    };
    for threads in [1, rayon::current_num_threads()] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for &(c, m, side, r) in &shapes {
            let x: Vec<f32> = (0..c * side * side).map(|i| (i % 5) as f32 * 0.1).collect();
            let w: Vec<f32> = (0..m * c * r).map(|i| (i % 7) as f32 * 0.01).collect();
            let bias: Vec<f32> = (0..m).map(|i| (i % 3) as f32 - 1.0).collect();
            let relu = Epilogue {
                add: None,
                activation: Activation::Relu,
            };
            let (kernel, pads) = match vertical {
                true => ([r, 1], [r / 2, 0]),
                false => ([1, r], [0, r / 2]),
            };
            let direct = PackedA::new(&w, m, c * r).expect("an ISA");
            let filters = line::pack_filters(&w, m, c, r).expect("AVX-512");
            let mut y = vec![MaybeUninit::new(0.0f32); m * side * side];
            let input = BlockedInput {
                image: Image2d {
                    img: &x,
                    size: [side, side],
                    kernel,
                    strides: [1, 1],
                    dilations: [1, 1],
                    pads,
                    out: [side, side],
                },
                blocked: true,
            };
            let image = WinogradImage {
                x: &x,
                blocked: true,
                channels: c,
                size: [side, side],
                pads,
                out: [side, side],
            };
            let tiles = side.div_ceil(4) * side;
            let v = vec![0.5f32; tiles * c];
            let mut p = vec![MaybeUninit::new(0.0f32); filters.len() * tiles * m];
            let reps = 41;
            let (d, g, products) = pool.install(|| {
                let d = median_secs(
                    || direct.multiply_blocked(&input, &mut y, true, Some(&bias), Some(&relu)),
                    reps,
                );
                let g = median_secs(
                    || line::convolve(&filters, along, &image, &mut y, Some(&bias), Some(&relu)),
                    reps,
                );
                // The products alone, as `convolve` runs them: one task each.
                let products = median_secs(
                    || {
                        p.par_chunks_mut(tiles * m)
                            .zip(&filters)
                            .for_each(|(p, f)| {
                                packed_gemm::serially(|| f.multiply_token_major(&v, tiles, p, None))
                            })
                    },
                    reps,
                );
                (d, g, products)
            });
            println!(
                "{threads} thread(s) {c:>3}->{m:<3} {side:>3}² r {r}: direct {:7.1} µs, F(4, r) {:7.1} µs ({:.3}), its products alone {:7.1} µs",
                d * 1e6,
                g * 1e6,
                g / d,
                products * 1e6,
            );
        }
    }
}
