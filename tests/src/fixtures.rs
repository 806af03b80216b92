//! Models built in code that more than one test file uses.

use crate::build::{Attr, ModelBuilder};

const INT64: i32 = 7;

/// A model whose second half has data-dependent shapes, for splitting between the host and
/// a device. x → Conv → Relu → r; flat = `Reshape(r, [Shape(r)[0], -1])` (shape arithmetic);
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

/// A detector's RoI-pooling pattern after a data-dependent count, small: `where` =
/// NonZero(x > 0.3), K elements; rows = their row numbers; `shape` = [K, 3], built from
/// Shape(where) (shape arithmetic); y = Gather(x, rows) + ConstantOfShape(shape) (indices and
/// a shape computed at run time); z = y × Expand(ones, shape).
pub fn count_model() -> Vec<u8> {
    let mut m = ModelBuilder::new(13);
    m.input("x", &[6, 3])
        .positive("threshold", &[1], 0.3, 0.3)
        .positive("ones", &[1, 3], 1.0, 1.0)
        .scalar_int("zero", 0, INT64)
        .scalar_int("one", 1, INT64)
        .ints("axis0", &[0])
        .ints("three", &[3])
        .node("Greater", &["x", "threshold"], &["mask"], &[])
        .node("NonZero", &["mask"], &["where"], &[])
        .node(
            "Gather",
            &["where", "zero"],
            &["rows"],
            &[("axis", Attr::Int(0))],
        )
        .node("Shape", &["where"], &["s"], &[])
        .node("Gather", &["s", "one"], &["k"], &[("axis", Attr::Int(0))])
        .node("Unsqueeze", &["k", "axis0"], &["k1"], &[])
        .node(
            "Concat",
            &["k1", "three"],
            &["shape"],
            &[("axis", Attr::Int(0))],
        )
        .node("ConstantOfShape", &["shape"], &["zeros"], &[])
        .node(
            "Gather",
            &["x", "rows"],
            &["picked"],
            &[("axis", Attr::Int(0))],
        )
        .node("Add", &["picked", "zeros"], &["y"], &[])
        .node("Expand", &["ones", "shape"], &["e"], &[])
        .node("Mul", &["y", "e"], &["z"], &[])
        .output("z");
    m.to_bytes(13)
}
