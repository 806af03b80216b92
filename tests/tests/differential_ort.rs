//! Differential tests against ONNX Runtime 1.31.1: the 9 whole models in the onnx wheel's
//! `light/` folder, the bundled small model, and small models built here. Every float output
//! must be within relative L2 error 1e-4 of ORT's on the same seeded input.

use std::path::Path;
use std::time::Duration;

use spillway::{CopyCost, Devices, Placement, Session};
use spillway_kernels::Tensor;
use spillway_tests::build::{Attr, ModelBuilder};
use spillway_tests::oracle::{Oracle, OrtConfig};
use spillway_tests::redraw::redraw_weights;
use spillway_tests::{
    max_relative_difference, onnx_test_data, relative_l2, seeded_inputs, seeded_inputs_from,
    workspace_root,
};

const TOLERANCE: f64 = 1e-4;

/// Models known to differ from ORT beyond tolerance, with the reason. Like the conformance list,
/// this only shrinks: the test fails when a listed model comes within tolerance.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

/// Runs both engines and returns the worst relative L2 error over the outputs.
fn compare(label: &str, session: &Session, oracle: &mut Oracle, batch: usize) -> f64 {
    compare_inputs(label, session, oracle, seeded_inputs(session, batch))
}

fn compare_inputs(
    label: &str,
    session: &Session,
    oracle: &mut Oracle,
    inputs: Vec<(String, Tensor)>,
) -> f64 {
    let ours = session
        .run(inputs.clone())
        .unwrap_or_else(|e| panic!("{label}: spillway: {e}"));
    let theirs = oracle
        .run(&inputs)
        .unwrap_or_else(|e| panic!("{label}: ORT: {e}"));
    assert_eq!(ours.len(), theirs.len(), "{label}: output count");
    let mut worst = 0.0f64;
    for (i, (name, t)) in ours.iter().enumerate() {
        assert_eq!(t.dtype(), theirs[i].dtype(), "{label}: output {name} dtype");
        let err =
            relative_l2(&theirs[i], t).unwrap_or_else(|e| panic!("{label}: output {name}: {e}"));
        worst = spillway_tests::worse(worst, err);
    }
    worst
}

/// ORT against itself (graph optimizations on vs off) on the same input: how much float
/// reordering alone moves this model's outputs.
fn ort_self_disagreement(path: &Path, session: &Session) -> f64 {
    let inputs = seeded_inputs(session, 1);
    let a = Oracle::load(path, OrtConfig::default())
        .unwrap()
        .run(&inputs)
        .unwrap();
    let b = Oracle::load(
        path,
        OrtConfig {
            optimize: false,
            ..OrtConfig::default()
        },
    )
    .unwrap()
    .run(&inputs)
    .unwrap();
    a.iter()
        .zip(&b)
        .map(|(x, y)| relative_l2(x, y).unwrap())
        .fold(0.0, spillway_tests::worse)
}

/// Rows: (model, our error, ORT's own disagreement). A model passes when our error is within
/// 1e-4, or within twice what ORT's two configurations disagree by (deep models with
/// degenerate constant weights amplify summation-order differences; ORT shows the same).
fn check_table(rows: &[(String, f64, f64)]) {
    println!(
        "| model | worst relative L2 error vs ORT | ORT optimized vs unoptimized |\n| --- | --- | --- |"
    );
    for (name, err, own) in rows {
        println!("| {name} | {err:.2e} | {own:.2e} |");
    }
    let outside = |(_, e, own): &&(String, f64, f64)| e.is_nan() || *e > TOLERANCE.max(2.0 * own);
    let known = |name: &str| KNOWN_DIFFERENCES.iter().any(|(k, _)| *k == name);
    let bad: Vec<_> = rows.iter().filter(|r| outside(r) && !known(&r.0)).collect();
    let fixed: Vec<_> = rows
        .iter()
        .filter(|r| !outside(r) && known(&r.0))
        .map(|r| &r.0)
        .collect();
    assert!(
        fixed.is_empty(),
        "now within tolerance, remove from KNOWN_DIFFERENCES: {fixed:?}"
    );
    assert!(
        bad.is_empty(),
        "relative L2 error above {TOLERANCE}: {bad:?}"
    );
}

