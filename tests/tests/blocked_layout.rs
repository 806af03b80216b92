//! The blocked (NCHW16c) layout end to end: small CNNs that a default session moves into
//! blocks of 16 channels — an inception block (strided first convolution on the image,
//! pools, a concat, a 24-channel convolution that reads blocks and writes planes, global
//! pooling), a residual block (the residual added in the blocked epilogue; also after a
//! resize to sizes known only when running), a convolution read by a depthwise one,
//! MobileNetV3's squeeze-and-excitation (its channel-scaling `Mul` in blocks), and a
//! NASNet-like cell (`Relu`, depthwise and pointwise
//! convolutions, `Add`, `Concat` in blocks; a broadcasting `Add` left planar), also with 42
//! channels, whose blocks are padded — against ONNX Runtime, with the rewritten graph checked
//! node by node.

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

/// [`residual`] after a resize to sizes computed at run time (a detector's backbone after its
/// transform): the height and width are not known before running, but shape inference proves
/// the residual's and the sum's equal, so the residual stays in blocks.
fn residual_after_resize() -> Vec<u8> {
    let mut m = ModelBuilder::new(48);
    m.input("x", &[1, 16, 12, 12])
        .ints("zero", &[0])
        .ints("two", &[2])
        .ints("four", &[4])
        .scalar_float("scale", 1.5)
        .node("Shape", &["x"], &["s"], &[])
        .node("Slice", &["s", "zero", "two"], &["nc"], &[])
        .node("Slice", &["s", "two", "four"], &["hw"], &[])
        .node("Cast", &["hw"], &["hwf"], &[("to", Attr::Int(1))])
        .node("Div", &["hwf", "scale"], &["scaled"], &[])
        .node("Ceil", &["scaled"], &["up"], &[])
        .node("Cast", &["up"], &["hwi"], &[("to", Attr::Int(7))])
        .node(
            "Concat",
            &["nc", "hwi"],
            &["sizes"],
            &[("axis", Attr::Int(0))],
        )
        .node("Resize", &["x", "", "", "sizes"], &["resized"], &[]);
    conv_relu(&mut m, "resized", "a", [32, 16, 1, 1], &[]);
    conv_relu(&mut m, "a", "b", [32, 32, 3, 3], &[pads(1)]);
    m.weight("c_w", &[32, 32, 1, 1], 0.2)
        .node("Conv", &["b", "c_w"], &["c"], &[])
        .node("Add", &["c", "a"], &["sum"], &[])
        .node("Relu", &["sum"], &["r"], &[])
        .node("GlobalAveragePool", &["r"], &["y"], &[])
        .output("y");
    m.to_bytes(13)
}

/// MobileNetV3's squeeze-and-excitation on `c` channels: a pointwise convolution, a depthwise
/// one, a global pool, two pointwise convolutions on the pooled `[1, c, 1, 1]` (the second
/// with a hard sigmoid) and the `Mul` that scales the depthwise output's channels by them,
/// then a pointwise convolution and a global pool. All in blocks, the `Mul` too (broadcasting
/// over the 5-D values); with 42 channels the padded lanes must stay finite through it.
fn squeeze_excitation(c: i64) -> Vec<u8> {
    let mut m = ModelBuilder::new(49);
    m.input("x", &[1, 16, 8, 8]);
    conv_relu(&mut m, "x", "a", [c, 16, 1, 1], &[]);
    conv_relu(
        &mut m,
        "a",
        "d",
        [c, 1, 3, 3],
        &[pads(1), ("group", Attr::Int(c))],
    );
    m.node("GlobalAveragePool", &["d"], &["pooled"], &[]);
    conv_relu(&mut m, "pooled", "fc1", [c, c, 1, 1], &[]);
    m.weight("fc2_w", &[c, c, 1, 1], 0.2)
        .weight("fc2_b", &[c], 0.2)
        .node("Conv", &["fc1", "fc2_w", "fc2_b"], &["fc2"], &[])
        .node("HardSigmoid", &["fc2"], &["scale"], &[])
        .node("Mul", &["scale", "d"], &["scaled"], &[]);
    conv_relu(&mut m, "scaled", "p", [32, c, 1, 1], &[]);
    m.node("GlobalAveragePool", &["p"], &["y"], &[]).output("y");
    m.to_bytes(13)
}

