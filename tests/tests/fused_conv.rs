//! `com.microsoft` `FusedConv` against ONNX Runtime 1.31.1, whose own contrib op it is: every
//! activation, with and without `Z`, on every convolution path (packed GEMM over an image, a
//! dense operand, two depth blocks, several threads; groups; depthwise; 1-d). Then the fusion
//! pass end to end: unfused `Conv → activation` and `Conv → Add → Relu` models run by a default
//! session (which fuses them) against ORT.

use spillway::{OptimizationLevel, Session};
use spillway_kernels::Tensor;
use spillway_tests::build::{Attr, ModelBuilder};
use spillway_tests::oracle::{Oracle, OrtConfig};
use spillway_tests::{relative_l2, seeded_f32};

/// MLAS computes `Sigmoid` and `Tanh` with polynomial approximations: a few ulps apart.
const TOLERANCE: f64 = 1e-5;

/// One convolution: `(label, X shape, W shape, Conv attributes)`.
struct Geometry {
    label: &'static str,
    x: Vec<i64>,
    w: Vec<i64>,
    group: i64,
    strides: Option<Vec<i64>>,
    pads: Option<Vec<i64>>,
    dilations: Option<Vec<i64>>,
}

impl Geometry {
    fn attrs(&self) -> Vec<(&'static str, Attr)> {
        let mut a = vec![("group", Attr::Int(self.group))];
        for (name, v) in [
            ("strides", &self.strides),
            ("pads", &self.pads),
            ("dilations", &self.dilations),
        ] {
            if let Some(v) = v {
                a.push((name, Attr::Ints(v.clone())));
            }
        }
        a
    }

    /// The output shape, by the Conv formula.
    fn output(&self) -> Vec<usize> {
        let spatial = self.x.len() - 2;
        let mut out = vec![self.x[0] as usize, self.w[0] as usize];
        for i in 0..spatial {
            let pad = self.pads.as_ref().map_or(0, |p| p[i] + p[i + spatial]);
            let dil = self.dilations.as_ref().map_or(1, |d| d[i]);
            let stride = self.strides.as_ref().map_or(1, |s| s[i]);
            let extent = dil * (self.w[2 + i] - 1) + 1;
            out.push(((self.x[2 + i] + pad - extent) / stride + 1) as usize);
        }
        out
    }
}

fn geometries() -> Vec<Geometry> {
    let g = |label, x: &[i64], w: &[i64], group| Geometry {
        label,
        x: x.to_vec(),
        w: w.to_vec(),
        group,
        strides: None,
        pads: None,
        dilations: None,
    };
    vec![
        // 32 · 3 · 3 = 288 operand rows: two packed depth blocks.
        Geometry {
            pads: Some(vec![1, 1, 1, 1]),
            ..g("2-d deep", &[1, 32, 9, 11], &[20, 32, 3, 3], 1)
        },
        // Large enough for the packed GEMM to split over threads.
        Geometry {
            pads: Some(vec![1, 1, 1, 1]),
            ..g("2-d threaded", &[1, 32, 28, 28], &[48, 32, 3, 3], 1)
        },
        Geometry {
            strides: Some(vec![2, 1]),
            pads: Some(vec![1, 0, 1, 1]),
            ..g("2-d groups strided", &[2, 6, 9, 8], &[10, 3, 3, 2], 2)
        },
        Geometry {
            pads: Some(vec![1, 1, 1, 1]),
            ..g("depthwise x2", &[1, 4, 7, 7], &[8, 1, 3, 3], 4)
        },
        Geometry {
            dilations: Some(vec![2]),
            ..g("1-d dilated", &[2, 5, 17], &[7, 5, 3], 1)
        },
        g("1-d depthwise", &[1, 3, 12], &[3, 1, 4], 3),
        g("pointwise", &[1, 16, 5, 6], &[12, 16, 1, 1], 1),
    ]
}

/// `(activation, activation_params)`; `None` for no activation attribute.
fn activations() -> Vec<(Option<&'static str>, Vec<f32>)> {
    vec![
        (None, vec![]),
        (Some("Relu"), vec![]),
        (Some("LeakyRelu"), vec![0.2]),
        (Some("Sigmoid"), vec![]),
        (Some("Tanh"), vec![]),
        (Some("Clip"), vec![-0.3, 0.4]),
        (Some("HardSigmoid"), vec![0.3, 0.6]),
    ]
}

