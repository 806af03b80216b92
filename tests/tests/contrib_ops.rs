//! ONNX Runtime's `com.microsoft` contrib ops that Spillway lowers into standard ops at load
//! (`engine/src/graph/contrib.rs`), each against ONNX Runtime 1.31.1's own kernel on the same
//! model and seeded inputs: every output within `1e-5` of its largest magnitude (at least 1).
//! Each op runs with and without its optional inputs and outputs, at each optimization level;
//! what the lowering cannot express (a KV cache, non-constant 4-bit weights) is an
//! `InvalidNode` error naming the cause.

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
    compare(&model(case), &inputs(case), case.op);
}

/// The model on `inputs` in ONNX Runtime and in Spillway at every optimization level.
fn compare(bytes: &[u8], inputs: &[(String, Tensor)], what: &str) {
    let want = Oracle::load_bytes(bytes, OrtConfig::default())
        .and_then(|mut o| o.run(inputs))
        .unwrap_or_else(|e| panic!("{what}: ONNX Runtime: {e}"));
    for level in LEVELS {
        let session = Session::builder()
            .with_optimization(level)
            .commit_from_memory(bytes)
            .unwrap_or_else(|e| panic!("{what} {level:?}: {e}"));
        let got = session
            .run(inputs.to_vec())
            .unwrap_or_else(|e| panic!("{what} {level:?}: {e}"))
            .into_tensors();
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(w.shape(), g.shape(), "{what} output {i} {level:?}");
            let w = w.to_f64_vec().unwrap();
            let g = g.to_f64_vec().unwrap();
            let scale = w.iter().fold(1f64, |m, x| m.max(x.abs()));
            let worst = w
                .iter()
                .zip(&g)
                .fold(0f64, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                worst <= 1e-5 * scale,
                "{what} output {i} {level:?}: differs by {worst:e} (scale {scale:e})"
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
    expect_invalid(&model(&case), "BiasGelu", "inputs");
    // What the lowering cannot express is refused, naming the node and why.
    let mut m = ModelBuilder::new(3);
    m.input("q", &[1, 2, 8])
        .input("k", &[1, 2, 8])
        .input("v", &[1, 2, 8])
        .input("past_key", &[1, 2, 1, 4])
        .node(
            "MultiHeadAttention",
            &["q", "k", "v", "", "", "", "past_key"],
            &["y"],
            &[("num_heads", Attr::Int(2))],
        )
        .in_domain("com.microsoft")
        .output("y");
    expect_invalid(
        &m.to_bytes_with(17, &[("com.microsoft", 1)]),
        "MultiHeadAttention",
        "KV cache",
    );
    let mut m = ModelBuilder::new(3);
    m.input("a", &[1, 32])
        .typed_input("b", 2, &[4, 1, 16])
        .positive("scales", &[4], 0.1, 0.2);
    expect_invalid(&matmul_4bits(&mut m, 32, 4), "MatMulNBits", "constant");
}

/// `m` (which has `a`, `b` and `scales`) with a 4-bit `MatMulNBits` of blocks of 32 reading
/// them, serialized.
fn matmul_4bits(m: &mut ModelBuilder, k: i64, n: i64) -> Vec<u8> {
    m.node(
        "MatMulNBits",
        &["a", "b", "scales"],
        &["y"],
        &[
            ("K", Attr::Int(k)),
            ("N", Attr::Int(n)),
            ("block_size", Attr::Int(32)),
        ],
    )
    .in_domain("com.microsoft")
    .output("y");
    m.to_bytes_with(17, &[("com.microsoft", 1)])
}

fn expect_invalid(bytes: &[u8], op: &str, cause: &str) {
    match Session::builder().commit_from_memory(bytes) {
        Err(Error::InvalidNode { op_type, rule, .. }) => {
            assert_eq!(op_type, op);
            assert!(rule.contains(cause), "{rule}");
        }
        other => panic!("{op}: expected InvalidNode, got {other:?}"),
    }
}

/// Seeded bytes, for packed weights.
fn seeded_bytes(n: usize, seed: u64) -> Vec<u8> {
    let floats = seeded_f32(&[n], seed);
    let floats = floats.view::<f32>().unwrap();
    floats.iter().map(|x| ((x + 1.0) * 128.0) as u8).collect()
}

#[test]
fn matmul_nbits_matches_onnx_runtime() {
    // K = 72 is not a multiple of the block: the last block is partial.
    let (k, n) = (72i64, 24i64);
    for (bits, block, zero_points, bias) in [
        (4, 32, "none", false),
        (4, 32, "packed", true),
        (4, 16, "float", false),
        (8, 32, "packed", false),
        (2, 16, "none", false),
    ] {
        let blocks = (k + block - 1) / block;
        let blob = block * bits / 8;
        let mut m = ModelBuilder::new(9);
        m.input("a", &[2, 3, k])
            .bytes(
                "b",
                &[n, blocks, blob],
                &seeded_bytes((n * blocks * blob) as usize, 3),
            )
            .positive("scales", &[n * blocks], 0.01, 0.1);
        let mut inputs = vec!["a", "b", "scales"];
        match zero_points {
            "packed" => {
                let row = (blocks * bits + 7) / 8;
                m.bytes("zp", &[n * row], &seeded_bytes((n * row) as usize, 4));
                inputs.push("zp");
            }
            "float" => {
                m.weight("zp", &[n * blocks], 4.0);
                inputs.push("zp");
            }
            _ => {}
        }
        if bias {
            while inputs.len() < 5 {
                inputs.push("");
            }
            m.weight("bias", &[n], 1.0);
            inputs.push("bias");
        }
        m.node(
            "MatMulNBits",
            &inputs,
            &["y"],
            &[
                ("K", Attr::Int(k)),
                ("N", Attr::Int(n)),
                ("bits", Attr::Int(bits)),
                ("block_size", Attr::Int(block)),
            ],
        )
        .in_domain("com.microsoft")
        .output("y");
        let bytes = m.to_bytes_with(17, &[("com.microsoft", 1)]);
        let a = seeded_f32(&[2, 3, k as usize], 11);
        compare(
            &bytes,
            &[("a".into(), a)],
            &format!("MatMulNBits bits {bits} block {block} zero points {zero_points} bias {bias}"),
        );
    }
}

/// A 0/1 key mask with some keys masked, never all of a row.
fn key_mask(batch: usize, keys: usize) -> Tensor {
    let data = (0..batch * keys)
        .map(|i| i32::from(!(i % keys == keys - 1 || (i / keys == 1 && i % keys == 2))))
        .collect();
    Tensor::from_shape_vec(&[batch, keys], data).unwrap()
}

#[test]
fn attention_matches_onnx_runtime() {
    // [batch 2, sequence 5, hidden 16], 2 heads.
    for (mask, causal, sizes) in [
        ("none", false, None),
        ("2d", false, None),
        ("1d", false, None),
        ("none", true, None),
        ("2d", true, Some([16i64, 16, 8])),
    ] {
        let width = sizes.map_or(48, |s: [i64; 3]| s.iter().sum());
        let mut m = ModelBuilder::new(13);
        m.input("x", &[2, 5, 16])
            .weight("w", &[16, width], 0.4)
            .weight("b", &[width], 0.2);
        let mut names = vec!["x", "w", "b"];
        let mut inputs = vec![("x".to_string(), seeded_f32(&[2, 5, 16], 21))];
        match mask {
            "2d" => {
                m.typed_input("mask", 6, &[2, 5]);
                inputs.push(("mask".into(), key_mask(2, 5)));
                names.push("mask");
            }
            "1d" => {
                m.typed_input("mask", 6, &[2]);
                inputs.push((
                    "mask".into(),
                    Tensor::from_shape_vec(&[2], vec![3i32, 5]).unwrap(),
                ));
                names.push("mask");
            }
            _ => {}
        }
        let mut attrs = vec![
            ("num_heads", Attr::Int(2)),
            ("unidirectional", Attr::Int(i64::from(causal))),
        ];
        if let Some(s) = sizes {
            attrs.push(("qkv_hidden_sizes", Attr::Ints(s.to_vec())));
        }
        m.node("Attention", &names, &["y"], &attrs)
            .in_domain("com.microsoft")
            .output("y");
        compare(
            &m.to_bytes_with(17, &[("com.microsoft", 1)]),
            &inputs,
            &format!("Attention mask {mask} causal {causal} sizes {sizes:?}"),
        );
    }
}

#[test]
fn multi_head_attention_matches_onnx_runtime() {
    // Query [2, 5, 16], key and value [2, 7, 16], 4 heads.
    for (bias, mask, attention_bias, scale) in [
        (false, false, false, None),
        (true, false, false, None),
        (false, true, false, None),
        (true, true, false, None),
        (false, false, true, Some(0.3)),
        (true, true, true, None),
    ] {
        let mut m = ModelBuilder::new(17);
        m.input("q", &[2, 5, 16])
            .input("k", &[2, 7, 16])
            .input("v", &[2, 7, 16]);
        let mut names = vec!["q", "k", "v", "", "", ""];
        let mut inputs = vec![
            ("q".to_string(), seeded_f32(&[2, 5, 16], 31)),
            ("k".to_string(), seeded_f32(&[2, 7, 16], 32)),
            ("v".to_string(), seeded_f32(&[2, 7, 16], 33)),
        ];
        if bias {
            m.weight("bias", &[48], 0.3);
            names[3] = "bias";
        }
        if mask {
            m.typed_input("mask", 6, &[2, 7]);
            inputs.push(("mask".into(), key_mask(2, 7)));
            names[4] = "mask";
        }
        if attention_bias {
            m.weight("attention_bias", &[1, 4, 5, 7], 2.0);
            names[5] = "attention_bias";
        }
        while names.last() == Some(&"") {
            names.pop();
        }
        let mut attrs = vec![("num_heads", Attr::Int(4))];
        if let Some(s) = scale {
            attrs.push(("scale", Attr::Float(s)));
        }
        m.node("MultiHeadAttention", &names, &["y"], &attrs)
            .in_domain("com.microsoft")
            .output("y");
        compare(
            &m.to_bytes_with(17, &[("com.microsoft", 1)]),
            &inputs,
            &format!(
                "MultiHeadAttention bias {bias} mask {mask} attention_bias {attention_bias} scale {scale:?}"
            ),
        );
    }
}

#[test]
fn embed_layer_normalization_matches_onnx_runtime() {
    // Batch 2, sequence 6, hidden 16; a vocabulary of 30, 10 positions, 2 segments.
    let ints = |values: Vec<i32>| Tensor::from_shape_vec(&[2, 6], values).unwrap();
    let ids = ints((0..12).map(|i| (i * 7 + 3) % 30).collect());
    for (segments, mask, position_ids, sum) in [
        (true, true, false, false),
        (false, false, false, false),
        (true, true, true, true),
    ] {
        let mut m = ModelBuilder::new(23);
        m.typed_input("ids", 6, &[2, 6])
            .weight("word", &[30, 16], 1.0)
            .weight("position", &[10, 16], 1.0)
            .weight("segment", &[2, 16], 1.0)
            .weight("gamma", &[16], 1.0)
            .weight("beta", &[16], 1.0);
        let mut inputs = vec![("ids".to_string(), ids.clone())];
        let mut names = vec!["ids", "", "word", "position", "", "gamma", "beta"];
        if segments {
            m.typed_input("segments", 6, &[2, 6]);
            inputs.push((
                "segments".into(),
                ints((0..12).map(|i| i32::from(i % 6 > 2)).collect()),
            ));
            names[1] = "segments";
            names[4] = "segment";
        }
        if mask {
            m.typed_input("mask", 6, &[2, 6]);
            inputs.push((
                "mask".into(),
                ints((0..12).map(|i| i32::from(i != 5 && i < 10)).collect()),
            ));
            names.push("mask");
        }
        if position_ids {
            m.typed_input("position_ids", 6, &[2, 6]);
            inputs.push((
                "position_ids".into(),
                ints((0..12).map(|i| (i * 3) % 10).collect()),
            ));
            while names.len() < 8 {
                names.push("");
            }
            names.push("position_ids");
        }
        let outputs: &[&str] = if sum {
            &["y", "mask_index", "sum"]
        } else {
            &["y", "mask_index"]
        };
        m.node("EmbedLayerNormalization", &names, outputs, &[])
            .in_domain("com.microsoft");
        for out in outputs {
            m.output(out);
        }
        compare(
            &m.to_bytes_with(17, &[("com.microsoft", 1)]),
            &inputs,
            &format!(
                "EmbedLayerNormalization segments {segments} mask {mask} position_ids {position_ids}"
            ),
        );
    }
}

#[test]
fn matmul_nbits_sizes_that_overflow_are_an_error() {
    let mut m = ModelBuilder::new(3);
    m.input("a", &[1, 32])
        .bytes("b", &[1, 1, 16], &[0; 16])
        .positive("scales", &[1], 0.1, 0.2);
    expect_invalid(
        &matmul_4bits(&mut m, 1 << 62, 1 << 62),
        "MatMulNBits",
        "bytes",
    );
}
