//! Models built in code that more than one test file uses.

use crate::build::{Attr, ModelBuilder};

const INT64: i32 = 7;

/// A model whose second half has data-dependent shapes, for splitting between the host and
/// a device. x → Conv → Relu → r; flat = Reshape(r, [Shape(r)[0], -1]) (shape arithmetic);
/// picked = Gather(flat, idx, axis 1) (fixed shapes); where = NonZero(flat > 0.3) (data
/// dependent) → Transpose → Cast → ReduceSum(axis 0) → Add(picked) → y;
/// z = Mul(Relu(picked), 2): two outputs on both sides.
pub fn split_model() -> Vec<u8> {
    let mut m = ModelBuilder::new(11);
    m.input("x", &[1, 4, 6, 6])
        .typed_input("idx", INT64, &[2])
        .weight("w", &[8, 4, 3, 3], 0.3)
        .ints("zero", &[0])
        .ints("rest", &[-1])
        .ints("axis0", &[0])
        .positive("threshold", &[1], 0.3, 0.3)
        .positive("two", &[1], 2.0, 2.0)
        .node(
            "Conv",
            &["x", "w"],
            &["c"],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .node("Relu", &["c"], &["r"], &[])
        .node("Shape", &["r"], &["s"], &[])
        .node("Gather", &["s", "zero"], &["n"], &[])
        .node(
            "Concat",
            &["n", "rest"],
            &["target"],
            &[("axis", Attr::Int(0))],
        )
        .node("Reshape", &["r", "target"], &["flat"], &[])
        .node(
            "Gather",
            &["flat", "idx"],
            &["picked"],
            &[("axis", Attr::Int(1))],
        )
        .node("Greater", &["flat", "threshold"], &["mask"], &[])
        .node("NonZero", &["mask"], &["where"], &[])
        .node("Transpose", &["where"], &["pairs"], &[])
        .node("Cast", &["pairs"], &["fpairs"], &[("to", Attr::Int(1))])
        .node(
            "ReduceSum",
            &["fpairs", "axis0"],
            &["sums"],
            &[("keepdims", Attr::Int(1))],
        )
        .node("Add", &["sums", "picked"], &["y"], &[])
        .node("Relu", &["picked"], &["rp"], &[])
        .node("Mul", &["rp", "two"], &["z"], &[])
        .output("y")
        .output("z");
    m.to_bytes(17)
}