/// Runs `bytes` in Spillway (as written or optimized) and in ORT (plain kernels, or its own
/// optimizations) on `inputs`; returns the relative L2 error of the single output.
fn compare(bytes: &[u8], inputs: Vec<(String, Tensor)>, optimize: bool, label: &str) -> f64 {
    let level = if optimize {
        OptimizationLevel::All
    } else {
        OptimizationLevel::Disabled
    };
    let session = Session::builder()
        .with_optimization(level)
        .commit_from_memory(bytes)
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let ours = session
        .run(inputs.clone())
        .unwrap_or_else(|e| panic!("{label}: spillway: {e}"));
    let config = OrtConfig {
        optimize,
        ..OrtConfig::default()
    };
    let theirs = Oracle::load_bytes(bytes, config)
        .unwrap()
        .run(&inputs)
        .unwrap_or_else(|e| panic!("{label}: ORT: {e}"));
    relative_l2(&theirs[0], &ours[0]).unwrap_or_else(|e| panic!("{label}: {e}"))
}

#[test]
fn fused_conv_matches_onnx_runtime() {
    let mut worst = 0.0f64;
    for (gi, geo) in geometries().iter().enumerate() {
        for (ai, (activation, params)) in activations().into_iter().enumerate() {
            for with_z in [false, true] {
                let mut m = ModelBuilder::new(100 + gi as u64);
                m.input("x", &geo.x)
                    .weight("w", &geo.w, 0.3)
                    .weight("b", &[geo.w[0]], 0.5);
                let mut inputs = vec!["x", "w", "b"];
                let mut attrs = geo.attrs();
                if let Some(a) = activation {
                    attrs.push(("activation", Attr::Str(a)));
                }
                if !params.is_empty() {
                    attrs.push(("activation_params", Attr::Floats(params.clone())));
                }
                let out = geo.output();
                if with_z {
                    let dims: Vec<i64> = out.iter().map(|&d| d as i64).collect();
                    m.input("z", &dims);
                    inputs.push("z");
                }
                m.node("FusedConv", &inputs, &["y"], &attrs)
                    .in_domain("com.microsoft")
                    .output("y");
                let bytes = m.to_bytes_with(13, &[("com.microsoft", 1)]);
                let x: Vec<usize> = geo.x.iter().map(|&d| d as usize).collect();
                let mut feed = vec![("x".to_string(), seeded_f32(&x, 7 + ai as u64))];
                if with_z {
                    feed.push(("z".to_string(), seeded_f32(&out, 9)));
                }
                let label = format!("{} / {activation:?} / Z {with_z}", geo.label);
                let err = compare(&bytes, feed, false, &label);
                assert!(err <= TOLERANCE, "{label}: relative L2 error {err:.2e}");
                worst = worst.max(err);
            }
        }
    }
    println!("FusedConv vs ORT: worst relative L2 error {worst:.2e}");
}

