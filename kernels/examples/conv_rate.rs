//! GFLOP/s of the packed GEMM on one convolution's image operand, on `THREADS` threads
//! (default 1), with a bias and a ReLU as a fused convolution has them (`PLAIN=1`: neither;
//! `ADD=1`: a residual added too), the output in channel planes or (`BLOCKED=1`) in blocks of
//! 16 channels (`BLOCKED_INPUT=1`: the image read as blocks of 16 channels too, as between two
//! blocked convolutions of a model):
//! `cargo run --release -p spillway-kernels --example conv_rate -- M CH KERNEL SIDE [STRIDE]`.

mod timing;

use timing::{number_args, switch};

use rayon::prelude::*;

use spillway_kernels::cpu::nn::epilogue::{Activation, Epilogue};
use spillway_kernels::cpu::nn::packed_gemm::{BSource, BlockedInput, Image2d, PackedA};

fn main() {
    let args = number_args();
    let (m, ch, kern, side) = (args[0], args[1], args[2], args[3]);
    let stride = args.get(4).copied().unwrap_or(1);
    let out = (side + 2 * (kern / 2) - kern) / stride + 1;
    let k = ch * kern * kern;
    let n = out * out;
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
    // Room for a blocked image whose last block is padded.
    let img: Vec<f32> = (0..ch.div_ceil(16) * 16 * side * side)
        .map(|i| (i % 5) as f32 * 0.1)
        .collect();
    let packed = PackedA::new(&a, m, k).expect("an ISA");
    let mut c = vec![0.0f32; m * n];
    let mut blocks = vec![std::mem::MaybeUninit::new(0.0f32); m.div_ceil(16) * 16 * n];
    let image = Image2d {
        img: &img,
        size: [side, side],
        kernel: [kern, kern],
        strides: [stride, stride],
        dilations: [1, 1],
        pads: [kern / 2, kern / 2],
        out: [out, out],
    };
    let plain = switch("PLAIN");
    let blocked_input = switch("BLOCKED_INPUT");
    // BLOCKED=2: through the blocked convolution's path, the output in channel planes.
    let blocked_mode = std::env::var("BLOCKED").unwrap_or_default();
    let blocked = blocked_mode == "1" || blocked_mode == "2";
    let bias: Vec<f32> = (0..m).map(|i| (i % 3) as f32 - 1.0).collect();
    // ADD=1: a residual input added before the ReLU, laid out like the output (as resnet's
    // last convolution of a block has it).
    let residual: Vec<f32> = (0..m.div_ceil(16) * 16 * n)
        .map(|i| (i % 11) as f32 * 0.1)
        .collect();
    let relu = Epilogue {
        add: switch("ADD").then_some(&residual[..]),
        activation: Activation::Relu,
    };
    let (bias, epilogue) = if plain {
        (None, None)
    } else {
        (Some(&bias[..]), Some(&relu))
    };
    let flops = 2.0 * (m * k * n) as f64;
    let threads = std::env::var("THREADS").map_or(1, |t| t.parse().expect("THREADS: a number"));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    // COLD=1: 64 MiB are written between runs, so that the weights come from memory, as
    // they do inside a model whose weights outgrow the caches.
    let cold = switch("COLD");
    // WARM_INPUT=1: the image is read after the flush, so that only the weights are cold.
    let warm_input = switch("WARM_INPUT");
    // IDLE=US: the threads idle this long before each run, as between nodes of a model.
    let idle: Option<u64> = std::env::var("IDLE")
        .ok()
        .map(|v| v.parse().expect("IDLE: microseconds"));
    let mut flush = vec![0u8; if cold { 64 << 20 } else { 0 }];
    // REPS=N: timed runs per line (default 41), e.g. more for a profiler.
    let reps = std::env::var("REPS").map_or(41usize, |r| r.parse().expect("REPS: a number"));
    for _ in 0..3 {
        let mut times: Vec<f64> = pool.install(|| {
            (0..reps)
                .map(|r| {
                    // On every thread, right before: none of them has gone to sleep.
                    flush.par_chunks_mut(1 << 16).for_each(|part| {
                        part.iter_mut().for_each(|b| *b = b.wrapping_add(r as u8))
                    });
                    if warm_input {
                        let sum: f32 = img.par_chunks(1 << 14).map(|p| p.iter().sum::<f32>()).sum();
                        std::hint::black_box(sum);
                    }
                    if let Some(us) = idle {
                        std::thread::sleep(std::time::Duration::from_micros(us));
                    }
                    let start = std::time::Instant::now();
                    if blocked {
                        let input = BlockedInput {
                            image,
                            blocked: blocked_input,
                        };
                        packed.multiply_blocked(
                            &input,
                            &mut blocks,
                            blocked_mode == "1",
                            bias,
                            epilogue,
                        );
                    } else {
                        packed.multiply(BSource::Image(&image), n, &mut c, n, bias, epilogue);
                    }
                    start.elapsed().as_secs_f64()
                })
                .collect()
        });
        times.sort_by(f64::total_cmp);
        let t = times[times.len() / 2];
        println!(
            "m {m} k {k} n {n}: {:7.1} us, {:6.1} GFLOP/s",
            t * 1e6,
            flops / t / 1e9
        );
    }
}
