//! Specializing a graph to its input shapes (what a GPU session does before compiling its
//! plan): `Shape` arithmetic on a symbolic batch folds to constants, the GPU-less ops go, and
//! the graph computes what it did.
#![cfg(feature = "cuda")]

use spillway::Session;
use spillway::gpu::{cpu_values, specialize};
use spillway::graph::passes::{Level, optimize};
use spillway_tests::build::{Attr, ModelBuilder};
use spillway_tests::{relative_l2, seeded_f32};

#[test]
fn shape_arithmetic_on_a_symbolic_batch_folds_away() {
    // y = Reshape(Relu(x), Concat(Gather(Shape(Relu(x)), 0), [-1])): the batch is symbolic, so
    // shape inference alone cannot fold the Shape chain.
    let mut m = ModelBuilder::new(3);
    m.input("x", &[-1, 3, 4, 4])
        .ints("zero", &[0])
        .ints("rest", &[-1])
        .node("Relu", &["x"], &["a"], &[])
        .node("Shape", &["a"], &["s"], &[])
        .node("Gather", &["s", "zero"], &["n"], &[])
        .node(
            "Concat",
            &["n", "rest"],
            &["target"],
            &[("axis", Attr::Int(0))],
        )
        .node("Reshape", &["a", "target"], &["y"], &[])
        .output("y");
    let bytes = m.to_bytes(17);
    let mut graph =
        spillway::onnx::load_bytes(bytes::Bytes::copy_from_slice(&bytes), None).unwrap();
    optimize(&mut graph, Level::Basic).unwrap();
    assert!(graph.nodes.iter().any(|n| n.op_type == "Shape"));

    let x = seeded_f32(&[2, 3, 4, 4], 1);
    let values = specialize(&mut graph, std::slice::from_ref(&x)).unwrap();
    let ops: Vec<&str> = graph.nodes.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(ops, ["Relu", "Reshape"]);
    let y = graph.outputs[0];
    assert_eq!(values[y.index()].as_ref().unwrap().shape(), [2, 48]);

    let reference = Session::builder()
        .commit_from_memory(&bytes)
        .unwrap()
        .run([("x", x.clone())])
        .unwrap();
    let walked = cpu_values(&graph, &[x]).unwrap();
    let err = relative_l2(&reference[0], walked[y.index()].as_ref().unwrap()).unwrap();
    assert!(err == 0.0, "relative L2 error {err}");
}
