//! Conformance: every official ONNX backend node test of the onnx 1.22.0 wheel, compared with
//! the onnx runner's tolerance (rtol 1e-3, atol 1e-7, NaN equals NaN, exact shapes and dtypes).
//!
//! Every node test is in scope, those of operators Spillway does not implement included. The
//! test fails when a node test fails without being listed in `conformance/expected_failures.txt`
//! (each entry with its reason), or when a listed test passes (the list only shrinks).
//! `SPILLWAY_CONFORMANCE_FILTER=substr` runs only the tests whose name contains `substr` and
//! prints each failure.
//!
//! Every test runs on two runtime configurations of the one plan and executor: the sequential
//! CPU, and the CPU plus two `Virtual` devices that pose as four times faster, placed by HEFT,
//! so that nearly every node runs on a Virtual device, its inputs copied there and its outputs
//! back. Both must pass the same tests. `SPILLWAY_CONFORMANCE_RUNTIME=cpu` (or `virtual`) runs
//! one of them.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::path::Path;

use spillway::graph::ValueType;
use spillway::{CopyCost, Devices, Placement, Session, SessionBuilder, Value};
use spillway_tests::{
    assert_values_close, onnx_test_data, read_value_pb, value_pb_name, workspace_root,
};

struct Outcome {
    name: String,
    ops: Vec<String>,
    /// `Ok(true)` when it passed with at least one node off the host CPU.
    result: Result<bool, String>,
}

/// A runtime configuration the node tests run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runtime {
    /// One CPU lane, nodes in order.
    SequentialCpu,
    /// The CPU and two Virtual devices posing as 4× faster, placed by HEFT.
    CpuAndVirtual,
}

impl Runtime {
    fn name(self) -> &'static str {
        match self {
            Runtime::SequentialCpu => "sequential cpu",
            Runtime::CpuAndVirtual => "cpu + 2 virtual (heft)",
        }
    }

    fn builder(self) -> SessionBuilder {
        match self {
            Runtime::SequentialCpu => Session::builder(),
            Runtime::CpuAndVirtual => Session::builder()
                .with_devices(
                    Devices::cpu()
                        .with_virtual(1, CopyCost::FREE)
                        .with_speed(4.0)
                        .with_virtual(2, CopyCost::FREE)
                        .with_speed(4.0),
                )
                .with_placement(Placement::Heft)
                // Thousands of one-off models: their cost models are not worth keeping.
                .with_profile_cache(false),
        }
    }
}

fn main() {
    let runtimes: Vec<Runtime> = match std::env::var("SPILLWAY_CONFORMANCE_RUNTIME").as_deref() {
        Ok("cpu") => vec![Runtime::SequentialCpu],
        Ok("virtual") => vec![Runtime::CpuAndVirtual],
        Ok(other) => panic!("SPILLWAY_CONFORMANCE_RUNTIME={other}: expected cpu or virtual"),
        Err(_) => vec![Runtime::SequentialCpu, Runtime::CpuAndVirtual],
    };
    let mut passed_by_runtime = Vec::new();
    let mut ok = true;
    for &runtime in &runtimes {
        let (passed, clean) = run_all(runtime);
        ok &= clean;
        passed_by_runtime.push((runtime, passed));
    }
    if let [(a, first), rest @ ..] = passed_by_runtime.as_slice() {
        for (b, other) in rest {
            for name in first.symmetric_difference(other) {
                let on = if first.contains(name) { a } else { b };
                println!(
                    "PROBLEM {name}: passes on the {} only: every runtime must pass the same tests",
                    on.name()
                );
                ok = false;
            }
        }
    }
    if !ok {
        std::process::exit(1);
    }
}

