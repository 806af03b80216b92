//! Microseconds per transformer projection through the packed GEMM, `Yᵀ = Wᵀ · Xᵀ` (as
//! `MatMul` runs a tokens × features input times a weight matrix), `Xᵀ` read transposed or
//! dense, with one and with all threads (`COLD=1`: 64 MiB written before each run, so that the
//! weights come from memory as in a model larger than the caches):
//! `cargo run --release -p spillway-kernels --example projection_rate [-- TOKENS IN OUT]`.

mod timing;

use timing::{number_args, switch};

use spillway_kernels::cpu::nn::packed_gemm::{BSource, PackedA};

fn main() {
    let args = number_args();
    let shapes = match args[..] {
        [t, i, o] => vec![(t, i, o)],
        // BERT-base at 128 tokens: the FFN's two products and an attention projection.
        _ => vec![(128, 768, 3072), (128, 3072, 768), (128, 768, 768)],
    };
    for threads in [1, rayon::current_num_threads()] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for &(m, k, n) in &shapes {
            let w_t: Vec<f32> = (0..n * k).map(|i| (i % 7) as f32 * 0.1).collect();
            let x: Vec<f32> = (0..m * k).map(|i| (i % 5) as f32 * 0.1).collect();
            let packed = PackedA::new(&w_t, n, k).expect("an ISA");
            let mut yt = vec![0.0f32; n * m];
            let flops = 2.0 * (m * k * n) as f64;
            let cold = switch("COLD");
            let mut flush = vec![0u8; if cold { 64 << 20 } else { 0 }];
            let mut time = |src: BSource<'_>| {
                pool.install(|| {
                    let mut times: Vec<f64> = (0..21u8)
                        .map(|r| {
                            flush
                                .iter_mut()
                                .step_by(64)
                                .for_each(|b| *b = b.wrapping_add(r));
                            let start = std::time::Instant::now();
                            packed.multiply(src, m, &mut yt, m, None, None);
                            start.elapsed().as_secs_f64()
                        })
                        .collect();
                    times.sort_by(f64::total_cmp);
                    times[times.len() / 2]
                })
            };
            let transposed = time(BSource::Transposed { data: &x, ld: k });
            let dense = time(BSource::Dense { data: &x, ld: m });
            println!(
                "threads {threads} {m}x{k}x{n}: transposed {:.0} us ({:.0} GFLOP/s), dense {:.0} us ({:.0} GFLOP/s)",
                transposed * 1e6,
                flops / transposed / 1e9,
                dense * 1e6,
                flops / dense / 1e9
            );
        }
    }
}
