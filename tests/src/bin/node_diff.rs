//! Finds where Spillway and ONNX Runtime part ways inside a model: every node output becomes a
//! graph output, both engines run the rewritten model unoptimized on the same seeded inputs,
//! and each value's relative L2 error is printed in node order (the first value above the
//! threshold is where to look). Beside it, how far ORT with its graph optimizations moves the
//! same value by reordering float arithmetic alone: a difference Spillway shares with optimized
//! ORT is the model's sensitivity, one that ORT does not have is ours.
//!
//! `cargo run --release -p spillway-tests --bin node_diff -- [--image PHOTO] MODEL.onnx [THRESHOLD] [BATCH] [optimized|plain] [ROWS]`
//!
//! At most ROWS (default 40) differing values are listed. `--image` feeds a photo to the first
//! input, decoded as `spillway detect` and `detection_check` decode it (a float 3×H×W tensor in
//! [0, 1]); the other inputs are seeded.
//!
//! With `optimized`, Spillway runs its graph passes (values they remove are skipped).

use std::collections::HashSet;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use prost::Message;
use spillway::onnx::proto::{ModelProto, ValueInfoProto};
use spillway::{OptimizationLevel, Session, Tensor};
use spillway_cli::detect::{read_rgb, to_chw_tensor};
use spillway_tests::oracle::{Oracle, OrtConfig};
use spillway_tests::{relative_l2, seeded_inputs};

/// The model with every node output that is not already a graph output appended as one.
/// With `keep_folds`, values that feed a BatchNormalization stay internal, so Spillway can still
/// fold the BatchNormalization into the Conv that produces them.
fn expose_all_values(bytes: &[u8], keep_folds: bool) -> Result<(Vec<u8>, Vec<String>)> {
    let mut model = ModelProto::decode(bytes).context("decoding the model")?;
    let graph = model.graph.as_mut().context("the model has no graph")?;
    let mut seen: HashSet<String> = graph.output.iter().filter_map(|o| o.name.clone()).collect();
    if keep_folds {
        for node in graph
            .node
            .iter()
            .filter(|n| n.op_type() == "BatchNormalization")
        {
            seen.extend(node.input.first().cloned());
        }
    }
    let mut added = Vec::new();
    for node in &graph.node {
        for out in node.output.iter().filter(|o| !o.is_empty()) {
            if seen.insert(out.clone()) {
                added.push(out.clone());
            }
        }
    }
    for name in &added {
        graph.output.push(ValueInfoProto {
            name: Some(name.clone()),
            ..Default::default()
        });
    }
    let names = graph.output.iter().filter_map(|o| o.name.clone()).collect();
    Ok((model.encode_to_vec(), names))
}

/// Where two tensors differ most: flat index, ORT's value, Spillway's, and how many elements
/// differ at all.
fn worst_element(expected: &Tensor, actual: &Tensor) -> String {
    let (Ok(e), Ok(a)) = (expected.to_f64_vec(), actual.to_f64_vec()) else {
        return String::new();
    };
    if e.len() != a.len() {
        return format!("{} vs {} elements", e.len(), a.len());
    }
    let differing = e.iter().zip(&a).filter(|(x, y)| x != y).count();
    let worst = (0..e.len()).max_by(|&i, &j| (e[i] - a[i]).abs().total_cmp(&(e[j] - a[j]).abs()));
    match worst {
        Some(i) => format!(
            "[{i}]: ORT {:e}, Spillway {:e}; {differing} of {} differ",
            e[i],
            a[i],
            e.len()
        ),
        None => String::new(),
    }
}

/// Relative L2 error of `actual` against `expected`; tensors that are not numbers (Bool) must
/// be equal (0, else infinite).
fn difference(expected: &Tensor, actual: &Tensor) -> f64 {
    relative_l2(expected, actual).unwrap_or(if expected == actual {
        0.0
    } else {
        f64::INFINITY
    })
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1).peekable();
    let photo = match args.peek().map(String::as_str) {
        Some("--image") => {
            args.next();
            Some(PathBuf::from(args.next().context("--image PHOTO")?))
        }
        _ => None,
    };
    let Some(path) = args.next().map(PathBuf::from) else {
        bail!("usage: node_diff [--image PHOTO] MODEL.onnx [THRESHOLD] [BATCH]");
    };
    let threshold: f64 = args.next().map_or(Ok(1e-5), |s| s.parse())?;
    let batch: usize = args.next().map_or(Ok(1), |s| s.parse())?;
    let optimized = args.next().is_some_and(|s| s == "optimized");
    let rows: usize = args.next().map_or(Ok(40), |s| s.parse())?;
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let (exposed, names) = expose_all_values(&bytes, optimized)?;
    let ours = Session::builder()
        .with_optimization(if optimized {
            OptimizationLevel::All
        } else {
            OptimizationLevel::Disabled
        })
        .commit_from_memory(&exposed)?;
    let mut inputs = seeded_inputs(&ours, batch);
    if let Some(photo) = &photo {
        let first = inputs
            .first_mut()
            .context("--image: the model has no inputs")?;
        first.1 = to_chw_tensor(&read_rgb(photo)?)?;
    }
    let mut oracle = Oracle::load_bytes(
        &exposed,
        OrtConfig {
            optimize: false,
            ..OrtConfig::default()
        },
    )?;
    let theirs = oracle.run(&inputs)?;
    let reordered = Oracle::load_bytes(&exposed, OrtConfig::default())?.run(&inputs)?;
    println!("Graph outputs of the model as written, against ORT unoptimized:");
    for level in [OptimizationLevel::Disabled, OptimizationLevel::All] {
        let plain = Session::builder()
            .with_optimization(level)
            .commit_from_memory(&bytes)?;
        let got = plain.run(inputs.clone())?;
        let worst = (0..got.len())
            .map(|i| relative_l2(&theirs[i], &got[i]).unwrap_or(f64::INFINITY))
            .fold(0.0, f64::max);
        println!("- Spillway {level:?}: worst rel L2 {worst:.3e}");
    }
    let mine = ours.run(inputs)?;
    let mut shown = 0;
    println!(
        "| value | rel L2 | largest difference | ORT optimized rel L2 |\n| --- | ---: | --- | ---: |"
    );
    for (i, name) in names.iter().enumerate() {
        let (Some(a), Some(b)) = (theirs.get(i), mine.get(name)) else {
            if !optimized {
                println!("| {name} | missing |");
            }
            continue;
        };
        let err = difference(a, b);
        if err > threshold || !err.is_finite() {
            let own = difference(a, &reordered[i]);
            println!(
                "| {name} | {err:.3e} | {} | {own:.3e} |",
                worst_element(a, b)
            );
            shown += 1;
            if shown >= rows {
                println!("(more values differ; stopping)");
                break;
            }
        }
    }
    if shown == 0 {
        println!("every value within {threshold:e}");
    }
    Ok(())
}
