//! GFLOP/s of the packed GEMM on convolution-shaped products (dense and im2col `B`), with one
//! and with all threads: `cargo run --release -p spillway-kernels --example gemm_rate`.

mod timing;

use timing::median_secs;

use spillway_kernels::cpu::nn::packed_gemm::{BSource, Image2d, PackedA};

fn main() {
    // (m, channels, kernel, image side): the im2col GEMM is m × (channels·kernel²) × side².
    let shapes = [
        (64, 64, 3, 56),
        (128, 128, 3, 28),
        (256, 256, 3, 14),
        (512, 512, 3, 7),
        (256, 64, 1, 56),
        (2048, 512, 1, 7),
    ];
    for threads in [1, rayon::current_num_threads()] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for &(m, ch, kern, side) in &shapes {
            let k = ch * kern * kern;
            let n = side * side;
            let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
            let img: Vec<f32> = (0..ch * side * side)
                .map(|i| (i % 5) as f32 * 0.1)
                .collect();
            let dense: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
            let packed = PackedA::new(&a, m, k).expect("an ISA");
            let mut c = vec![0.0f32; m * n];
            let image = Image2d {
                img: &img,
                size: [side, side],
                kernel: [kern, kern],
                strides: [1, 1],
                dilations: [1, 1],
                pads: [kern / 2, kern / 2],
                out: [side, side],
            };
            let flops = 2.0 * (m * k * n) as f64;
            let t_dense = pool.install(|| {
                median_secs(
                    || {
                        packed.multiply(
                            BSource::Dense {
                                data: &dense,
                                ld: n,
                            },
                            n,
                            &mut c,
                            n,
                            None,
                            None,
                        )
                    },
                    15,
                )
            });
            let t_image = pool.install(|| {
                median_secs(
                    || packed.multiply(BSource::Image(&image), n, &mut c, n, None, None),
                    15,
                )
            });
            println!(
                "threads {threads} m {m:5} k {k:5} n {n:5}: dense {:6.1} GFLOP/s, im2col {:6.1} GFLOP/s",
                flops / t_dense / 1e9,
                flops / t_image / 1e9
            );
        }
    }
}
