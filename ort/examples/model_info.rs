//! The `ort` crate's `model-info` example (pykeio/ort, `examples/model-info/model-info.rs`, MIT OR
//! Apache-2.0: see `ort/tests/data/LICENSE-MIT-ort`) on Spillway. Adapted where the upstream
//! example selects its backend (`common::init`, which calls `ort::set_api` for ort-tract or
//! ort-candle: here for Spillway) and where `ort` 2.0.0-rc.15's `Session::builder` takes the
//! environment.
//!
//! ```sh
//! cargo run -p spillway-ort --example model_info -- models/small/inception_block.onnx
//! ```

use std::{env, process};

use ort::session::Session;

fn main() -> ort::Result<()> {
    // Register the backend (upstream: `common::init()`).
    ort::set_api(spillway_ort::api());
    let environment = ort::init().build()?;

    let Some(path) = env::args().nth(1) else {
        eprintln!("usage: ./model-info <model>.onnx");
        process::exit(0);
    };

    let session = Session::builder(&environment)?.commit_from_file(path)?;

    let meta = session.metadata()?;
    if let Some(x) = meta.name() {
        println!("Name: {x}");
    }
    if let Some(x) = meta.description() {
        println!("Description: {x}");
    }
    if let Some(x) = meta.producer() {
        println!("Produced by {x}");
    }

    if let Ok(custom_keys) = meta.custom_keys()
        && !custom_keys.is_empty()
    {
        println!("=== Custom keys ===");
        for key in custom_keys {
            if let Some(value) = meta.custom(&key) {
                println!("    {key}: {value}");
            }
        }
    };

    println!("=== Inputs ===");
    for (i, input) in session.inputs().iter().enumerate() {
        println!("    {i} {}: {}", input.name(), input.dtype());
    }
    println!("=== Outputs ===");
    for (i, output) in session.outputs().iter().enumerate() {
        println!("    {i} {}: {}", output.name(), output.dtype());
    }

    Ok(())
}
