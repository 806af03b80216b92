//! Microseconds per blocked (NCHW16c) depthwise convolution on NASNet's shapes (3×3 and 5×5,
//! unit stride, "same" padding, ReLU) beside a copy of the input, on 1 thread and on all:
//! `cargo run --release -p spillway-kernels --example depthwise_rate [-- C SIDE K]`.

mod timing;

use timing::{median_secs, number_args};

use spillway_kernels::cpu::nn::blocked::{BLOCK, DOMAIN, available};
use spillway_kernels::{AttrValue, Attributes, NodeSpec, Tensor};

fn main() {
    if !available() {
        println!("blocked kernels need AVX-512F");
        return;
    }
    let args = number_args();
    // (channels, side, kernel)
    let shapes = match args.as_slice() {
        [c, side, k, ..] => vec![(*c, *side, *k)],
        _ => vec![
            (168, 42, 3),
            (168, 42, 5),
            (336, 21, 3),
            (336, 21, 5),
            (672, 11, 3),
            (672, 11, 5),
        ],
    };
    for threads in [1, rayon::current_num_threads()] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for &(c, side, k) in &shapes {
            let stored = c.div_ceil(BLOCK) * BLOCK;
            let x = (0..stored * side * side)
                .map(|i| (i % 13) as f32 * 0.1)
                .collect::<Vec<_>>();
            let x = Tensor::from_shape_vec(&[1, stored / BLOCK, side, side, BLOCK], x).expect("x");
            let w = (0..c * k * k)
                .map(|i| (i % 7) as f32 * 0.1)
                .collect::<Vec<_>>();
            let w = Tensor::from_shape_vec(&[c, 1, k, k], w).expect("w");
            let b = Tensor::from_shape_vec(&[c], vec![0.1f32; c]).expect("b");
            let attrs = Attributes::new()
                .with("kernel_shape", AttrValue::Ints(vec![k as i64, k as i64]))
                .with("pads", AttrValue::Ints(vec![(k / 2) as i64; 4]))
                .with("group", AttrValue::Int(c as i64))
                .with("activation", AttrValue::String("Relu".into()));
            let spec = NodeSpec {
                op_type: "Conv",
                domain: DOMAIN,
                opset: 1,
                attrs: &attrs,
                num_inputs: 3,
                num_outputs: 1,
                options: Default::default(),
            };
            let kernel = spillway_kernels::cpu::build(&spec).expect("kernel");
            let us = pool.install(|| {
                1e6 * median_secs(
                    || {
                        kernel.run(&[Some(&x), Some(&w), Some(&b)]).expect("run");
                    },
                    200,
                )
            });
            let src = x.view::<f32>().expect("f32").to_owned();
            let mut dst = src.clone();
            let copy = 1e6 * median_secs(|| dst.assign(&src), 200);
            let gflops = 2.0 * (stored * side * side * k * k) as f64 / us / 1e3;
            println!(
                "threads {threads} {c}x{side}x{side} {k}x{k}: {us:.1} us, {gflops:.0} GFLOP/s \
                 (a copy: {copy:.1} us)"
            );
        }
    }
}
