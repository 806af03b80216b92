//! Microseconds per stride-2 max pool on googlenet's and ssd300's shapes (the AVX-512 path),
//! with one and with all threads:
//! `cargo run --release -p spillway-kernels --example stride2_rate`.

mod timing;

use timing::median_secs;

use spillway_kernels::cpu::nn::pool_stride2::max_pool_stride2_f32;
use spillway_kernels::cpu::nn::pool2d::plane_windows;
use spillway_kernels::cpu::nn::spatial::Geometry;

fn main() {
    // (channels, side, kernel, output side): ceil mode where the output needs it.
    let shapes = [
        (64, 112, 3, 56),
        (192, 56, 3, 28),
        (480, 28, 3, 14),
        (832, 14, 2, 7),
        (256, 75, 2, 38),
    ];
    for threads in [1, rayon::current_num_threads()] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for &(c, side, kernel, out) in &shapes {
            let x: Vec<f32> = (0..c * side * side).map(|i| (i % 13) as f32).collect();
            let mut y = vec![0.0f32; c * out * out];
            let geo = Geometry {
                kernel: vec![kernel; 2],
                strides: vec![2; 2],
                dilations: vec![1; 2],
                pad_begin: vec![0; 2],
                pad_end: vec![2 * (out - 1) + kernel - side; 2],
                out: vec![out; 2],
            };
            let (rows, cols) = plane_windows(&geo, &[side, side]);
            let us = pool.install(|| {
                1e6 * median_secs(
                    || {
                        assert!(max_pool_stride2_f32(&x, (side, side), &rows, &cols, &mut y));
                    },
                    300,
                )
            });
            println!("threads {threads} {c}x{side}x{side} k{kernel}: {us:.1} us");
        }
    }
}