/// The 9 light models of the onnx wheel with their weights re-drawn (their own make outputs
/// that do not depend on the input; see `spillway_tests::redraw`), written once per test
/// process to `target/light-redrawn/` (1.3 GB: rewritten, not accumulated), then the
/// bundled small model.
fn light_models() -> Vec<std::path::PathBuf> {
    static MODELS: std::sync::OnceLock<Vec<std::path::PathBuf>> = std::sync::OnceLock::new();
    MODELS.get_or_init(write_light_models).clone()
}

fn write_light_models() -> Vec<std::path::PathBuf> {
    let dir = onnx_test_data().join("light");
    let mut models: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .collect();
    models.sort();
    assert_eq!(
        models.len(),
        9,
        "the onnx 1.22.0 wheel ships 9 light models"
    );
    let scratch = workspace_root().join("target/light-redrawn");
    std::fs::create_dir_all(&scratch).unwrap();
    let mut models: Vec<_> = models
        .iter()
        .enumerate()
        .map(|(i, path)| {
            let redrawn = scratch.join(path.file_name().unwrap());
            let bytes = std::fs::read(path).unwrap();
            std::fs::write(&redrawn, redraw_weights(&bytes, 1 + i as u64)).unwrap();
            redrawn
        })
        .collect();
    models.push(workspace_root().join("models/small/inception_block.onnx"));
    models
}

/// Whether two different inputs give different outputs: a comparison on a model whose
/// outputs are constant checks little more than shapes; such models are named in the output.
fn input_dependent(label: &str, session: &Session) -> bool {
    let a = session.run(seeded_inputs_from(session, 1, 1)).unwrap();
    let b = session.run(seeded_inputs_from(session, 1, 2)).unwrap();
    let moved = a
        .iter()
        .zip(b.iter())
        .map(|((_, x), (_, y))| relative_l2(x, y).unwrap())
        .fold(0.0, spillway_tests::worse);
    if moved <= 1e-6 {
        println!("NOT INPUT-DEPENDENT: {label} ({moved:.1e})");
    }
    moved > 1e-6
}

#[test]
fn light_models_match_onnx_runtime() {
    let models = light_models();
    let mut dependent = 0;
    let rows: Vec<(String, f64, f64)> = models
        .iter()
        .map(|path| {
            let label = path.file_stem().unwrap().to_string_lossy().to_string();
            let session = Session::builder()
                .commit_from_file(path)
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            dependent += usize::from(input_dependent(&label, &session));
            let mut oracle = Oracle::load(Path::new(path), OrtConfig::default()).unwrap();
            let err = compare(&label, &session, &mut oracle, 1);
            (label.clone(), err, ort_self_disagreement(path, &session))
        })
        .collect();
    assert_eq!(
        dependent,
        models.len(),
        "a model's outputs do not depend on its input (named above): comparing them checks \
         little more than shapes"
    );
    check_table(&rows);
}

/// The light models again, each run twice on one session: the second run's intermediates are
/// written into the shared buffers the first run left (holding the first run's values), and
/// must still match ORT on the second run's (different) inputs. Both executors: the sequential
/// one, and the parallel one on two CPU lanes and a Virtual device (buffers per device).
#[test]
fn light_models_match_onnx_runtime_when_buffers_are_reused() {
    let models = light_models();
    let link = CopyCost {
        latency: Duration::from_micros(5),
        bandwidth_bytes_per_s: 4e9,
    };
    let mut reused_total = 0;
    for path in &models {
        let label = path.file_stem().unwrap().to_string_lossy().to_string();
        let sequential = Session::builder().commit_from_file(path).unwrap();
        let parallel = Session::builder()
            .with_devices(Devices::cpu().with_cpu_lanes(2).with_virtual(1, link))
            .with_placement(Placement::Greedy)
            .commit_from_file(path)
            .unwrap();
        let inputs = seeded_inputs_from(&sequential, 1, 1001);
        let theirs = Oracle::load(path, OrtConfig::default())
            .unwrap()
            .run(&inputs)
            .unwrap();
        let own = ort_self_disagreement(path, &sequential);
        for (engine, session) in [("sequential", &sequential), ("parallel", &parallel)] {
            let (_, first) = session.run_with_stats(seeded_inputs(session, 1)).unwrap();
            let (ours, second) = session.run_with_stats(inputs.clone()).unwrap();
            for (i, (name, t)) in ours.iter().enumerate() {
                let err = relative_l2(&theirs[i], t).unwrap();
                assert!(
                    err <= TOLERANCE.max(2.0 * own),
                    "{label} ({engine}): output {name}: relative L2 error {err:.2e} after reuse"
                );
            }
            if engine == "sequential" {
                println!(
                    "{label}: outputs into reused buffers: first run {}, second run {}",
                    first.reused_outputs, second.reused_outputs
                );
                assert!(
                    second.reused_outputs >= first.reused_outputs,
                    "{label}: the second run finds the first run's buffers"
                );
                reused_total += second.reused_outputs;
            }
        }
    }
    assert!(
        reused_total > 0,
        "no output was written into a reused buffer"
    );
}

