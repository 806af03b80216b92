//! ONNX Runtime's `com.microsoft` contrib ops that Spillway lowers into standard ops at load
//! (`engine/src/graph/contrib.rs`), each against ONNX Runtime 1.31.1's own kernel on the same
//! model and seeded inputs: every output within `1e-5` of its largest magnitude (at least 1).
//! Each op runs with and without its optional inputs and outputs, at each optimization level.

use spillway::{Error, OptimizationLevel, Session};
use spillway_kernels::Tensor;
use spillway_tests::build::{Attr, ModelBuilder};
use spillway_tests::oracle::{Oracle, OrtConfig};
use spillway_tests::seeded_f32;

const LEVELS: [OptimizationLevel; 3] = [
    OptimizationLevel::Disabled,
    OptimizationLevel::Basic,
    OptimizationLevel::All,
];

/// A model of one contrib node reading float inputs `x` [2, 5, 16] and `skip` (same shape, when
/// named) and 1-D weights of 16, with the given outputs.
struct Case {
    op: &'static str,
    inputs: &'static [&'static str],
    outputs: &'static [&'static str],
    attrs: Vec<(&'static str, Attr)>,
}

fn model(case: &Case) -> Vec<u8> {
    let mut m = ModelBuilder::new(5);
    for &name in case.inputs {
        match name {
            "" => {}
            "x" | "skip" => {
                m.input(name, &[2, 5, 16]);
            }
            weight => {
                m.weight(weight, &[16], 0.8);
            }
        }
    }
    m.node(case.op, case.inputs, case.outputs, &case.attrs)
        .in_domain("com.microsoft");
    for &out in case.outputs.iter().filter(|o| !o.is_empty()) {
        m.output(out);
    }
    m.to_bytes_with(17, &[("com.microsoft", 1)])
}

fn inputs(case: &Case) -> Vec<(String, Tensor)> {
    case.inputs
        .iter()
        .filter(|n| matches!(**n, "x" | "skip"))
        .enumerate()
        .map(|(i, n)| {
            // The skip normalizations get a spread small enough for epsilon to matter.
            let scale = match (case.op.starts_with("Skip"), *n) {
                (false, _) => 3.0,
                (true, "x") => 0.003,
                (true, _) => 0.001,
            };
            let t = seeded_f32(&[2, 5, 16], 40 + i as u64);
            let data: Vec<f32> = t.view::<f32>().unwrap().iter().map(|v| v * scale).collect();
            (
                n.to_string(),
                Tensor::from_shape_vec(&[2, 5, 16], data).unwrap(),
            )
        })
        .collect()
}

fn check(case: &Case) {
    let bytes = model(case);
    let inputs = inputs(case);
    let want = Oracle::load_bytes(&bytes, OrtConfig::default())
        .and_then(|mut o| o.run(&inputs))
        .unwrap_or_else(|e| panic!("{}: ONNX Runtime: {e}", case.op));
    for level in LEVELS {
        let session = Session::builder()
            .with_optimization(level)
            .commit_from_memory(&bytes)
            .unwrap_or_else(|e| panic!("{} {level:?}: {e}", case.op));
        let got = session
            .run(inputs.clone())
            .unwrap_or_else(|e| panic!("{} {level:?}: {e}", case.op))
            .into_tensors();
        assert_eq!(got.len(), want.len(), "{}", case.op);
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(w.shape(), g.shape(), "{} output {i} {level:?}", case.op);
            let w = w.to_f64_vec().unwrap();
            let g = g.to_f64_vec().unwrap();
            let scale = w.iter().fold(1f64, |m, x| m.max(x.abs()));
            let worst = w
                .iter()
                .zip(&g)
                .fold(0f64, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                worst <= 1e-5 * scale,
                "{} output {i} {level:?}: differs by {worst:e} (scale {scale:e})",
                case.op
            );
        }
    }
}

#[test]
fn gelu_family_matches_onnx_runtime() {
    for case in [
        Case {
            op: "Gelu",
            inputs: &["x"],
            outputs: &["y"],
            attrs: vec![],
        },
        Case {
            op: "BiasGelu",
            inputs: &["x", "bias"],
            outputs: &["y"],
            attrs: vec![],
        },
        Case {
            op: "FastGelu",
            inputs: &["x", "bias"],
            outputs: &["y"],
            attrs: vec![],
        },
        Case {
            op: "FastGelu",
            inputs: &["x"],
            outputs: &["y"],
            attrs: vec![],
        },
        Case {
            op: "QuickGelu",
            inputs: &["x"],
            outputs: &["y"],
            attrs: vec![],
        },
        Case {
            op: "QuickGelu",
            inputs: &["x"],
            outputs: &["y"],
            attrs: vec![("alpha", Attr::Float(0.5))],
        },
    ] {
        check(&case);
    }
}

#[test]
fn skip_normalizations_match_onnx_runtime() {
    for case in [
        Case {
            op: "SkipLayerNormalization",
            inputs: &["x", "skip", "gamma"],
            outputs: &["y"],
            attrs: vec![],
        },
        Case {
            op: "SkipLayerNormalization",
            inputs: &["x", "skip", "gamma", "beta", "bias"],
            outputs: &["y", "mean", "inv_std_var", "sum"],
            attrs: vec![("epsilon", Attr::Float(1e-5))],
        },
        Case {
            op: "SkipLayerNormalization",
            inputs: &["x", "skip", "gamma", "", "bias"],
            outputs: &["y", "", "", "sum"],
            attrs: vec![],
        },
        Case {
            op: "SkipSimplifiedLayerNormalization",
            inputs: &["x", "skip", "gamma"],
            outputs: &["y"],
            attrs: vec![],
        },
        Case {
            op: "SkipSimplifiedLayerNormalization",
            inputs: &["x", "skip", "gamma", "bias"],
            outputs: &["y", "", "", "sum"],
            attrs: vec![("epsilon", Attr::Float(1e-5))],
        },
    ] {
        check(&case);
    }
}

#[test]
fn a_malformed_contrib_node_is_an_invalid_node_error() {
    let case = Case {
        op: "BiasGelu",
        inputs: &["x"],
        outputs: &["y"],
        attrs: vec![],
    };
    match Session::builder().commit_from_memory(&model(&case)) {
        Err(Error::InvalidNode { op_type, rule, .. }) => {
            assert_eq!(op_type, "BiasGelu");
            assert!(rule.contains("inputs"), "{rule}");
        }
        other => panic!("expected InvalidNode, got {other:?}"),
    }
}