/// `x → Conv → <activation> → y` in the default domain, and `x → Conv → Add(x) → Relu → y`.
fn unfused_models() -> Vec<(String, Vec<u8>, Vec<usize>)> {
    let mut out = Vec::new();
    let acts: [(&str, Vec<(&str, Attr)>); 7] = [
        ("Relu", vec![]),
        ("HardSwish", vec![]),
        ("LeakyRelu", vec![("alpha", Attr::Float(0.1))]),
        ("Sigmoid", vec![]),
        ("Tanh", vec![]),
        ("HardSigmoid", vec![("alpha", Attr::Float(0.25))]),
        ("Clip", vec![]),
    ];
    for (i, (act, attrs)) in acts.into_iter().enumerate() {
        let mut m = ModelBuilder::new(200 + i as u64);
        m.input("x", &[1, 8, 10, 10])
            .weight("w", &[16, 8, 3, 3], 0.3)
            .weight("b", &[16], 0.3)
            .node(
                "Conv",
                &["x", "w", "b"],
                &["c"],
                &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
            );
        if act == "Clip" {
            m.positive("lo", &[], -0.2, -0.1)
                .positive("hi", &[], 0.3, 0.6)
                .node("Clip", &["c", "lo", "hi"], &["y"], &[]);
        } else {
            m.node(act, &["c"], &["y"], &attrs);
        }
        m.output("y");
        // HardSwish is an opset-14 operator.
        out.push((act.to_string(), m.to_bytes(14), vec![1, 8, 10, 10]));
    }
    // The convolution's input comes out of a Resize, whose output shape is unknown before
    // running: its dtype alone must let the pass fuse.
    let mut m = ModelBuilder::new(310);
    m.input("x", &[1, 8, 5, 5])
        .ints("sizes", &[1, 8, 10, 10])
        .weight("w", &[16, 8, 3, 3], 0.3)
        .weight("b", &[16], 0.3)
        .node(
            "Resize",
            &["x", "", "", "sizes"],
            &["r"],
            &[("mode", Attr::Str("linear"))],
        )
        .node(
            "Conv",
            &["r", "w", "b"],
            &["c"],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .node("Relu", &["c"], &["y"], &[])
        .output("y");
    out.push((
        "Resize, Conv + Relu".into(),
        m.to_bytes(14),
        vec![1, 8, 5, 5],
    ));
    let mut m = ModelBuilder::new(300);
    m.input("x", &[2, 8, 10, 10])
        .weight("w", &[8, 8, 3, 3], 0.3)
        .weight("b", &[8], 0.3)
        .node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .node("Add", &["c", "x"], &["s"], &[])
        .node("Relu", &["s"], &["y"], &[])
        .output("y");
    out.push(("Add + Relu".into(), m.to_bytes(13), vec![2, 8, 10, 10]));
    // Residuals whose shape is unknown before running (Resize outputs, to sizes computed from
    // the symbolic batch): fused all the same, with `Z` of the output's shape at run time, and
    // with a `Z` that broadcasts.
    for (label, z_tail) in [
        ("Resize, Conv + Add(Resize) + Relu", [16, 10, 10]),
        ("Resize, Conv + Add(broadcast Resize) + Relu", [16, 1, 1]),
    ] {
        let mut m = ModelBuilder::new(320);
        m.input("x", &[-1, 8, 5, 5])
            .ints("sizes", &[1, 8, 10, 10])
            .ints("zero", &[0])
            .ints("one", &[1])
            .ints("z_tail", &z_tail)
            .node("Shape", &["x"], &["shape"], &[])
            .node("Slice", &["shape", "zero", "one"], &["n"], &[])
            .node("Mul", &["n", "z_tail"], &["tail"], &[])
            .node(
                "Concat",
                &["n", "tail"],
                &["z_sizes"],
                &[("axis", Attr::Int(0))],
            )
            .weight("w", &[16, 8, 3, 3], 0.3)
            .weight("b", &[16], 0.3)
            .node(
                "Resize",
                &["x", "", "", "sizes"],
                &["r"],
                &[("mode", Attr::Str("linear"))],
            )
            .node("Resize", &["x", "", "", "z_sizes"], &["z"], &[])
            .node(
                "Conv",
                &["r", "w", "b"],
                &["c"],
                &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
            )
            .node("Add", &["c", "z"], &["s"], &[])
            .node("Relu", &["s"], &["y"], &[])
            .output("y");
        out.push((label.into(), m.to_bytes(14), vec![1, 8, 5, 5]));
    }
    out
}

#[test]
fn fused_models_match_onnx_runtime() {
    for (label, bytes, shape) in unfused_models() {
        let session = Session::builder().commit_from_memory(&bytes).unwrap();
        let ops: Vec<&str> = session
            .graph()
            .nodes
            .iter()
            .map(|n| n.op_type.as_str())
            .collect();
        // Besides the resizes, only the shape arithmetic of their sizes is left.
        let around = ["Resize", "Shape", "Slice", "Mul", "Concat"];
        assert!(
            ops.iter().filter(|&&op| op == "FusedConv").count() == 1
                && ops
                    .iter()
                    .all(|&op| op == "FusedConv" || around.contains(&op)),
            "{label}: not fused: {:?}",
            session
                .graph()
                .nodes
                .iter()
                .map(|n| &n.op_type)
                .collect::<Vec<_>>()
        );
        let feed = vec![("x".to_string(), seeded_f32(&shape, 5))];
        let err = compare(&bytes, feed, true, &label);
        assert!(err <= TOLERANCE, "{label}: relative L2 error {err:.2e}");
    }
}
