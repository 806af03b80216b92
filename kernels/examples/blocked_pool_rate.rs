//! Microseconds per blocked (NCHW16c) max pool on googlenet's shapes — the 3×3 "same" pools of
//! its branches and its stride-2 pools — beside a copy of the input, on 1 thread and on all:
//! `cargo run --release -p spillway-kernels --example blocked_pool_rate`.

mod timing;

use timing::median_secs;

use spillway_kernels::cpu::nn::blocked::{BLOCK, DOMAIN, available};
use spillway_kernels::{AttrValue, Attributes, NodeSpec, Tensor};

fn main() {
    if !available() {
        println!("blocked kernels need AVX-512F");
        return;
    }
    // (channels, side, kernel, stride, pad, ceil_mode)
    let shapes = [
        (192, 28, 3, 1, 1, 0),
        (480, 14, 3, 1, 1, 0),
        (832, 7, 3, 1, 1, 0),
        (64, 112, 3, 2, 0, 1),
        (192, 56, 3, 2, 0, 1),
        (832, 14, 2, 2, 0, 1),
    ];
    for threads in [1, rayon::current_num_threads()] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for &(c, side, k, s, p, ceil) in &shapes {
            let len = c * side * side;
            let x = (0..len).map(|i| (i % 13) as f32).collect::<Vec<_>>();
            let x = Tensor::from_shape_vec(&[1, c / BLOCK, side, side, BLOCK], x).expect("x");
            let attrs = Attributes::new()
                .with("kernel_shape", AttrValue::Ints(vec![k, k]))
                .with("strides", AttrValue::Ints(vec![s, s]))
                .with("pads", AttrValue::Ints(vec![p; 4]))
                .with("ceil_mode", AttrValue::Int(ceil));
            let spec = NodeSpec {
                op_type: "MaxPool",
                domain: DOMAIN,
                opset: 1,
                attrs: &attrs,
                num_inputs: 1,
                num_outputs: 1,
                options: Default::default(),
            };
            let kernel = spillway_kernels::cpu::build(&spec).expect("kernel");
            let us = pool.install(|| {
                1e6 * median_secs(
                    || {
                        kernel.run(&[Some(&x)]).expect("run");
                    },
                    200,
                )
            });
            let src = x.view::<f32>().expect("f32").to_owned();
            let mut dst = src.clone();
            let copy = 1e6 * median_secs(|| dst.assign(&src), 200);
            println!(
                "threads {threads} {c}x{side}x{side} {k}x{k}/{s}: {us:.1} us (a copy: {copy:.1} us)"
            );
        }
    }
}
