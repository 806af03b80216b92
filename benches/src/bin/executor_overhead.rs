//! Executor micro-benchmarks: (a) dispatch overhead per task on 1000-node graphs of cheap
//! kernels, (b) lock-free vs mutex-guarded ready queues, interleaved, (c) arena peak (happens-
//! before plan and sequential plan) vs one buffer per value on the ONNX "light" models.
//!
//! `cargo run --release -p spillway-benches --bin executor_overhead [-- LIGHT_DIR]`; writes
//! `benches/results/executor-<date>.{md,json}`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use prost::Message;
use serde_json::json;
use spillway::exec::QueueKind;
use spillway::onnx::proto::{
    self, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TypeProto, ValueInfoProto,
};
use spillway::profile::ProfileOptions;
use spillway::{Devices, OptimizationLevel, Placement, Session, Tensor};

const LIGHT_DIR: &str =
    "/work/main/.venv/lib/python3.11/site-packages/onnx/backend/test/data/light";

fn value_info(name: &str) -> ValueInfoProto {
    use proto::tensor_shape_proto::{Dimension, dimension::Value};
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(proto::type_proto::Value::TensorType(
                proto::type_proto::Tensor {
                    elem_type: Some(1),
                    shape: Some(proto::TensorShapeProto {
                        dim: vec![Dimension {
                            value: Some(Value::DimValue(1)),
                            ..Default::default()
                        }],
                    }),
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[String], output: &str) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(output.into()),
        input: inputs.to_vec(),
        output: vec![output.into()],
        ..Default::default()
    }
}

fn model(nodes: Vec<NodeProto>, output: &str) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            name: Some("bench".into()),
            node: nodes,
            input: vec![value_info("x")],
            output: vec![value_info(output)],
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

/// `n` `Neg` nodes in a chain on a 1-element tensor.
fn chain(n: usize) -> Vec<u8> {
    let nodes = (0..n)
        .map(|i| {
            let input = if i == 0 {
                "x".into()
            } else {
                format!("c{}", i - 1)
            };
            node("Neg", &[input], &format!("c{i}"))
        })
        .collect();
    model(nodes, &format!("c{}", n - 1))
}

/// `layers` × `width` `Add` nodes; node (l, j) adds nodes (l-1, j) and (l-1, j+1 mod width),
/// so no node has a single successor to run inline; a `Sum` joins the last layer.
fn mesh(layers: usize, width: usize) -> Vec<u8> {
    let name = |l: usize, j: usize| {
        if l == 0 {
            "x".to_string()
        } else {
            format!("m{l}_{j}")
        }
    };
    let mut nodes = Vec::new();
    for l in 1..=layers {
        for j in 0..width {
            nodes.push(node(
                "Add",
                &[name(l - 1, j), name(l - 1, (j + 1) % width)],
                &name(l, j),
            ));
        }
    }
    let last: Vec<String> = (0..width).map(|j| name(layers, j)).collect();
    nodes.push(node("Sum", &last, "out"));
    model(nodes, "out")
}

fn session(bytes: &[u8], lanes: usize, queue: QueueKind) -> Result<Session> {
    Ok(Session::builder()
        .with_optimization(OptimizationLevel::Disabled)
        .with_devices(Devices::cpu().with_cpu_lanes(lanes))
        .allow_oversubscription(true)
        .with_placement(Placement::Greedy)
        .with_queue(queue)
        .with_profile_options(ProfileOptions::default().with_warmup(1).with_repeats(3))
        .commit_from_memory(bytes)?)
}

fn input() -> Vec<(&'static str, Tensor)> {
    vec![(
        "x",
        Tensor::from_shape_vec(&[1], vec![0.5f32]).expect("one element"),
    )]
}

/// Wall µs of each of `runs` runs.
fn time_runs(s: &Session, runs: usize) -> Result<Vec<f64>> {
    let mut v = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        s.run(input())?;
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(v)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct GraphResult {
    name: &'static str,
    lanes: usize,
    tasks: usize,
    lock_free_us: f64,
    mutex_us: f64,
}

/// Interleaved rounds of lock-free and mutex sessions of one graph.
fn compare(
    name: &'static str,
    bytes: &[u8],
    lanes: usize,
    rounds: usize,
    per_round: usize,
) -> Result<GraphResult> {
    let lf = session(bytes, lanes, QueueKind::LockFree)?;
    let mx = session(bytes, lanes, QueueKind::Mutex)?;
    let tasks = lf.execution_plan().context("a parallel plan")?.tasks.len();
    time_runs(&lf, 20)?;
    time_runs(&mx, 20)?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        // Alternate which goes first so drift hits both.
        if r % 2 == 0 {
            a.extend(time_runs(&lf, per_round)?);
            b.extend(time_runs(&mx, per_round)?);
        } else {
            b.extend(time_runs(&mx, per_round)?);
            a.extend(time_runs(&lf, per_round)?);
        }
    }
    Ok(GraphResult {
        name,
        lanes,
        tasks,
        lock_free_us: median(a),
        mutex_us: median(b),
    })
}

struct ArenaResult {
    model: String,
    seq_peak: usize,
    seq_naive: usize,
    hb_peak: usize,
    hb_naive: usize,
}

fn arena(path: &Path) -> Result<ArenaResult> {
    let seq = Session::builder().commit_from_file(path)?;
    let mp = seq.memory_plan(&[])?;
    let par = Session::builder()
        .with_devices(Devices::cpu().with_cpu_lanes(2))
        .with_placement(Placement::Greedy)
        .with_profile_options(ProfileOptions::default().with_warmup(0).with_repeats(1))
        .commit_from_file(path)?;
    let plan = par.execution_plan().context("a parallel plan")?;
    let graph = par.graph();
    let arenas = spillway::plan::hb_memory::plan(plan, par.devices().specs().len(), |s| {
        let info = graph.value(plan.slots[s].value);
        let dims: Option<Vec<usize>> = info.shape.as_ref()?.iter().map(|d| d.fixed()).collect();
        Some(dims?.iter().product::<usize>() * info.dtype?.size_of())
    });
    Ok(ArenaResult {
        model: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        seq_peak: mp.peak_bytes,
        seq_naive: mp.naive_bytes,
        hb_peak: arenas.iter().map(|a| a.peak_bytes).sum(),
        hb_naive: arenas.iter().map(|a| a.naive_bytes).sum(),
    })
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn main() -> Result<()> {
    let light: PathBuf = std::env::args()
        .nth(1)
        .map_or_else(|| PathBuf::from(LIGHT_DIR), PathBuf::from);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mesh = mesh(100, 10);
    let graphs = [
        compare("chain of 1000 Neg", &chain(1000), 2, 10, 20)?,
        compare("mesh 100×10 Add + Sum", &mesh, 2, 10, 20)?,
        // Contended: SIR+'s setting of many streams' host threads sharing the queues, here
        // 8 lanes on the cores, so a lock holder can be descheduled.
        compare("mesh 100×10 Add + Sum", &mesh, 8, 10, 20)?,
    ];
    let mut models = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&light)
        .with_context(|| format!("reading {}", light.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    files.sort();
    for f in &files {
        eprintln!("arena: {}", f.display());
        models.push(arena(f).with_context(|| format!("arena for {}", f.display()))?);
    }

    let date = std::process::Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "undated".into());
    let mut md = format!(
        "# Executor overhead ({date})\n\nCPU: {} ({cores} cores visible; load average at start: {}). \
         Release build. Sessions: `Devices::cpu().with_cpu_lanes(lanes)` (the table's lanes; 8 lanes share the cores), `Placement::Greedy`, \
         optimizations disabled, 1-element f32 tensors. Median wall time of 200 runs per queue \
         kind, in 10 interleaved rounds of 20 (after 20 warm-up runs each).\n\n\
         ## Dispatch overhead and queue kind\n\n\
         | graph | lanes | tasks | lock-free µs/run | µs/task | mutex µs/run | µs/task | mutex / lock-free |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        spillway_benches::cpu_name(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for g in &graphs {
        md += &format!(
            "| {} | {} | {} | {:.0} | {:.2} | {:.0} | {:.2} | {:.3}× |\n",
            g.name,
            g.lanes,
            g.tasks,
            g.lock_free_us,
            g.lock_free_us / g.tasks as f64,
            g.mutex_us,
            g.mutex_us / g.tasks as f64,
            g.mutex_us / g.lock_free_us
        );
    }
    md += "\nTargets: ≤ 1 µs per task; lock-free ≥ 1.15× faster than mutex queues. A queue \
           operation is a small part of a task's dispatch when one worker per core rarely meets \
           another at a queue; the 8-lane row is the contended case.\n\n\
           ## Arena peak vs one buffer per value\n\n\
           | model | sequential peak MiB | naive MiB | ratio | happens-before peak MiB (2 lanes, Greedy) | naive MiB | ratio |\n\
           | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for m in &models {
        md += &format!(
            "| {} | {:.2} | {:.2} | {:.3} | {:.2} | {:.2} | {:.3} |\n",
            m.model,
            mib(m.seq_peak),
            mib(m.seq_naive),
            m.seq_peak as f64 / m.seq_naive.max(1) as f64,
            mib(m.hb_peak),
            mib(m.hb_naive),
            m.hb_peak as f64 / m.hb_naive.max(1) as f64
        );
    }
    let value = json!({
        "date": date,
        "cpu": spillway_benches::cpu_name(),
        "cores": cores,
        "loadavg": load.trim(),
        "dispatch": graphs.iter().map(|g| json!({
            "graph": g.name, "lanes": g.lanes, "tasks": g.tasks,
            "lock_free_us_per_run": g.lock_free_us, "mutex_us_per_run": g.mutex_us,
            "lock_free_us_per_task": g.lock_free_us / g.tasks as f64,
            "mutex_us_per_task": g.mutex_us / g.tasks as f64,
            "mutex_over_lock_free": g.mutex_us / g.lock_free_us,
        })).collect::<Vec<_>>(),
        "arena": models.iter().map(|m| json!({
            "model": m.model, "sequential_peak_bytes": m.seq_peak,
            "sequential_naive_bytes": m.seq_naive, "hb_peak_bytes": m.hb_peak,
            "hb_naive_bytes": m.hb_naive,
        })).collect::<Vec<_>>(),
    });
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    std::fs::create_dir_all(&dir)?;
    let md_path = dir.join(format!("executor-{date}.md"));
    std::fs::write(&md_path, &md)?;
    std::fs::write(
        dir.join(format!("executor-{date}.json")),
        serde_json::to_string_pretty(&value)?,
    )?;
    print!("{md}");
    eprintln!("written {}", md_path.display());
    Ok(())
}
