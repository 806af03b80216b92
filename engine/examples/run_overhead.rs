//! The fixed cost of `Session::run` on a small model, for profiling (`perf record`): runs the
//! model on a seeded input in a loop, back to back or with a pause between runs (a host that
//! runs a small model now and then: its kernel threads have gone to sleep), and prints the
//! median µs per run. The side-by-side figures against ONNX Runtime come from
//! `benches/src/bin/node_overhead.rs`.
//!
//! `cargo run --release -p spillway --example run_overhead -- MODEL.onnx [RUNS] [PAUSE_US]`

use std::time::{Duration, Instant};

use spillway::{Dim, Session, Tensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .ok_or("usage: run_overhead MODEL.onnx [RUNS] [PAUSE_US]")?;
    let runs: usize = args.next().map_or(Ok(20_000), |a| a.parse())?;
    let pause = Duration::from_micros(args.next().map_or(Ok(0), |a| a.parse())?);
    let session = Session::builder().commit_from_file(&model)?;
    let inputs: Vec<(String, Tensor)> = session
        .inputs()
        .iter()
        .map(|input| {
            // Unknown and symbolic sizes are taken as 1.
            let shape: Vec<usize> = (input.shape.iter().flatten())
                .map(|d| match d {
                    Dim::Fixed(n) => *n,
                    _ => 1,
                })
                .collect();
            let len = shape.iter().product::<usize>();
            let data = (0..len).map(|i| (i % 7) as f32 * 0.25).collect();
            Ok((input.name.clone(), Tensor::from_shape_vec(&shape, data)?))
        })
        .collect::<Result<_, Box<dyn std::error::Error>>>()?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let feed = inputs.iter().map(|(n, t)| (n.as_str(), t.clone()));
        let start = Instant::now();
        let outputs = session.run(feed)?;
        times.push(start.elapsed());
        std::hint::black_box(outputs);
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
    let mean = times.iter().map(|t| t.as_secs_f64()).sum::<f64>() / times.len() as f64 * 1e6;
    times.sort();
    let us = |q: f64| times[((times.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    println!(
        "{model}: {runs} runs, pause {} µs: mean {mean:.2} µs, median {:.2} µs, p90 {:.2} µs",
        pause.as_micros(),
        us(0.5),
        us(0.9)
    );
    Ok(())
}
