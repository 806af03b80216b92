//! The blocked (NCHW16c) layout end to end: small CNNs that a default session moves into
//! blocks of 16 channels — an inception block (strided first convolution on the image,
//! pools, a concat, a 24-channel convolution that reads blocks and writes planes, global
//! pooling), a residual block (the residual added in the blocked epilogue), and a
//! convolution read by a depthwise one (left planar) — against ONNX Runtime, with the
//! rewritten graph checked node by node.

use spillway::Session;
use spillway_kernels::cpu::nn::blocked::{DOMAIN, available};
use spillway_tests::build::{Attr, ModelBuilder};
use spillway_tests::oracle::{Oracle, OrtConfig};
use spillway_tests::{relative_l2, seeded_f32};

const TOLERANCE: f64 = 1e-5;

fn pads(p: i64) -> (&'static str, Attr) {
    ("pads", Attr::Ints(vec![p; 4]))
}

fn kernel(k: i64) -> (&'static str, Attr) {
    ("kernel_shape", Attr::Ints(vec![k, k]))
}

fn strides(s: i64) -> (&'static str, Attr) {
    ("strides", Attr::Ints(vec![s, s]))
}

/// `Conv` (with bias) then `Relu`, named after `y`.
fn conv_relu(m: &mut ModelBuilder, x: &str, y: &str, w: [i64; 4], attrs: &[(&str, Attr)]) {
    let (wn, bn, c) = (format!("{y}_w"), format!("{y}_b"), format!("{y}_c"));
    m.weight(&wn, &w, 0.2)
        .weight(&bn, &[w[0]], 0.2)
        .node("Conv", &[x, &wn, &bn], &[&c], attrs)
        .node("Relu", &[&c], &[y], &[]);
}

fn inception() -> Vec<u8> {
    let mut m = ModelBuilder::new(41);
    m.input("x", &[1, 3, 33, 33]);
    conv_relu(&mut m, "x", "stem", [32, 3, 3, 3], &[pads(1), strides(2)]);
    m.node(
        "MaxPool",
        &["stem"],
        &["pool"],
        &[kernel(3), strides(2), ("ceil_mode", Attr::Int(1))],
    );
    conv_relu(&mut m, "pool", "b1", [16, 32, 1, 1], &[]);
    conv_relu(&mut m, "pool", "b2", [32, 32, 3, 3], &[pads(1)]);
    m.node("MaxPool", &["pool"], &["b3p"], &[kernel(3), pads(1)]);
    conv_relu(&mut m, "b3p", "b3", [16, 32, 1, 1], &[]);
    m.node(
        "Concat",
        &["b1", "b2", "b3"],
        &["cat"],
        &[("axis", Attr::Int(1))],
    )
    .node(
        "AveragePool",
        &["cat"],
        &["avg"],
        &[kernel(3), pads(1), ("count_include_pad", Attr::Int(0))],
    );
    conv_relu(&mut m, "avg", "narrow", [24, 64, 1, 1], &[]);
    m.node("GlobalAveragePool", &["cat"], &["gap"], &[])
        .node("Flatten", &["gap"], &["flat"], &[])
        .output("flat")
        .output("narrow");
    m.to_bytes(13)
}

fn residual() -> Vec<u8> {
    let mut m = ModelBuilder::new(42);
    m.input("x", &[2, 16, 12, 12]);
    conv_relu(&mut m, "x", "a", [32, 16, 3, 3], &[pads(1)]);
    conv_relu(&mut m, "a", "b", [32, 32, 3, 3], &[pads(1)]);
    m.weight("c_w", &[32, 32, 1, 1], 0.2)
        .node("Conv", &["b", "c_w"], &["c"], &[])
        .node("Add", &["c", "a"], &["s"], &[])
        .node("Relu", &["s"], &["r"], &[])
        .node("GlobalAveragePool", &["r"], &["y"], &[])
        .output("y");
    m.to_bytes(13)
}

