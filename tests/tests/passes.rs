//! Each graph pass on its own: it does its rewrite, and the rewritten graph computes what the
//! original did (same session, optimizations off, as the reference).

use spillway::graph::{Dim, Graph, passes, shape_inference};
use spillway::{OptimizationLevel, Session, Tensor};
use spillway_tests::build::{Attr, ModelBuilder};
use spillway_tests::relative_l2;

fn load(bytes: &[u8]) -> Graph {
    spillway::onnx::load_bytes(bytes::Bytes::copy_from_slice(bytes), None).unwrap()
}

fn ops(g: &Graph) -> Vec<&str> {
    g.nodes.iter().map(|n| n.op_type.as_str()).collect()
}

fn input(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_shape_vec(
        shape,
        (0..n)
            .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
            .collect(),
    )
    .unwrap()
}

/// Runs the rewritten graph (no further optimization) and the original model, both on `x`.
fn assert_same_outputs(bytes: &[u8], rewritten: Graph, x: Tensor, tolerance: f64) {
    let plain = Session::builder().with_optimization(OptimizationLevel::Disabled);
    let reference = plain
        .clone()
        .commit_from_memory(bytes)
        .unwrap()
        .run([("x", x.clone())])
        .unwrap();
    let got = plain
        .commit_graph(rewritten)
        .unwrap()
        .run([("x", x)])
        .unwrap();
    for i in 0..reference.len() {
        let err = relative_l2(&reference[i], &got[i]).unwrap();
        assert!(err <= tolerance, "output {i}: relative L2 error {err}");
    }
}

fn identity_model() -> Vec<u8> {
    let mut m = ModelBuilder::new(5);
    m.input("x", &[2, 3])
        .node("Identity", &["x"], &["a"], &[])
        .node("Relu", &["a"], &["b"], &[])
        .node("Dropout", &["b"], &["c"], &[])
        .node("Neg", &["c"], &["y"], &[])
        .output("y");
    m.to_bytes(13)
}

#[test]
fn identity_and_dropout_are_removed() {
    let bytes = identity_model();
    let mut g = load(&bytes);
    passes::remove_identities(&mut g);
    assert_eq!(ops(&g), ["Relu", "Neg"]);
    assert_same_outputs(&bytes, g, input(&[2, 3]), 0.0);
}

#[test]
fn identity_producing_a_graph_output_is_kept() {
    let mut m = ModelBuilder::new(5);
    m.input("x", &[2])
        .node("Relu", &["x"], &["a"], &[])
        .node("Identity", &["a"], &["y"], &[])
        .output("y");
    let mut g = load(&m.to_bytes(13));
    passes::remove_identities(&mut g);
    assert_eq!(ops(&g), ["Relu", "Identity"]);
}

fn shape_chain_model() -> Vec<u8> {
    let mut m = ModelBuilder::new(6);
    m.input("x", &[2, 4, 6])
        .ints("idx", &[0])
        .ints("minus_one", &[-1])
        .node("Shape", &["x"], &["s"], &[])
        .node("Gather", &["s", "idx"], &["n"], &[("axis", Attr::Int(0))])
        .node(
            "Concat",
            &["n", "minus_one"],
            &["shape"],
            &[("axis", Attr::Int(0))],
        )
        .node("Reshape", &["x", "shape"], &["y"], &[])
        .output("y");
    m.to_bytes(13)
}

#[test]
fn shape_gather_concat_chain_folds_to_a_constant() {
    let bytes = shape_chain_model();
    let mut g = load(&bytes);
    shape_inference::infer(&mut g);
    passes::fold_constants(&mut g).unwrap();
    passes::remove_dead_nodes(&mut g);
    assert_eq!(ops(&g), ["Reshape"]);
    let shape_input = g.nodes[0].inputs[1].unwrap();
    assert_eq!(g.constants[&shape_input].to_i64_vec().unwrap(), [2, -1]);
    assert_eq!(
        g.value(g.outputs[0]).shape,
        Some(vec![Dim::Fixed(2), Dim::Fixed(24)])
    );
    assert_same_outputs(&bytes, g, input(&[2, 4, 6]), 0.0);
}