/// Runs every node test on `runtime`; prints the summary. Returns the passing tests and
/// whether the run had no problem.
fn run_all(runtime: Runtime) -> (BTreeSet<String>, bool) {
    let filter = std::env::var("SPILLWAY_CONFORMANCE_FILTER").ok();
    let node_dir = onnx_test_data().join("node");
    let expected = read_expected_failures();
    let mut dirs: Vec<_> = std::fs::read_dir(&node_dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", node_dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    dirs.sort();

    let mut outcomes = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let ops = model_ops(&dir.join("model.onnx")).unwrap_or_else(|| vec!["(unreadable)".into()]);
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| run_case(runtime, dir)))
            .unwrap_or_else(|p| Err(format!("PANIC: {}", panic_message(&p))));
        outcomes.push(Outcome { name, ops, result });
    }

    let mut passed = 0;
    let mut failed = 0;
    let mut expected_fail = 0;
    let mut problems = Vec::new();
    let mut per_op: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for o in &outcomes {
        let family = o
            .ops
            .iter()
            .find(|op| !matches!(op.as_str(), "Constant"))
            .or(o.ops.first())
            .cloned()
            .unwrap_or_else(|| "(no node)".into());
        let entry = per_op.entry(family).or_default();
        match (&o.result, expected.contains_key(&o.name)) {
            (Ok(_), false) => {
                passed += 1;
                entry.0 += 1;
            }
            (Ok(_), true) => {
                passed += 1;
                entry.0 += 1;
                problems.push(format!(
                    "{}: listed as an expected failure but passes — remove it from the list",
                    o.name
                ));
            }
            (Err(_), true) => {
                expected_fail += 1;
                entry.1 += 1;
            }
            (Err(e), false) => {
                failed += 1;
                entry.1 += 1;
                problems.push(format!("{}: {e}", o.name));
            }
        }
        if filter.is_some()
            && let Err(e) = &o.result
        {
            eprintln!(
                "FAIL {} [{}] on the {}: {e}",
                o.name,
                o.ops.join(","),
                runtime.name()
            );
        }
    }
    if filter.is_none() {
        let ran: BTreeSet<&str> = outcomes.iter().map(|o| o.name.as_str()).collect();
        for name in expected.keys().filter(|n| !ran.contains(n.as_str())) {
            problems.push(format!(
                "{name}: listed as an expected failure but is not a node test of this onnx"
            ));
        }
    }
    println!("per op (passed/failed) on the {}:", runtime.name());
    for (op, (p, f)) in &per_op {
        println!("  {op:<24} {p:>4} / {f}");
    }
    if runtime == Runtime::CpuAndVirtual && filter.is_none() {
        // The configuration tests the multi-device path only if nodes go to the Virtual devices.
        let off_host = outcomes.iter().filter(|o| o.result == Ok(true)).count();
        println!("  {off_host} of the {passed} passing tests ran nodes on a Virtual device");
        if off_host * 10 < passed * 9 {
            problems.push(format!(
                "only {off_host} of {passed} passing tests ran a node on a Virtual device"
            ));
        }
    }
    for p in &problems {
        println!("PROBLEM {p}");
    }
    println!(
        "conformance ({}): {passed} passed, {failed} failed, {expected_fail} expected-fail",
        runtime.name()
    );
    let passing = outcomes
        .iter()
        .filter(|o| o.result.is_ok())
        .map(|o| o.name.clone())
        .collect();
    (passing, problems.is_empty())
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// `test_name  reason` per line; `#` starts a comment.
fn read_expected_failures() -> BTreeMap<String, String> {
    let path = workspace_root().join("tests/conformance/expected_failures.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(char::is_whitespace) {
            Some((n, r)) => (n.to_string(), r.trim().to_string()),
            None => panic!("expected_failures.txt: '{l}' has no reason"),
        })
        .collect()
}

/// The op types of a node test's model, subgraphs included, read without building kernels.
fn model_ops(path: &Path) -> Option<Vec<String>> {
    use prost::Message;
    fn collect(g: &spillway::onnx::proto::GraphProto, ops: &mut Vec<String>) {
        for n in &g.node {
            if !ops.iter().any(|o| o == n.op_type()) {
                ops.push(n.op_type().to_string());
            }
            for a in &n.attribute {
                a.g.iter()
                    .chain(&a.graphs)
                    .for_each(|sub| collect(sub, ops));
            }
        }
    }
    let bytes = std::fs::read(path).ok()?;
    let model = spillway::onnx::proto::ModelProto::decode(bytes.as_slice()).ok()?;
    let mut ops = Vec::new();
    collect(model.graph.as_ref()?, &mut ops);
    Some(ops)
}

/// Runs one node test; `Ok(true)` when the session ran a node off the host CPU.
fn run_case(runtime: Runtime, dir: &Path) -> Result<bool, String> {
    let session = runtime
        .builder()
        .commit_from_file(dir.join("model.onnx"))
        .map_err(|e| format!("load: {e}"))?;
    let data = dir.join("test_data_set_0");
    let files = |prefix: &str| {
        let mut v: Vec<_> = (0..)
            .map(|i| data.join(format!("{prefix}_{i}.pb")))
            .take_while(|p| p.exists())
            .collect();
        v.shrink_to_fit();
        v
    };
    let declared: Vec<(String, ValueType)> = session
        .inputs()
        .iter()
        .map(|v| (v.name.clone(), v.value_type()))
        .collect();
    let mut inputs: Vec<(String, Value)> = Vec::new();
    for (i, path) in files("input").iter().enumerate() {
        // The file's own name picks the input when it names one; else its position does.
        let (positional, positional_type) = declared
            .get(i)
            .cloned()
            .ok_or_else(|| format!("input file {i} has no matching graph input"))?;
        let pb_name = value_pb_name(path, &positional_type).unwrap_or_default();
        let (name, ty) = declared
            .iter()
            .find(|(n, _)| *n == pb_name)
            .cloned()
            .unwrap_or((positional, positional_type));
        let value = read_value_pb(path, &ty).map_err(|e| format!("input {i}: {e}"))?;
        inputs.push((name, value));
    }
    let outputs = session
        .run_values(inputs)
        .map_err(|e| format!("run: {e}"))?;
    let expected_files = files("output");
    if expected_files.len() != outputs.len() {
        return Err(format!(
            "{} outputs, expected {}",
            outputs.len(),
            expected_files.len()
        ));
    }
    let output_types: Vec<ValueType> = session.outputs().iter().map(|v| v.value_type()).collect();
    for (i, path) in expected_files.iter().enumerate() {
        let expected =
            read_value_pb(path, &output_types[i]).map_err(|e| format!("output {i}: {e}"))?;
        assert_values_close(&expected, &outputs.values()[i], 1e-3, 1e-7)
            .map_err(|e| format!("output {i}: {e}"))?;
    }
    let off_host = session
        .placement_report()
        .is_some_and(|r| r.nodes.iter().any(|n| n.2 != "cpu"));
    Ok(off_host)
}