fn before_depthwise() -> Vec<u8> {
    let mut m = ModelBuilder::new(43);
    m.input("x", &[1, 16, 10, 10]);
    conv_relu(&mut m, "x", "a", [32, 16, 1, 1], &[]);
    conv_relu(
        &mut m,
        "a",
        "d",
        [32, 1, 3, 3],
        &[pads(1), ("group", Attr::Int(32))],
    );
    m.node("GlobalAveragePool", &["d"], &["y"], &[]).output("y");
    m.to_bytes(13)
}

/// `(op type, domain)` of every node of the session's graph.
fn ops(session: &Session) -> Vec<(String, String)> {
    session
        .graph()
        .nodes
        .iter()
        .map(|n| (n.op_type.clone(), n.domain.clone()))
        .collect()
}

fn count(ops: &[(String, String)], op: &str, domain: &str) -> usize {
    ops.iter().filter(|(o, d)| o == op && d == domain).count()
}

/// Runs `bytes` in a default session and in ORT on seeded inputs of `shape`; every output
/// within tolerance. Returns the session.
fn matches_ort(label: &str, bytes: &[u8], shape: &[usize]) -> Session {
    let session = Session::builder().commit_from_memory(bytes).unwrap();
    let inputs = vec![("x".to_string(), seeded_f32(shape, 7))];
    let ours = session.run(inputs.clone()).unwrap();
    let theirs = Oracle::load_bytes(bytes, OrtConfig::default())
        .unwrap()
        .run(&inputs)
        .unwrap();
    assert_eq!(ours.len(), theirs.len(), "{label}");
    for (i, (t, o)) in theirs.iter().zip(ours.iter()).enumerate() {
        assert_eq!(t.shape(), o.1.shape(), "{label}: output {i}");
        let err = relative_l2(t, o.1).unwrap();
        assert!(
            err <= TOLERANCE,
            "{label}: output {i}: relative L2 {err:.2e}"
        );
    }
    session
}

#[test]
fn blocked_models_match_onnx_runtime() {
    let inception = matches_ort("inception", &inception(), &[1, 3, 33, 33]);
    let residual = matches_ort("residual", &residual(), &[2, 16, 12, 12]);
    let depthwise = matches_ort("before depthwise", &before_depthwise(), &[1, 16, 10, 10]);
    if !available() {
        // Without AVX-512 the graph keeps its planar ops; the outputs are checked above.
        for s in [&inception, &residual, &depthwise] {
            assert_eq!(count(&ops(s), "Conv", DOMAIN), 0);
        }
        return;
    }
    let ops_of = ops(&inception);
    // The five convolutions (the 24-channel one reads blocks, writes planes), both pools,
    // the average pool and the global pool in blocks; the concat joins blocks as they are.
    assert_eq!(count(&ops_of, "Conv", DOMAIN), 5, "{ops_of:?}");
    assert_eq!(count(&ops_of, "MaxPool", DOMAIN), 2, "{ops_of:?}");
    assert_eq!(count(&ops_of, "AveragePool", DOMAIN), 1, "{ops_of:?}");
    assert_eq!(count(&ops_of, "GlobalAveragePool", DOMAIN), 1, "{ops_of:?}");
    assert_eq!(count(&ops_of, "Concat", ""), 1, "{ops_of:?}");
    assert_eq!(count(&ops_of, "ReorderOutput", DOMAIN), 0, "{ops_of:?}");
    let ops_of = ops(&residual);
    assert_eq!(count(&ops_of, "Conv", DOMAIN), 3, "{ops_of:?}");
    assert_eq!(count(&ops_of, "GlobalAveragePool", DOMAIN), 1, "{ops_of:?}");
    // The pointwise convolution's output is read by a depthwise one: it stays planar.
    let ops_of = ops(&depthwise);
    assert_eq!(count(&ops_of, "Conv", DOMAIN), 0, "{ops_of:?}");
}
