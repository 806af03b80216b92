//! The arena code under concurrency, on a graph small enough for Miri (`scripts/miri.sh` runs
//! these tests under it, which checks every access for undefined behaviour and data races and
//! reports leaks): shared buffers recycled while runs overlap, values copied between devices,
//! and the happens-before arena plan proven against the plan's edges.

use std::time::Duration;

use spillway_kernels::{Attributes, DType, Tensor};

use crate::graph::{Dim, Graph, Node, ValueId, ValueInfo};
use crate::profile::ProfileOptions;
use crate::{CopyCost, Devices, Placement, Session};

/// Elements of every value: enough that buffers are reused, little enough for Miri.
const LEN: usize = 16;

/// `x` feeds three branches that meet pairwise and again at the end, so several values are
/// alive at once on different lanes and dead ones are reused:
/// `a = Relu(x)`, `b = Abs(x)`, `c = Neg(x)`, `d = a + b`, `e = d * c`, `f = Relu(e)`,
/// `g = b * b`, `y = f + g`, `z = Neg(d)`. Only exactly rounded operations: Miri perturbs
/// the results of transcendental functions, so runs would not be bitwise equal.
fn branchy_graph() -> Graph {
    let mut g = Graph::default();
    let value = |g: &mut Graph, name: &str| {
        let mut info = ValueInfo::named(name);
        info.dtype = Some(DType::F32);
        info.shape = Some(vec![Dim::Fixed(LEN)]);
        g.add_value(info)
    };
    let names = ["x", "a", "b", "c", "d", "e", "f", "g", "y", "z"];
    let ids: Vec<ValueId> = names.iter().map(|n| value(&mut g, n)).collect();
    let v = |name: &str| ids[names.iter().position(|n| *n == name).unwrap()];
    g.inputs = vec![v("x")];
    g.outputs = vec![v("y"), v("z")];
    for (op, inputs, output) in [
        ("Relu", &["x"][..], "a"),
        ("Abs", &["x"], "b"),
        ("Neg", &["x"], "c"),
        ("Add", &["a", "b"], "d"),
        ("Mul", &["d", "c"], "e"),
        ("Relu", &["e"], "f"),
        ("Mul", &["b", "b"], "g"),
        ("Add", &["f", "g"], "y"),
        ("Neg", &["d"], "z"),
    ] {
        g.nodes.push(Node {
            name: format!("{op}_{output}"),
            op_type: op.into(),
            domain: String::new(),
            opset: 14,
            attrs: Attributes::new(),
            inputs: inputs.iter().map(|i| Some(v(i))).collect(),
            declared_inputs: inputs.len(),
            outputs: vec![Some(v(output))],
            subgraphs: Vec::new(),
            type_attrs: Vec::new(),
        });
    }
    g
}

fn input(seed: usize) -> Vec<(&'static str, Tensor)> {
    let data = (0..LEN)
        .map(|i| ((i * 7 + seed * 13) % 17) as f32 / 4.0 - 2.0)
        .collect();
    vec![("x", Tensor::from_shape_vec(&[LEN], data).unwrap())]
}

/// Two CPU lanes and a Virtual device with two streams: values cross devices and lanes.
fn multi_device_session(policy: Placement) -> Session {
    let link = CopyCost {
        latency: Duration::from_micros(5),
        bandwidth_bytes_per_s: 4e9,
    };
    Session::builder()
        .with_devices(Devices::cpu().with_cpu_lanes(2).with_virtual(2, link))
        .with_placement(policy)
        .with_profile_cache(false)
        .with_profile_options(ProfileOptions {
            warmup: 0,
            repeats: 1,
            intra_op_threads: Some(1),
            // Small copies: Miri interprets every byte.
            copy_sizes: [64, 256, 1024],
            ..Default::default()
        })
        .commit_graph(branchy_graph())
        .unwrap()
}

#[test]
fn overlapping_runs_recycle_buffers_and_agree_with_the_sequential_engine() {
    let reference = Session::builder().commit_graph(branchy_graph()).unwrap();
    let expected: Vec<_> = (0..2).map(|s| reference.run(input(s)).unwrap()).collect();
    // The first output by hand, so the reference itself is checked:
    // y = Relu((relu(x) + |x|) * -x) + |x|².
    let x = input(0)[0].1.to_f32_array().unwrap();
    let y = expected[0][0].to_f32_array().unwrap();
    for (i, &xi) in x.iter().enumerate() {
        let want = ((xi.max(0.0) + xi.abs()) * -xi).max(0.0) + xi.abs() * xi.abs();
        assert_eq!(y[i], want, "y[{i}]");
    }

    let session = multi_device_session(Placement::Greedy);
    let plan = session.execution_plan().expect("a multi-device plan");
    assert!(plan.copy_count() > 0, "values cross devices");
    let buffers: Vec<usize> = plan.slots.iter().filter_map(|s| s.buffer).collect();
    let distinct: std::collections::BTreeSet<_> = buffers.iter().collect();
    assert!(
        distinct.len() < buffers.len(),
        "some buffer holds several values"
    );
    std::thread::scope(|scope| {
        for t in 0..2 {
            let (session, expected) = (&session, &expected);
            scope.spawn(move || {
                for r in 0..2 {
                    let k = (t + r) % 2;
                    let got = session.run(input(k)).unwrap();
                    assert_eq!(got[0], expected[k][0], "thread {t}, run {r}: y");
                    assert_eq!(got[1], expected[k][1], "thread {t}, run {r}: z");
                }
            });
        }
    });
}

#[test]
fn the_happens_before_arena_shares_bytes_only_between_ordered_values() {
    let session = multi_device_session(Placement::Heft);
    let plan = session.execution_plan().expect("a multi-device plan");
    let graph = session.graph();
    let size = |slot: usize| {
        let info = graph.value(plan.slots[slot].value);
        Some(info.fixed_shape()?.iter().product::<usize>() * info.dtype?.size_of())
    };
    let arenas = crate::plan::hb_memory::plan(plan, session.devices().specs().len(), size);
    crate::plan::hb_memory::verify(plan, &arenas).unwrap();
    let planned: usize = arenas.iter().map(|a| a.peak_bytes).sum();
    let naive: usize = arenas.iter().map(|a| a.naive_bytes).sum();
    assert!(
        planned > 0 && planned < naive,
        "{planned} of {naive} bytes: no reuse"
    );
}
