//! Study: which nodes of a detector keep data-dependent shapes after specializing to a photo,
//! and what each costs on the CPU (each node timed alone by the profiler, on fresh memory, so
//! memory-bound nodes look slower than in a run). `host_nodes MODEL.onnx PHOTO`: totals, the
//! time per op type split by fixed shapes or not, and the slowest nodes of data-dependent
//! shapes.
use spillway::Devices;
use spillway::graph::passes::{Level, optimize};
use spillway::hybrid::{FixedValues, specialize};
use spillway::profile::{ProfileOptions, profile_graph_values};
use spillway::value::Value;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(args.len() == 3, "usage: host_nodes MODEL.onnx PHOTO");
    let mut graph = spillway::onnx::load_file(args[1].as_ref())?;
    optimize(&mut graph, Level::Basic)?;
    let img =
        spillway_cli::detect::to_chw_tensor(&spillway_cli::detect::read_rgb(args[2].as_ref())?)?;
    let inputs = vec![Value::Tensor(img)];
    let (_values, fixed): (_, FixedValues) = specialize(&mut graph, &inputs)?;
    let model = profile_graph_values(
        &graph,
        &Devices::cpu(),
        &inputs,
        ProfileOptions::default(),
        &mut |_, _| {},
    )?;
    let mut rows: Vec<(f64, bool, String, String)> = graph
        .nodes
        .iter()
        .zip(&model.graph.ops)
        .map(|(n, op)| {
            let us = op.cost_us.values().next().copied().unwrap_or(0.0);
            (
                us,
                fixed.node_has_fixed_shapes(n),
                n.op_type.clone(),
                n.name.clone(),
            )
        })
        .collect();
    let total: f64 = rows.iter().map(|r| r.0).sum();
    let dynamic: f64 = rows.iter().filter(|r| !r.1).map(|r| r.0).sum();
    println!(
        "total {total:.0} us, dynamic {dynamic:.0} us, nodes {}",
        rows.len()
    );
    let mut by_op = std::collections::BTreeMap::<(bool, String), (f64, usize)>::new();
    for r in &rows {
        let e = by_op.entry((r.1, r.2.clone())).or_default();
        e.0 += r.0;
        e.1 += 1;
    }
    let mut ops: Vec<_> = by_op.into_iter().collect();
    ops.sort_by(|a, b| b.1.0.total_cmp(&a.1.0));
    for ((f, op), (us, n)) in ops.iter().take(30) {
        println!("{:>10.0} us {:>4} x {op} fixed={f}", us, n);
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    for r in rows.iter().filter(|r| !r.1).take(25) {
        println!("{:>10.0} us {} {}", r.0, r.2, r.3);
    }
    Ok(())
}
