//! Runs the bundled model (`models/small/inception_block.onnx`, or the model given as the first
//! argument, with one float input) through the `ort` crate on Spillway, checks the result
//! against a direct `spillway::Session::run`, and prints the median latency of both and their
//! ratio (the overhead of the `ort` front-end), measured in this process.
//!
//! ```sh
//! cargo run --release -p spillway-ort --example bundled [-- model.onnx [runs]]
//! ```

use std::time::{Duration, Instant};

use ndarray::{ArrayD, IxDyn};
use ort::session::Session;
use ort::value::TensorRef;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model = args.next().unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../models/small/inception_block.onnx"
        )
        .to_string()
    });
    let runs: usize = args.next().map_or(Ok(200), |s| s.parse())?;

    // The one line that moves an `ort` program onto Spillway.
    ort::set_api(spillway_ort::api());
    let env = ort::init().with_name("spillway-example").build()?;

    let mut session = Session::builder(&env)?.commit_from_file(&model)?;
    let input = session.inputs()[0].name().to_string();
    let shape: Vec<usize> = session.inputs()[0]
        .dtype()
        .tensor_shape()
        .ok_or("the first input is not a tensor")?
        .iter()
        .map(|&d| if d < 0 { 1 } else { d as usize })
        .collect();
    let count: usize = shape.iter().product();
    let image = ArrayD::from_shape_vec(
        IxDyn(&shape),
        (0..count)
            .map(|i| ((i * 31 % 97) as f32) / 97.0 - 0.5)
            .collect(),
    )?;

    let outputs =
        session.run(ort::inputs![input.as_str() => TensorRef::from_array_view(&image)?])?;
    let (name, value) = outputs.iter().next().ok_or("the model has no output")?;
    let through_ort = value.try_extract_array::<f32>()?.to_owned();
    println!("{name}: shape {:?}", through_ort.shape());
    let mut top: Vec<(usize, f32)> = through_ort.iter().copied().enumerate().collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (class, p) in top.iter().take(3) {
        println!("  class {class}: {p:.5}");
    }
    drop(outputs);

    let direct = spillway::Session::builder().commit_from_file(&model)?;
    let tensor = || spillway::Tensor::F32(image.clone().into_shared());
    let direct_out = direct.run([(input.as_str(), tensor())])?;
    let want = direct_out.tensor_at(0)?.view::<f32>()?;
    let diff = through_ort
        .iter()
        .zip(want.iter())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!("largest difference from a direct Session::run: {diff:e}");

    // Latency: warm up both, then alternate so that both see the same machine state.
    for _ in 0..10 {
        session.run(ort::inputs![input.as_str() => TensorRef::from_array_view(&image)?])?;
        direct.run([(input.as_str(), tensor())])?;
    }
    let (mut t_ort, mut t_direct) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        let start = Instant::now();
        let outputs =
            session.run(ort::inputs![input.as_str() => TensorRef::from_array_view(&image)?])?;
        let _ = outputs[0].try_extract_array::<f32>()?;
        drop(outputs);
        t_ort.push(start.elapsed());

        let start = Instant::now();
        let outputs = direct.run([(input.as_str(), tensor())])?;
        let _ = outputs.tensor_at(0)?.view::<f32>()?;
        drop(outputs);
        t_direct.push(start.elapsed());
    }
    let (m_ort, m_direct) = (median(t_ort), median(t_direct));
    println!(
        "median of {runs} runs: ort on Spillway {:.1} µs, Session::run {:.1} µs, ratio {:.3}",
        m_ort.as_secs_f64() * 1e6,
        m_direct.as_secs_f64() * 1e6,
        m_ort.as_secs_f64() / m_direct.as_secs_f64()
    );
    Ok(())
}