/// A convolution added to a pool of planes (a `Sigmoid` before it, which the pass does not
/// block), then a convolution: the pool could give blocks from blocks, but reads planes here.
fn add_to_planar_pool() -> Vec<u8> {
    let mut m = ModelBuilder::new(45);
    m.input("x", &[1, 32, 8, 8])
        .weight("a_w", &[32, 32, 1, 1], 0.2)
        .node("Conv", &["x", "a_w"], &["a"], &[])
        .node("Sigmoid", &["x"], &["g"], &[])
        .node("MaxPool", &["g"], &["p"], &[kernel(3), pads(1)])
        .node("Add", &["a", "p"], &["s"], &[])
        .weight("b_w", &[32, 32, 1, 1], 0.2)
        .node("Conv", &["s", "b_w"], &["y"], &[])
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

/// NASNet's separable branches: `Relu`, depthwise 5×5, pointwise + `Relu`, depthwise 3×3,
/// pointwise, added to the cell's input (fused into that convolution) and concatenated with it; beside them a convolution
/// whose only reader broadcasts (`Add` of a `[1, 32, 1, 1]` constant), which stays planar.
/// A negative `batch` makes the batch dimension symbolic, as exported models have it; `c`
/// channels throughout (the input's 32 aside).
fn separable_cell(batch: i64, c: i64) -> Vec<u8> {
    separable_cell_of(batch, c, true)
}

/// [`separable_cell`], its first convolution with a `Relu` or (`relu` false) without one:
/// then the branches' `Relu` (which folds into the depthwise convolution) has negative values
/// to rectify.
fn separable_cell_of(batch: i64, c: i64, relu: bool) -> Vec<u8> {
    let mut m = ModelBuilder::new(44);
    m.input("x", &[batch, 32, 9, 9]);
    match relu {
        true => conv_relu(&mut m, "x", "a", [c, 32, 1, 1], &[]),
        false => {
            m.weight("a_w", &[c, 32, 1, 1], 0.2)
                .node("Conv", &["x", "a_w"], &["a"], &[]);
        }
    }
    m.node("Relu", &["a"], &["r"], &[]);
    let depthwise = |m: &mut ModelBuilder, x: &str, y: &str, k: i64| {
        let w = format!("{y}_w");
        m.weight(&w, &[c, 1, k, k], 0.2).node(
            "Conv",
            &[x, &w],
            &[y],
            &[kernel(k), pads(k / 2), ("group", Attr::Int(c))],
        );
    };
    depthwise(&mut m, "r", "d1", 5);
    conv_relu(&mut m, "d1", "p1", [c, c, 1, 1], &[]);
    depthwise(&mut m, "p1", "d2", 3);
    m.weight("p2_w", &[c, c, 1, 1], 0.2)
        .node("Conv", &["d2", "p2_w"], &["p2"], &[])
        .node("Add", &["p2", "a"], &["s"], &[])
        .node("Concat", &["s", "a"], &["cat"], &[("axis", Attr::Int(1))])
        .weight("e_w", &[32, c, 1, 1], 0.2)
        .weight("shift", &[1, 32, 1, 1], 0.2)
        .node("Conv", &["a", "e_w"], &["e"], &[])
        .node("Add", &["e", "shift"], &["shifted"], &[])
        .output("cat")
        .output("shifted");
    m.to_bytes(13)
}

/// NASNet's reduction paths on 42 channels (padded blocks): a zero `Pad` of one row and column
/// before a strided max pool, and a `Pad` that crops a row and column at the start and adds one
/// at the end before a strided 1×1 average pool, each then a convolution; a `Shape` of the
/// first convolution's output that nothing reads (passes leave such nodes; it must not keep
/// the output planar).
fn padded_paths() -> Vec<u8> {
    let mut m = ModelBuilder::new(46);
    m.input("x", &[1, 16, 12, 12]);
    conv_relu(&mut m, "x", "a", [42, 16, 1, 1], &[]);
    m.ints("p1_pads", &[0, 0, 1, 1, 0, 0, 0, 0])
        .ints("p2_pads", &[0, 0, -1, -1, 0, 0, 1, 1])
        .node("Shape", &["a"], &["unread"], &[])
        .node("Pad", &["a", "p1_pads"], &["p1"], &[])
        .node("MaxPool", &["p1"], &["m1"], &[kernel(3), strides(2)])
        .node("Pad", &["a", "p2_pads"], &["p2"], &[])
        .node("AveragePool", &["p2"], &["m2"], &[kernel(1), strides(2)]);
    conv_relu(&mut m, "m1", "c1", [32, 42, 1, 1], &[]);
    conv_relu(&mut m, "m2", "c2", [32, 42, 1, 1], &[]);
    m.node("Add", &["c1", "c2"], &["s"], &[])
        .node("GlobalAveragePool", &["s"], &["y"], &[])
        .output("y");
    m.to_bytes(13)
}

/// NASNet's cell output: two convolutions of `c` channels each (no activation: negative values)
/// joined, a `Relu` of the join as its only reader, then a convolution and a global pool.
fn concat_relu(c: i64) -> Vec<u8> {
    let mut m = ModelBuilder::new(47);
    m.input("x", &[1, 16, 8, 8])
        .weight("a_w", &[c, 16, 1, 1], 0.3)
        .weight("b_w", &[c, 16, 3, 3], 0.3)
        .node("Conv", &["x", "a_w"], &["a"], &[])
        .node("Conv", &["x", "b_w"], &["b"], &[pads(1)])
        .node("Concat", &["a", "b"], &["cat"], &[("axis", Attr::Int(1))])
        .node("Relu", &["cat"], &["r"], &[]);
    conv_relu(&mut m, "r", "e", [32, 2 * c, 1, 1], &[]);
    m.node("GlobalAveragePool", &["e"], &["y"], &[]).output("y");
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
    let excitations =
        [32, 42].map(|c| matches_ort("squeeze-excitation", &squeeze_excitation(c), &[1, 16, 8, 8]));
    let resized = matches_ort(
        "residual after a resize",
        &residual_after_resize(),
        &[1, 16, 12, 12],
    );
    let depthwise = matches_ort("before depthwise", &before_depthwise(), &[1, 16, 10, 10]);
    let cell = matches_ort("separable cell", &separable_cell(1, 32), &[1, 32, 9, 9]);
    let symbolic = matches_ort(
        "separable cell, symbolic batch",
        &separable_cell(-1, 32),
        &[2, 32, 9, 9],
    );
    let padded = matches_ort(
        "separable cell of 42 channels",
        &separable_cell(-1, 42),
        &[2, 32, 9, 9],
    );
    let planar_pool = matches_ort(
        "add to a planar pool",
        &add_to_planar_pool(),
        &[1, 32, 8, 8],
    );
    let padded_paths = matches_ort("padded paths", &padded_paths(), &[1, 16, 12, 12]);
    let joins = [32, 42].map(|c| matches_ort("concat, relu", &concat_relu(c), &[1, 16, 8, 8]));
    let rectified = matches_ort(
        "separable cell of a convolution without activation",
        &separable_cell_of(1, 32, false),
        &[1, 32, 9, 9],
    );
    if !available() {
        // Without AVX-512 or AVX2 the graph keeps its planar ops; the outputs are checked above.
        for s in [
            &inception,
            &residual,
            &resized,
            &excitations[0],
            &excitations[1],
            &depthwise,
            &cell,
            &symbolic,
            &padded,
            &planar_pool,
            &padded_paths,
            &joins[0],
            &joins[1],
            &rectified,
        ] {
            assert_eq!(count(&ops(s), "Conv", DOMAIN), 0);
        }
        return;
    }
    // Whole blocks and padded ones: the `Relu` folds into the blocked `Concat`.
    for join in &joins {
        let ops_of = ops(join);
        assert_eq!(count(&ops_of, "Relu", ""), 0, "{ops_of:?}");
        assert_eq!(count(&ops_of, "Concat", DOMAIN), 1, "{ops_of:?}");
        let graph = join.graph();
        let concat = graph.nodes.iter().find(|n| n.op_type == "Concat").unwrap();
        assert_eq!(concat.attrs.int("relu", 0).unwrap(), 1);
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
    // Every convolution and both global pools in blocks; the scaling `Mul` reads two blocked
    // (5-D) values.
    for excitation in &excitations {
        let ops_of = ops(excitation);
        assert_eq!(count(&ops_of, "Conv", DOMAIN), 5, "{ops_of:?}");
        assert_eq!(count(&ops_of, "GlobalAveragePool", DOMAIN), 2, "{ops_of:?}");
        assert_eq!(count(&ops_of, "ReorderOutput", DOMAIN), 0, "{ops_of:?}");
        let graph = excitation.graph();
        let mul = graph.nodes.iter().find(|n| n.op_type == "Mul").unwrap();
        let ranks: Vec<usize> = mul
            .inputs
            .iter()
            .map(|v| {
                graph
                    .value(v.unwrap())
                    .shape
                    .as_ref()
                    .map_or(0, |s| s.len())
            })
            .collect();
        assert_eq!(ranks, [5, 5], "{ops_of:?}");
    }
    for (label, session) in [("residual", &residual), ("after a resize", &resized)] {
        let ops_of = ops(session);
        assert_eq!(count(&ops_of, "Conv", DOMAIN), 3, "{label}: {ops_of:?}");
        assert_eq!(
            count(&ops_of, "GlobalAveragePool", DOMAIN),
            1,
            "{label}: {ops_of:?}"
        );
        assert_eq!(
            count(&ops_of, "ReorderOutput", DOMAIN),
            0,
            "{label}: {ops_of:?}"
        );
    }
    // The pointwise convolution gives blocks to the depthwise one, which gives them to the
    // global pool: no reorder.
    let ops_of = ops(&depthwise);
    assert_eq!(count(&ops_of, "Conv", DOMAIN), 2, "{ops_of:?}");
    assert_eq!(count(&ops_of, "GlobalAveragePool", DOMAIN), 1, "{ops_of:?}");
    assert_eq!(count(&ops_of, "ReorderOutput", DOMAIN), 0, "{ops_of:?}");
    // Every convolution in blocks (the one read by the broadcast writes planes), the `Relu`,
    // `Add` and `Concat` on blocks as they are; one reorder, for the graph's output `cat`.
    // The first convolution writes planes: blocks would need a reorder before the planar
    // `Add`.
    let ops_of = ops(&planar_pool);
    assert_eq!(count(&ops_of, "Conv", DOMAIN), 0, "{ops_of:?}");
    assert_eq!(count(&ops_of, "ReorderOutput", DOMAIN), 0, "{ops_of:?}");
    // Both pads and pools in blocks, the unread `Shape` gone: no reorder.
    let ops_of = ops(&padded_paths);
    assert_eq!(count(&ops_of, "Pad", DOMAIN), 2, "{ops_of:?}");
    assert_eq!(count(&ops_of, "MaxPool", DOMAIN), 1, "{ops_of:?}");
    assert_eq!(count(&ops_of, "AveragePool", DOMAIN), 1, "{ops_of:?}");
    assert_eq!(count(&ops_of, "Conv", DOMAIN), 3, "{ops_of:?}");
    assert_eq!(count(&ops_of, "ReorderOutput", DOMAIN), 0, "{ops_of:?}");
    // The same with a symbolic batch: values of one shape still have one size.
    for cell in [&cell, &symbolic, &rectified] {
        separable_cell_is_blocked(cell, "");
    }
    // With 42 channels in 3 blocks each, the concat shifts the second input's channels: the
    // blocked `Concat`; the reorder of its output is told its 84 live channels.
    separable_cell_is_blocked(&padded, DOMAIN);
    let graph = padded.graph();
    let reorder = graph
        .nodes
        .iter()
        .find(|n| n.op_type == "ReorderOutput")
        .unwrap();
    assert_eq!(reorder.attrs.int("channels", 0).unwrap(), 84);
}

/// Checks the separable cell's rewrite; its `Concat` is in `concat_domain`.
fn separable_cell_is_blocked(cell: &Session, concat_domain: &str) {
    let ops_of = ops(cell);
    assert_eq!(count(&ops_of, "Conv", DOMAIN), 6, "{ops_of:?}");
    assert_eq!(count(&ops_of, "ReorderOutput", DOMAIN), 1, "{ops_of:?}");
    assert_eq!(count(&ops_of, "Concat", concat_domain), 1, "{ops_of:?}");
    let graph = cell.graph();
    let blocked_inputs = |op: &str| {
        graph
            .nodes
            .iter()
            .filter(|n| n.op_type == op && n.domain.is_empty())
            .map(|n| {
                let x = n.inputs[0].unwrap();
                graph.value(x).shape.as_ref().map_or(0, |s| s.len())
            })
            .collect::<Vec<_>>()
    };
    // The `Relu` before the first depthwise convolution folds into it.
    assert_eq!(blocked_inputs("Relu"), Vec::<usize>::new(), "{ops_of:?}");
    let rectifying: Vec<i64> = graph
        .nodes
        .iter()
        .filter(|n| n.op_type == "Conv" && n.attrs.int("group", 1).unwrap() != 1)
        .map(|n| n.attrs.int("relu_input", 0).unwrap())
        .collect();
    assert_eq!(rectifying, vec![1, 0], "{ops_of:?}");
    // The sum with the cell's input is the last pointwise convolution's `Z`, blocked; the
    // broadcasting `Add` stays planar.
    assert_eq!(blocked_inputs("Add"), vec![4], "{ops_of:?}");
    let residual = graph
        .nodes
        .iter()
        .find(|n| n.op_type == "Conv" && n.inputs.len() == 4)
        .and_then(|n| n.inputs[3])
        .expect("a convolution with a residual");
    assert_eq!(
        graph.value(residual).shape.as_ref().map(|s| s.len()),
        Some(5)
    );
    let concat = graph.nodes.iter().find(|n| n.op_type == "Concat").unwrap();
    let x = concat.inputs[0].unwrap();
    assert_eq!(graph.value(x).shape.as_ref().map(|s| s.len()), Some(5));
}
