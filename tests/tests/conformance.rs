//! Conformance: the official ONNX backend node tests (onnx 1.22.0 wheel) for every operator
//! Spillway claims, compared with the onnx runner's tolerance (rtol 1e-3, atol 1e-7, NaN equals
//! NaN, exact shapes and dtypes).
//!
//! A node test is in scope when every op in its model is in [`CONFORMANCE_OPS`]. The test fails
//! when an in-scope test fails without being listed in `conformance/expected_failures.txt`, or
//! when a listed test passes (the list only shrinks). `SPILLWAY_CONFORMANCE_FILTER=substr` runs
//! only the tests whose name contains `substr` and prints each failure.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::path::Path;

use spillway::graph::ValueType;
use spillway::{Session, Value};
use spillway_tests::{
    assert_values_close, onnx_test_data, read_value_pb, value_pb_name, workspace_root,
};

/// The operators under conformance (the engine-foundation and detection issues' lists, then
/// the sequence and optional operators, then quantization).
const CONFORMANCE_OPS: &[&str] = &[
    "Conv",
    "ConvTranspose",
    "Gemm",
    "MatMul",
    "Relu",
    "LeakyRelu",
    "PRelu",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Clip",
    "Elu",
    "Selu",
    "Softplus",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Mod",
    "Sqrt",
    "Exp",
    "Log",
    "Neg",
    "Abs",
    "Sign",
    "Floor",
    "Ceil",
    "Round",
    "Reciprocal",
    "Erf",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "BatchNormalization",
    "InstanceNormalization",
    "LayerNormalization",
    "LRN",
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "GatherElements",
    "Reshape",
    "Flatten",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Expand",
    "Tile",
    "Pad",
    "Resize",
    "Upsample",
    "Shape",
    "Size",
    "Constant",
    "ConstantOfShape",
    "Cast",
    "CastLike",
    "Identity",
    "Dropout",
    "Softmax",
    "LogSoftmax",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceSum",
    "ReduceProd",
    "ReduceL2",
    "ArgMax",
    "ArgMin",
    "Equal",
    "Greater",
    "GreaterOrEqual",
    "Less",
    "LessOrEqual",
    "Not",
    "And",
    "Or",
    "Xor",
    "Where",
    "Range",
    "Gelu",
    "Einsum",
    "DepthToSpace",
    "SpaceToDepth",
    "CumSum",
    "Trilu",
    "If",
    "Loop",
    "NonMaxSuppression",
    "RoiAlign",
    "TopK",
    "NonZero",
    "GatherND",
    "ScatterND",
    "ScatterElements",
    "Scatter",
    "SequenceConstruct",
    "SequenceEmpty",
    "SequenceAt",
    "SequenceInsert",
    "SequenceErase",
    "SequenceLength",
    "ConcatFromSequence",
    "SplitToSequence",
    "Optional",
    "OptionalHasElement",
    "OptionalGetElement",
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "MatMulInteger",
    "ConvInteger",
    "QLinearMatMul",
    "QLinearConv",
];

struct Outcome {
    name: String,
    ops: Vec<String>,
    result: Result<(), String>,
}

fn main() {
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
        let Some(ops) = model_ops(&dir.join("model.onnx")) else {
            continue;
        };
        if !ops.iter().all(|op| CONFORMANCE_OPS.contains(&op.as_str())) {
            continue;
        }
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| run_case(dir)))
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
            .unwrap_or(&o.ops[0])
            .clone();
        let entry = per_op.entry(family).or_default();
        match (&o.result, expected.contains_key(&o.name)) {
            (Ok(()), false) => {
                passed += 1;
                entry.0 += 1;
            }
            (Ok(()), true) => {
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
            eprintln!("FAIL {} [{}]: {e}", o.name, o.ops.join(","));
        }
    }
    if filter.is_none() {
        let ran: BTreeSet<&str> = outcomes.iter().map(|o| o.name.as_str()).collect();
        for name in expected.keys().filter(|n| !ran.contains(n.as_str())) {
            problems.push(format!(
                "{name}: listed as an expected failure but is not an in-scope node test"
            ));
        }
    }
    println!("per op (passed/failed):");
    for (op, (p, f)) in &per_op {
        println!("  {op:<24} {p:>4} / {f}");
    }
    for p in &problems {
        println!("PROBLEM {p}");
    }
    println!("conformance: {passed} passed, {failed} failed, {expected_fail} expected-fail");
    if !problems.is_empty() {
        std::process::exit(1);
    }
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

fn run_case(dir: &Path) -> Result<(), String> {
    let session = Session::builder()
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
    Ok(())
}
