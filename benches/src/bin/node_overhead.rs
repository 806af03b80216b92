//! The fixed cost of a run and of a node, Spillway against ONNX Runtime (issue 76, item 3): a
//! model of one tiny node (the cost of a run), and chains of 1000 tiny nodes (the cost per
//! node: dispatch, output allocation, shape checks, hand-off), each with 1 and 2 intra-op
//! threads, side by side in one process (`spillway_benches::side_by_side`).
//!
//! The chains: 1000 `MatMul`s of a `[1, 8]` row by an `[8, 8]` weight (no engine fuses them), and
//! 1000 `Add`s of a `[16]` vector and a constant each (an elementwise chain, which an engine
//! may fuse; the table says when a per-node figure is then a per-fused-node one).
//!
//! `cargo run --release -p spillway-benches --bin node_overhead [-- --rounds N]`; writes
//! `benches/results/node-overhead-<date>.{md,json}`.

use anyhow::Result;
use serde_json::json;
use spillway_benches::cpu_name;
use spillway_benches::side_by_side::{
    CONFIGURATIONS, rounds_arg, runners, time_interleaved, today,
};
use spillway_tests::build::ModelBuilder;
use spillway_tests::{seeded_f32, workspace_root};

/// A model to time: its name, nodes, bytes and inputs.
struct Case {
    name: &'static str,
    nodes: usize,
    bytes: Vec<u8>,
    inputs: Vec<(String, spillway::Tensor)>,
}

/// `x` of shape `input` through `n` nodes `op(previous, weight)`, each weight of shape
/// `weight` (seeded from `seed`).
fn chain(name: &'static str, op: &str, n: usize, input: &[i64], weight: &[i64], seed: u64) -> Case {
    let mut b = ModelBuilder::new(seed);
    b.input("x", input);
    let mut prev = "x".to_string();
    for i in 0..n {
        let (w, y) = (format!("w{i}"), format!("y{i}"));
        b.weight(&w, weight, 0.35);
        b.node(op, &[&prev, &w], &[&y], &[]);
        prev = y;
    }
    b.output(&prev);
    let shape: Vec<usize> = input.iter().map(|&d| d as usize).collect();
    Case {
        name,
        nodes: n,
        bytes: b.to_bytes(17),
        inputs: vec![("x".into(), seeded_f32(&shape, seed))],
    }
}

/// `x: [1, 8]` through `n` MatMuls by [8, 8] weights.
fn matmul_chain(n: usize) -> Case {
    chain("1000 MatMul [1,8]×[8,8]", "MatMul", n, &[1, 8], &[8, 8], 3)
}

/// `x: [16]` through `n` Adds of constants.
fn add_chain(n: usize) -> Case {
    chain("1000 Add [16] + constant", "Add", n, &[16], &[16], 5)
}

/// One Add: the cost of a run.
fn one_node() -> Case {
    let mut case = add_chain(1);
    case.name = "1 Add [16] + constant";
    case
}

fn main() -> Result<()> {
    let rounds = rounds_arg(15)?;
    let mut table = String::from(
        "| model | Spillway 1t µs | Spillway 2t µs | ORT 1t µs | ORT 2t µs | Spillway best / ORT best | Spillway µs per node | ORT µs per node |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let mut rows = Vec::new();
    for case in [one_node(), matmul_chain(1000), add_chain(1000)] {
        eprintln!("{}", case.name);
        let mut runners = runners(&case.bytes)?;
        let us = time_interleaved(&mut runners, &case.inputs, rounds)?;
        let (ours, theirs) = (us[0].min(us[1]), us[2].min(us[3]));
        let per_node = |t: f64| t / case.nodes as f64;
        table.push_str(&format!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.3} | {:.3} |\n",
            case.name,
            us[0],
            us[1],
            us[2],
            us[3],
            ours / theirs,
            per_node(ours),
            per_node(theirs)
        ));
        rows.push(json!({
            "model": case.name,
            "nodes": case.nodes,
            "median_us": CONFIGURATIONS.iter().zip(&us).map(|(n, u)| (n.to_string(), json!(u))).collect::<serde_json::Map<_, _>>(),
            "spillway_best_over_ort_best": ours / theirs,
        }));
    }
    let cpu = cpu_name();
    println!("{cpu}\n\n{table}");
    let date = today()?;
    let out = workspace_root().join("benches/results");
    std::fs::write(
        out.join(format!("node-overhead-{date}.md")),
        format!(
            "# Fixed cost per run and per node, Spillway vs ONNX Runtime ({date})\n\n\
             CPU: {cpu}. Median µs per run over {rounds} interleaved rounds; \
             `cargo run --release -p spillway-benches --bin node_overhead`.\n\n{table}"
        ),
    )?;
    std::fs::write(
        out.join(format!("node-overhead-{date}.json")),
        serde_json::to_string_pretty(&json!({ "cpu": cpu, "rounds": rounds, "models": rows }))?,
    )?;
    Ok(())
}