#[test]
fn symbolic_dims_flow_through_shape_inference() {
    let mut m = ModelBuilder::new(7);
    m.input("x", &[-1, 3, 16, 16])
        .weight("w", &[8, 3, 3, 3], 0.5)
        .node(
            "Conv",
            &["x", "w"],
            &["c"],
            &[
                ("strides", Attr::Ints(vec![2, 2])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
            ],
        )
        .node("Relu", &["c"], &["r"], &[])
        .node("Flatten", &["r"], &["y"], &[])
        .output("y");
    let mut g = load(&m.to_bytes(13));
    shape_inference::infer(&mut g);
    let n = Dim::Symbol("N".into());
    let conv_out = g.nodes[0].outputs[0].unwrap();
    assert_eq!(
        g.value(conv_out).shape,
        Some(vec![n.clone(), Dim::Fixed(8), Dim::Fixed(8), Dim::Fixed(8)])
    );
    assert_eq!(g.value(g.outputs[0]).shape, Some(vec![n, Dim::Fixed(512)]));
}

/// Conv (with or without its own bias) → BatchNormalization.
fn conv_bn_model(conv_bias: bool) -> Vec<u8> {
    let conv_inputs: &[&str] = if conv_bias {
        &["x", "w", "b"]
    } else {
        &["x", "w"]
    };
    let mut m = ModelBuilder::new(8);
    m.input("x", &[1, 3, 12, 12])
        .weight("w", &[6, 3, 3, 3], 0.5)
        .weight("b", &[6], 0.2)
        .positive("scale", &[6], 0.5, 1.5)
        .weight("shift", &[6], 0.3)
        .weight("mean", &[6], 0.3)
        .positive("var", &[6], 0.2, 2.0)
        .node(
            "Conv",
            conv_inputs,
            &["c"],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .node(
            "BatchNormalization",
            &["c", "scale", "shift", "mean", "var"],
            &["y"],
            &[("epsilon", Attr::Float(1e-3))],
        )
        .output("y");
    m.to_bytes(15)
}

#[test]
fn batchnorm_folds_into_conv() {
    for conv_bias in [true, false] {
        let bytes = conv_bn_model(conv_bias);
        let mut g = load(&bytes);
        passes::fold_batchnorm_into_conv(&mut g);
        assert_eq!(ops(&g), ["Conv"]);
        assert_eq!(g.nodes[0].outputs[0], Some(g.outputs[0]));
        assert_same_outputs(&bytes, g, input(&[1, 3, 12, 12]), 1e-5);
    }
}

#[test]
fn batchnorm_is_not_folded_when_the_conv_output_has_other_readers() {
    let mut m = ModelBuilder::new(9);
    m.input("x", &[1, 2, 4, 4])
        .weight("w", &[2, 2, 1, 1], 0.5)
        .positive("s", &[2], 0.5, 1.5)
        .weight("b", &[2], 0.1)
        .weight("m", &[2], 0.1)
        .positive("v", &[2], 0.5, 1.5)
        .node("Conv", &["x", "w"], &["c"], &[])
        .node(
            "BatchNormalization",
            &["c", "s", "b", "m", "v"],
            &["bn"],
            &[],
        )
        .node("Add", &["bn", "c"], &["y"], &[])
        .output("y");
    let mut g = load(&m.to_bytes(15));
    passes::fold_batchnorm_into_conv(&mut g);
    assert_eq!(ops(&g), ["Conv", "BatchNormalization", "Add"]);
}

#[test]
fn dead_nodes_are_removed() {
    let mut m = ModelBuilder::new(10);
    m.input("x", &[3])
        .node("Relu", &["x"], &["unused"], &[])
        .node("Neg", &["x"], &["y"], &[])
        .output("y");
    let bytes = m.to_bytes(13);
    let mut g = load(&bytes);
    passes::remove_dead_nodes(&mut g);
    assert_eq!(ops(&g), ["Neg"]);
    assert_same_outputs(&bytes, g, input(&[3]), 0.0);
}