/// Small models that exercise the passes: BatchNorm folding, constant folding of the
/// Shape→Gather→Concat→Reshape chain exporters emit, identity/dropout removal, broadcasting.
fn built_models() -> Vec<(&'static str, Vec<u8>, usize)> {
    let mut out = Vec::new();

    let mut m = ModelBuilder::new(1);
    m.input("x", &[-1, 3, 16, 16])
        .weight("w", &[8, 3, 3, 3], 0.5)
        .weight("b", &[8], 0.1)
        .positive("scale", &[8], 0.5, 1.5)
        .weight("shift", &[8], 0.2)
        .weight("mean", &[8], 0.2)
        .positive("var", &[8], 0.5, 2.0)
        .node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .node(
            "BatchNormalization",
            &["c", "scale", "shift", "mean", "var"],
            &["bn"],
            &[("epsilon", Attr::Float(1e-3))],
        )
        .node("Identity", &["bn"], &["id"], &[])
        .node("Relu", &["id"], &["y"], &[])
        .output("y");
    out.push(("conv_bn_relu", m.to_bytes(13), 2));

    let mut m = ModelBuilder::new(2);
    m.input("x", &[-1, 4, 6])
        .ints("idx", &[0])
        .ints("minus_one", &[-1])
        .node("Shape", &["x"], &["s"], &[])
        .node("Gather", &["s", "idx"], &["n"], &[("axis", Attr::Int(0))])
        .node(
            "Concat",
            &["n", "minus_one"],
            &["new_shape"],
            &[("axis", Attr::Int(0))],
        )
        .node("Reshape", &["x", "new_shape"], &["flat"], &[])
        .weight("fc", &[24, 5], 0.3)
        .node("MatMul", &["flat", "fc"], &["h"], &[])
        .node("Dropout", &["h"], &["d"], &[])
        .node("Softmax", &["d"], &["y"], &[("axis", Attr::Int(-1))])
        .output("y");
    out.push(("shape_chain_matmul", m.to_bytes(13), 3));

    let mut m = ModelBuilder::new(3);
    m.input("x", &[1, 8, 10, 10])
        .weight("w1", &[8, 8, 3, 3], 0.3)
        .weight("w2", &[8, 1, 3, 3], 0.5)
        .weight("gamma", &[8, 1, 1], 1.0)
        .node(
            "Conv",
            &["x", "w1"],
            &["a"],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .node("Relu", &["a"], &["ar"], &[])
        .node(
            "Conv",
            &["ar", "w2"],
            &["dw"],
            &[
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
                ("group", Attr::Int(8)),
            ],
        )
        .node("Mul", &["dw", "gamma"], &["scaled"], &[])
        .node("Add", &["scaled", "x"], &["res"], &[])
        .node(
            "MaxPool",
            &["res"],
            &["p"],
            &[
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("strides", Attr::Ints(vec![2, 2])),
            ],
        )
        .node("GlobalAveragePool", &["p"], &["y"], &[])
        .output("y");
    out.push(("residual_depthwise", m.to_bytes(13), 1));

    let mut m = ModelBuilder::new(4);
    m.input("x", &[1, 6, 16])
        .weight("wq", &[16, 16], 0.25)
        .weight("wk", &[16, 16], 0.25)
        .positive("ln_scale", &[16], 0.8, 1.2)
        .weight("ln_bias", &[16], 0.1)
        .node("MatMul", &["x", "wq"], &["q"], &[])
        .node("MatMul", &["x", "wk"], &["k"], &[])
        .node(
            "Transpose",
            &["k"],
            &["kt"],
            &[("perm", Attr::Ints(vec![0, 2, 1]))],
        )
        .node("MatMul", &["q", "kt"], &["scores"], &[])
        .node(
            "Softmax",
            &["scores"],
            &["attn"],
            &[("axis", Attr::Int(-1))],
        )
        .node("MatMul", &["attn", "x"], &["ctx"], &[])
        .node("Add", &["ctx", "x"], &["res"], &[])
        .node(
            "LayerNormalization",
            &["res", "ln_scale", "ln_bias"],
            &["y"],
            &[("axis", Attr::Int(-1))],
        )
        .output("y");
    out.push(("attention_layernorm", m.to_bytes(17), 1));

    // Enough images that they run in parallel, one product each (with a fused residual).
    let mut m = ModelBuilder::new(5);
    m.input("x", &[-1, 8, 10, 10])
        .input("z", &[-1, 12, 10, 10])
        .weight("w", &[12, 8, 3, 3], 0.3)
        .weight("b", &[12], 0.1)
        .node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            &[("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        )
        .node("Add", &["c", "z"], &["sum"], &[])
        .node("Relu", &["sum"], &["y"], &[])
        .output("y");
    out.push(("batched_conv_residual", m.to_bytes(13), 9));
    out
}

/// One row of a [`check_table`]: the model `bytes` run by both engines at `batch`.
fn compare_built(label: String, bytes: &[u8], batch: usize) -> (String, f64, f64) {
    let session = Session::builder()
        .commit_from_memory(bytes)
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let mut oracle = Oracle::load_bytes(bytes, OrtConfig::default()).unwrap();
    let err = compare(&label, &session, &mut oracle, batch);
    (label, err, 0.0)
}

#[test]
fn built_models_match_onnx_runtime() {
    let rows: Vec<(String, f64, f64)> = built_models()
        .into_iter()
        .map(|(label, bytes, batch)| compare_built(label.to_string(), &bytes, batch))
        .collect();
    check_table(&rows);
}

/// MaxPool and AveragePool (padding counted and not) over the geometries the pooling fast
/// paths tell apart: "same" unit-stride windows (flat passes over all planes, including
/// planes smaller than the window, planes spanning several blocks, and even or asymmetric
/// windows), strided and `ceil_mode` windows (row by row), and 1×1 windows. Checks every output against ORT on negative and positive inputs.
#[test]
fn pooling_geometries_match_onnx_runtime() {
    // (height, width, kernel, stride, pads [top, left, bottom, right], ceil_mode)
    type Geometry = (i64, i64, i64, i64, [i64; 4], i64);
    let geometries: &[Geometry] = &[
        (7, 7, 3, 1, [1, 1, 1, 1], 0),
        (7, 7, 3, 1, [1, 1, 1, 1], 1),
        (14, 14, 3, 1, [1, 1, 1, 1], 0),
        (5, 9, 3, 1, [1, 1, 1, 1], 0),
        (8, 8, 5, 1, [2, 2, 2, 2], 0),
        (6, 7, 4, 1, [1, 2, 2, 1], 0),
        (2, 2, 3, 1, [1, 1, 1, 1], 0),
        (1, 1, 3, 1, [1, 1, 1, 1], 0),
        (1, 5, 3, 1, [1, 1, 1, 1], 0),
        (7, 7, 3, 1, [0, 0, 0, 0], 0),
        (10, 10, 1, 1, [0, 0, 0, 0], 0),
        // "Same" windows whose planes span several of the flat path's blocks.
        (40, 100, 3, 1, [1, 1, 1, 1], 0),
        (7, 700, 3, 1, [1, 1, 1, 1], 0),
        (9, 300, 5, 1, [2, 1, 2, 3], 0),
        (28, 28, 3, 2, [0, 0, 0, 0], 1),
        (13, 13, 3, 2, [0, 0, 0, 0], 1),
        (16, 16, 3, 2, [1, 1, 1, 1], 0),
        (9, 9, 2, 2, [0, 0, 0, 0], 0),
        (10, 10, 3, 3, [1, 1, 1, 1], 0),
        // Stride-2 windows over rows longer than 16 and 32 outputs, odd and even widths,
        // asymmetric padding, images smaller than the window.
        (112, 112, 3, 2, [0, 0, 0, 0], 1),
        (9, 67, 3, 2, [1, 0, 0, 1], 0),
        (11, 64, 3, 2, [1, 1, 1, 1], 0),
        (5, 34, 2, 2, [0, 0, 0, 0], 1),
        (2, 2, 3, 2, [1, 1, 1, 1], 0),
        (3, 3, 2, 2, [1, 1, 1, 1], 0),
    ];
    let mut rows = Vec::new();
    for &(h, w, k, s, pads, ceil) in geometries {
        let label = format!("{h}x{w} k{k} s{s} pads {pads:?} ceil {ceil}");
        let window = |extra: Vec<(&'static str, Attr)>| {
            let mut attrs = vec![
                ("kernel_shape", Attr::Ints(vec![k, k])),
                ("strides", Attr::Ints(vec![s, s])),
                ("pads", Attr::Ints(pads.to_vec())),
                ("ceil_mode", Attr::Int(ceil)),
            ];
            attrs.extend(extra);
            attrs
        };
        let mut m = ModelBuilder::new(5);
        m.input("x", &[2, 3, h, w])
            .node("MaxPool", &["x"], &["max"], &window(vec![]))
            .node("AveragePool", &["x"], &["avg"], &window(vec![]))
            .node(
                "AveragePool",
                &["x"],
                &["avg_pad"],
                &window(vec![("count_include_pad", Attr::Int(1))]),
            )
            .output("max")
            .output("avg")
            .output("avg_pad");
        rows.push(compare_built(label, &m.to_bytes(19), 2));
    }
    check_table(&rows);
}

/// Depthwise convolutions over the geometries the direct kernel treats differently: unit and
/// larger strides (even, odd and mixed), dilation, asymmetric and no padding, images smaller
/// than the kernel, 1×k kernels, channel multipliers, 1-d images; with and without a bias,
/// and with a fused residual add and Relu. Checks every output against ORT.
#[test]
fn depthwise_geometries_match_onnx_runtime() {
    struct Case {
        image: &'static [i64],
        kernel: &'static [i64],
        strides: &'static [i64],
        dilations: &'static [i64],
        pads: &'static [i64],
        multiplier: i64,
        bias: bool,
        residual: bool,
    }
    let case = |image, kernel, strides, pads| Case {
        image,
        kernel,
        strides,
        dilations: if image.len() == 2 { &[1, 1] } else { &[1] },
        pads,
        multiplier: 1,
        bias: true,
        residual: false,
    };
    let cases = [
        case(&[14, 14], &[3, 3], &[1, 1], &[1, 1, 1, 1]),
        case(&[7, 7], &[3, 3], &[1, 1], &[1, 1, 1, 1]),
        case(&[15, 15], &[3, 3], &[2, 2], &[1, 1, 1, 1]),
        case(&[16, 16], &[3, 3], &[2, 2], &[0, 0, 1, 1]),
        case(&[9, 11], &[5, 5], &[1, 1], &[2, 2, 2, 2]),
        case(&[10, 13], &[3, 3], &[3, 3], &[1, 1, 1, 1]),
        case(&[6, 20], &[3, 3], &[1, 2], &[1, 1, 1, 1]),
        case(&[5, 5], &[3, 3], &[2, 2], &[0, 0, 0, 0]),
        case(&[2, 2], &[3, 3], &[1, 1], &[1, 1, 1, 1]),
        case(&[8, 8], &[1, 7], &[1, 1], &[0, 3, 0, 3]),
        case(&[21], &[5], &[2], &[2, 2]),
        Case {
            dilations: &[2, 2],
            ..case(&[12, 12], &[3, 3], &[1, 1], &[2, 2, 2, 2])
        },
        Case {
            multiplier: 2,
            bias: false,
            ..case(&[9, 9], &[3, 3], &[1, 1], &[1, 1, 1, 1])
        },
        Case {
            residual: true,
            ..case(&[14, 14], &[3, 3], &[1, 1], &[1, 1, 1, 1])
        },
        Case {
            residual: true,
            bias: false,
            ..case(&[13, 13], &[3, 3], &[2, 2], &[1, 1, 1, 1])
        },
    ];
    let channels = 6;
    let mut rows = Vec::new();
    for c in &cases {
        let label = format!(
            "{:?} k{:?} s{:?} d{:?} pads {:?} x{} bias {} residual {}",
            c.image, c.kernel, c.strides, c.dilations, c.pads, c.multiplier, c.bias, c.residual
        );
        let rank = c.image.len();
        let out: Vec<i64> = (0..rank)
            .map(|d| {
                let span = c.dilations[d] * (c.kernel[d] - 1) + 1;
                (c.image[d] + c.pads[d] + c.pads[d + rank] - span) / c.strides[d] + 1
            })
            .collect();
        let out_ch = channels * c.multiplier;
        let shape = |ch: i64, dims: &[i64]| [&[2, ch][..], dims].concat();
        let mut w_shape = vec![out_ch, 1];
        w_shape.extend_from_slice(c.kernel);
        let mut m = ModelBuilder::new(6);
        m.input("x", &shape(channels, c.image))
            .weight("w", &w_shape, 0.5)
            .weight("b", &[out_ch], 0.2);
        let inputs: &[&str] = if c.bias {
            &["x", "w", "b"]
        } else {
            &["x", "w"]
        };
        let attrs = vec![
            ("kernel_shape", Attr::Ints(c.kernel.to_vec())),
            ("strides", Attr::Ints(c.strides.to_vec())),
            ("dilations", Attr::Ints(c.dilations.to_vec())),
            ("pads", Attr::Ints(c.pads.to_vec())),
            ("group", Attr::Int(channels)),
        ];
        m.node("Conv", inputs, &["conv"], &attrs);
        if c.residual {
            m.input("z", &shape(out_ch, &out))
                .node("Add", &["conv", "z"], &["sum"], &[])
                .node("Relu", &["sum"], &["y"], &[])
                .output("y");
        } else {
            m.output("conv");
        }
        rows.push(compare_built(label, &m.to_bytes(17), 2));
    }
    check_table(&rows);
}

/// ConvTranspose over the geometries its output paths tell apart: strides equal to the kernel
/// without padding (every output one tap of one input, written in place: Mask R-CNN's 2×2,
/// stride-2 upsampling, also with groups, no bias, and a 3×1 kernel), and overlapping or
/// padded windows (added up through col2im: a 3×3 kernel at stride 2 with padding and
/// `output_padding`, a 2×2 stride-2 kernel with `output_padding`, a 1-d image). Several images
/// per batch (they run in parallel). Checks every output against ORT.
#[test]
fn conv_transpose_geometries_match_onnx_runtime() {
    // (image, kernel, strides, pads, output_padding, group, bias)
    type Geometry = (
        &'static [i64],
        &'static [i64],
        &'static [i64],
        &'static [i64],
        &'static [i64],
        i64,
        bool,
    );
    let geometries: &[Geometry] = &[
        (&[5, 7], &[2, 2], &[2, 2], &[0, 0, 0, 0], &[0, 0], 1, true),
        (&[4, 4], &[2, 2], &[2, 2], &[0, 0, 0, 0], &[0, 0], 2, true),
        (&[6, 3], &[2, 2], &[2, 2], &[0, 0, 0, 0], &[0, 0], 1, false),
        (&[3, 5], &[3, 1], &[3, 1], &[0, 0, 0, 0], &[0, 0], 1, true),
        (&[5, 6], &[3, 3], &[2, 2], &[1, 1, 1, 1], &[1, 1], 1, true),
        (&[4, 4], &[2, 2], &[2, 2], &[0, 0, 0, 0], &[1, 1], 1, true),
        (&[9], &[4], &[2], &[1, 1], &[0], 1, true),
    ];
    let (in_ch, out_per_group) = (4, 3);
    let mut rows = Vec::new();
    for &(image, kernel, strides, pads, output_padding, group, bias) in geometries {
        let label = format!(
            "{image:?} k{kernel:?} s{strides:?} pads {pads:?} out_pad {output_padding:?} \
             group {group} bias {bias}"
        );
        let mut w_shape = vec![in_ch, out_per_group];
        w_shape.extend_from_slice(kernel);
        let mut m = ModelBuilder::new(8);
        m.input("x", &[&[3, in_ch][..], image].concat())
            .weight("w", &w_shape, 0.5)
            .weight("b", &[out_per_group * group], 0.2);
        let inputs: &[&str] = if bias { &["x", "w", "b"] } else { &["x", "w"] };
        let attrs = vec![
            ("kernel_shape", Attr::Ints(kernel.to_vec())),
            ("strides", Attr::Ints(strides.to_vec())),
            ("pads", Attr::Ints(pads.to_vec())),
            ("output_padding", Attr::Ints(output_padding.to_vec())),
            ("group", Attr::Int(group)),
        ];
        m.node("ConvTranspose", inputs, &["y"], &attrs).output("y");
        rows.push(compare_built(label, &m.to_bytes(17), 3));
    }
    check_table(&rows);
}

/// `Resize` over the geometries detectors use (a photo scaled to a detector's input size, up
/// and down; FPN's nearest ×2) and the other coordinate modes, against ORT to within
/// rounding: the largest difference may be 1e-6 on inputs in [-1, 1). ORT computes a float
/// tensor's scales and source coordinates in `f32`; coordinates computed in `f64` put the
/// samples up to 3e-5 of a pixel elsewhere on a 640-pixel axis and change values by 1e-4,
/// which a detector's backbone amplifies into different proposals.
#[test]
fn resize_geometries_match_onnx_runtime() {
    // (input h, w, output h, w, mode, coordinate_transformation_mode)
    type Geometry = (i64, i64, i64, i64, &'static str, &'static str);
    let geometries: &[Geometry] = &[
        (480, 640, 320, 427, "linear", "half_pixel"),
        (480, 640, 800, 1067, "linear", "half_pixel"),
        (37, 53, 91, 17, "linear", "pytorch_half_pixel"),
        (37, 53, 64, 80, "linear", "align_corners"),
        (37, 53, 20, 100, "linear", "asymmetric"),
        (25, 38, 50, 76, "nearest", "asymmetric"),
        (37, 53, 91, 17, "nearest", "half_pixel"),
        (37, 53, 64, 80, "cubic", "half_pixel"),
    ];
    for &(h, w, oh, ow, mode, coordinates) in geometries {
        let label = format!("{h}x{w} -> {oh}x{ow} {mode} {coordinates}");
        let mut m = ModelBuilder::new(3);
        m.input("x", &[1, 3, h, w])
            .ints("sizes", &[1, 3, oh, ow])
            .node(
                "Resize",
                &["x", "", "", "sizes"],
                &["y"],
                &[
                    ("mode", Attr::Str(mode)),
                    ("coordinate_transformation_mode", Attr::Str(coordinates)),
                    ("nearest_mode", Attr::Str("floor")),
                ],
            )
            .output("y");
        let bytes = m.to_bytes(19);
        let session = Session::builder().commit_from_memory(&bytes).unwrap();
        let inputs = vec![(
            "x".to_string(),
            spillway_tests::seeded_f32(&[1, 3, h as usize, w as usize], 5),
        )];
        let ours = session.run(inputs.clone()).unwrap().into_tensors();
        let theirs = Oracle::load_bytes(&bytes, OrtConfig::default())
            .unwrap()
            .run(&inputs)
            .unwrap();
        let difference = max_relative_difference(&theirs[0], &ours[0]).unwrap();
        println!("resize {label}: largest difference {difference:.2e}");
        assert!(
            difference <= 1e-6,
            "{label}: differs from ORT by {difference:.2e}"
        );
    }
}
