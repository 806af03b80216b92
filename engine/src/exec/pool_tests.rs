//! The pool of values whose size the static plan cannot know: later outputs take the memory of
//! dead ones, across runs whose shapes change, and what the pool keeps does not grow.

use spillway_kernels::{Attributes, DType, Tensor};

use crate::Session;
use crate::graph::{Dim, Graph, Node, ValueId, ValueInfo};

/// `a = x + x`, `b = a · x`, `c = b + a`, `y = c · x` over a vector of symbolic length `n`.
fn chain() -> Graph {
    let mut g = Graph::default();
    let names = ["x", "a", "b", "c", "y"];
    let ids: Vec<ValueId> = names
        .iter()
        .map(|&name| {
            let mut info = ValueInfo::named(name);
            info.dtype = Some(DType::F32);
            info.shape = Some(vec![Dim::Symbol("n".into())]);
            g.add_value(info)
        })
        .collect();
    let v = |name: &str| ids[names.iter().position(|n| *n == name).unwrap()];
    g.inputs = vec![v("x")];
    g.outputs = vec![v("y")];
    for (op, [l, r], out) in [
        ("Add", ["x", "x"], "a"),
        ("Mul", ["a", "x"], "b"),
        ("Add", ["b", "a"], "c"),
        ("Mul", ["c", "x"], "y"),
    ] {
        g.nodes.push(Node {
            name: format!("{op}_{out}"),
            op_type: op.into(),
            domain: String::new(),
            opset: 14,
            attrs: Attributes::new(),
            inputs: vec![Some(v(l)), Some(v(r))],
            declared_inputs: 2,
            outputs: vec![Some(v(out))],
            subgraphs: Vec::new(),
            type_attrs: Vec::new(),
        });
    }
    g
}

/// Quarter steps in [-2, 2]: every result below is exact in `f32`.
fn input(len: usize) -> Tensor {
    let data = (0..len).map(|i| (i % 17) as f32 / 4.0 - 2.0).collect();
    Tensor::from_shape_vec(&[len], data).unwrap()
}

#[test]
fn values_of_unknown_size_reuse_pooled_memory_without_growth_across_sizes() {
    let session = Session::builder().commit_graph(chain()).unwrap();
    // Large enough to be pooled (the heap recycles small buffers itself).
    let sizes = [
        1_600_000, 2_400_000, 1_900_000, 2_400_000, 1_600_000, 2_200_000,
    ];
    let mut kept = Vec::new();
    for (run, &len) in sizes.iter().cycle().take(18).enumerate() {
        let x = input(len);
        let (out, stats) = session.run_with_stats(vec![("x", x.clone())]).unwrap();
        let (x, y) = (x.to_f32_array().unwrap(), out[0].to_f32_array().unwrap());
        assert_eq!(y.len(), len, "run {run}");
        for (i, (&xi, &yi)) in x.iter().zip(&y).enumerate() {
            assert_eq!(yi, 2.0 * xi * xi * xi + 2.0 * xi * xi, "run {run}, y[{i}]");
        }
        // Once a run as large has been seen, its buffers are in the pool (a larger run than
        // any before finds none large enough, but its `c` still takes `a`'s memory).
        if sizes[..run.min(sizes.len())].iter().any(|&s| s >= len) {
            assert!(
                stats.pooled_outputs >= 2,
                "run {run} ({len} values): {} outputs from the pool",
                stats.pooled_outputs
            );
        }
        kept.push(stats.pool_bytes);
    }
    // a, b and c: at most three buffers of the largest size, however often sizes change.
    let largest = 2_400_000 * size_of::<f32>();
    assert!(
        kept.iter().all(|&b| b <= 3 * 2 * largest),
        "pooled bytes per run: {kept:?}"
    );
    assert!(
        kept[12..].iter().max() <= kept[..6].iter().max(),
        "the pool grew across runs: {kept:?}"
    );
}
