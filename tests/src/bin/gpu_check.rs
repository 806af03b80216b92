//! `gpu_check OUT_DIR [NODE_TEST_DIR]` (or `gpu_check --copy-node-tests SRC DST`, which copies
//! the node tests it would run, for a GPU machine whose `onnx` has no test data): every GPU kernel against the CPU kernel of the same node, on seeded
//! inputs in the shapes the model zoo uses, on GPU 0. Writes `gpu_check.json` and
//! `gpu_check.md` (per case: largest absolute and relative difference, pass/fail, the GPU's
//! median time per launch from CUDA events after warm-up) and exits 0 when every case
//! passes, 1 when one fails, 2 when CUDA is unavailable (the reason is printed). Given the
//! ONNX backend node-test folder (`onnx/backend/test/data/node`), it also runs every
//! single-node test of an op with a GPU kernel and writes `node_tests.{md,json}`.
//!
//! Build with `--features cuda`; `scripts/gpu_run.sh` runs it on the GPU machine.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use spillway_kernels::cuda::host::{tensor_bytes, tensor_from_bytes};
use spillway_kernels::cuda::memory::aligned;
use spillway_kernels::cuda::ops::{self, GpuIo, GpuNode, TensorDesc};
use spillway_kernels::cuda::{CudaError, DeviceArena, DeviceRegion, Gpu, GpuOptions, probe};
use spillway_kernels::{AttrValue, Attributes, NodeSpec, Tensor};
use spillway_tests::seeded_f32;

/// One node to check.
struct Case {
    op: &'static str,
    opset: i64,
    attrs: Attributes,
    inputs: Vec<Option<Tensor>>,
    /// Which inputs are initializers (their host values are given to the GPU builder).
    constant: Vec<bool>,
    /// How many outputs the node has.
    outputs: usize,
}

fn attrs(list: &[(&str, AttrValue)]) -> Attributes {
    let mut a = Attributes::new();
    for (name, value) in list {
        a.insert(name, value.clone());
    }
    a
}

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

fn f(shape: &[usize], seed: u64) -> Option<Tensor> {
    Some(seeded_f32(shape, seed))
}

/// Positive floats in [0.5, 1.5) (variances, Sqrt/Log inputs).
fn positive(shape: &[usize], seed: u64) -> Option<Tensor> {
    let t = seeded_f32(shape, seed);
    Some(Tensor::F32(
        t.to_f32_array()
            .unwrap()
            .mapv(|v| v * 0.5 + 1.0)
            .into_shared(),
    ))
}

fn i64s(shape: &[usize], seed: u64) -> Option<Tensor> {
    let t = seeded_f32(shape, seed).to_f32_array().unwrap();
    Some(Tensor::I64(t.mapv(|v| (v * 50.0) as i64).into_shared()))
}

fn case(
    op: &'static str,
    opset: i64,
    a: &[(&str, AttrValue)],
    inputs: Vec<Option<Tensor>>,
) -> Case {
    let n = inputs.len();
    Case {
        op,
        opset,
        attrs: attrs(a),
        inputs,
        constant: vec![false; n],
        outputs: 1,
    }
}

fn with_constants(mut c: Case, which: &[usize]) -> Case {
    for &i in which {
        c.constant[i] = true;
    }
    c
}

fn cases() -> Vec<Case> {
    let x4 = [2, 16, 14, 14];
    let mut all = Vec::new();
    for op in [
        "Relu",
        "Sigmoid",
        "Tanh",
        "HardSwish",
        "Elu",
        "Selu",
        "Softplus",
        "Exp",
        "Erf",
        "Gelu",
        "Round",
        "Abs",
        "Neg",
        "Floor",
        "Softsign",
    ] {
        let opset = if op == "Gelu" { 20 } else { 17 };
        all.push(case(op, opset, &[], vec![f(&x4, 1)]));
    }
    all.push(case(
        "LeakyRelu",
        17,
        &[("alpha", AttrValue::Float(0.1))],
        vec![f(&x4, 2)],
    ));
    all.push(case("Sqrt", 17, &[], vec![positive(&x4, 3)]));
    all.push(case("Log", 17, &[], vec![positive(&x4, 4)]));
    all.push(case("Abs", 17, &[], vec![i64s(&[1000], 5)]));
    all.push(case(
        "Clip",
        6,
        &[
            ("min", AttrValue::Float(0.0)),
            ("max", AttrValue::Float(0.5)),
        ],
        vec![f(&x4, 6)],
    ));
    all.push(with_constants(
        case(
            "Clip",
            13,
            &[],
            vec![
                f(&x4, 7),
                Some(Tensor::scalar(-0.25f32)),
                Some(Tensor::scalar(0.25f32)),
            ],
        ),
        &[1, 2],
    ));
    all.push(case(
        "Cast",
        19,
        &[("to", AttrValue::Int(7))],
        vec![f(&x4, 8)],
    ));
    all.push(case(
        "Cast",
        19,
        &[("to", AttrValue::Int(1))],
        vec![i64s(&[64], 9)],
    ));
    // Binary operators: same shape, channel broadcast, scalar, rank-3 broadcast.
    for op in [
        "Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "Greater",
    ] {
        all.push(case(op, 14, &[], vec![f(&x4, 10), f(&x4, 11)]));
    }
    all.push(case(
        "Add",
        14,
        &[],
        vec![f(&x4, 12), f(&[1, 16, 1, 1], 13)],
    ));
    all.push(case("Mul", 14, &[], vec![f(&x4, 14), f(&[], 15)]));
    all.push(case(
        "Sub",
        14,
        &[],
        vec![f(&[5, 1, 7], 16), f(&[3, 1], 17)],
    ));
    all.push(case("Pow", 15, &[], vec![positive(&x4, 18), f(&[1], 19)]));
    all.push(case("PRelu", 16, &[], vec![f(&x4, 20), f(&[16, 1, 1], 21)]));
    all.push(case(
        "Mod",
        13,
        &[],
        vec![i64s(&[6, 7], 22), Some(Tensor::scalar(7i64))],
    ));
    all.push(case(
        "Where",
        16,
        &[],
        vec![
            Some(Tensor::from_shape_vec(&[4, 1], vec![true, false, true, false]).unwrap()),
            f(&[4, 6], 23),
            f(&[6], 24),
        ],
    ));
    // Convolutions in the zoo's shapes.
    let conv = |x: &[usize], w: &[usize], bias: bool, a: &[(&str, AttrValue)], seed: u64| {
        let mut inputs = vec![f(x, seed), f(w, seed + 1)];
        if bias {
            inputs.push(f(&[w[0]], seed + 2));
        }
        case("Conv", 11, a, inputs)
    };
    all.push(conv(
        &[1, 64, 56, 56],
        &[64, 64, 3, 3],
        true,
        &[("pads", ints(&[1, 1, 1, 1]))],
        30,
    ));
    all.push(conv(
        &[1, 3, 224, 224],
        &[64, 3, 7, 7],
        false,
        &[("pads", ints(&[3, 3, 3, 3])), ("strides", ints(&[2, 2]))],
        31,
    ));
    all.push(conv(&[1, 256, 14, 14], &[512, 256, 1, 1], true, &[], 32));
    all.push(conv(
        &[1, 32, 28, 28],
        &[32, 1, 3, 3],
        true,
        &[("pads", ints(&[1, 1, 1, 1])), ("group", AttrValue::Int(32))],
        33,
    ));
    all.push(conv(
        &[1, 16, 20, 20],
        &[16, 16, 3, 3],
        false,
        &[("pads", ints(&[2, 2, 2, 2])), ("dilations", ints(&[2, 2]))],
        34,
    ));
    all.push(conv(
        &[2, 8, 50],
        &[16, 8, 5],
        true,
        &[("pads", ints(&[2, 2]))],
        35,
    ));
    // Transposed convolutions: Mask R-CNN's 2×2 stride-2 upsampling of 14² RoI features,
    // and padded, grouped, dilated and 1-D ones.
    // `bias`: the output channel count, when the case has a bias.
    let transposed =
        |x: &[usize], w: &[usize], bias: Option<usize>, a: &[(&str, AttrValue)], seed| {
            let mut inputs = vec![f(x, seed), f(w, seed + 1)];
            if let Some(channels) = bias {
                inputs.push(f(&[channels], seed + 2));
            }
            case("ConvTranspose", 11, a, inputs)
        };
    all.push(transposed(
        &[8, 256, 14, 14],
        &[256, 256, 2, 2],
        Some(256),
        &[("strides", ints(&[2, 2]))],
        36,
    ));
    all.push(transposed(
        &[1, 16, 10, 10],
        &[16, 8, 3, 3],
        Some(16),
        &[
            ("strides", ints(&[2, 2])),
            ("pads", ints(&[1, 1, 1, 1])),
            ("output_padding", ints(&[1, 1])),
            ("group", AttrValue::Int(2)),
        ],
        37,
    ));
    all.push(transposed(
        &[1, 8, 9, 9],
        &[8, 4, 3, 3],
        None,
        &[("dilations", ints(&[2, 2])), ("pads", ints(&[2, 2, 2, 2]))],
        38,
    ));
    all.push(transposed(
        &[2, 8, 20],
        &[8, 4, 5],
        Some(4),
        &[("strides", ints(&[3])), ("pads", ints(&[2, 2]))],
        39,
    ));
    // Matrix products.
    all.push(case(
        "MatMul",
        13,
        &[],
        vec![f(&[1, 128, 256], 40), f(&[256, 512], 41)],
    ));
    all.push(case(
        "MatMul",
        13,
        &[],
        vec![f(&[4, 64, 32], 42), f(&[4, 32, 48], 43)],
    ));
    all.push(case(
        "Gemm",
        13,
        &[("transB", AttrValue::Int(1))],
        vec![f(&[1, 2048], 44), f(&[1000, 2048], 45), f(&[1000], 46)],
    ));
    all.push(case(
        "Gemm",
        13,
        &[
            ("transA", AttrValue::Int(1)),
            ("alpha", AttrValue::Float(0.5)),
            ("beta", AttrValue::Float(2.0)),
        ],
        vec![f(&[64, 8], 47), f(&[64, 32], 48), f(&[8, 1], 49)],
    ));
    // Pooling.
    let pool_x = [1, 16, 28, 28];
    all.push(case(
        "MaxPool",
        12,
        &[
            ("kernel_shape", ints(&[3, 3])),
            ("strides", ints(&[2, 2])),
            ("pads", ints(&[1, 1, 1, 1])),
        ],
        vec![f(&pool_x, 50)],
    ));
    all.push(case(
        "MaxPool",
        12,
        &[
            ("kernel_shape", ints(&[3, 3])),
            ("strides", ints(&[2, 2])),
            ("ceil_mode", AttrValue::Int(1)),
        ],
        vec![f(&[1, 16, 27, 27], 51)],
    ));
    all.push(case(
        "AveragePool",
        19,
        &[
            ("kernel_shape", ints(&[3, 3])),
            ("pads", ints(&[1, 1, 1, 1])),
        ],
        vec![f(&pool_x, 52)],
    ));
    all.push(case(
        "AveragePool",
        19,
        &[
            ("kernel_shape", ints(&[3, 3])),
            ("pads", ints(&[1, 1, 1, 1])),
            ("count_include_pad", AttrValue::Int(1)),
        ],
        vec![f(&pool_x, 53)],
    ));
    all.push(case(
        "GlobalAveragePool",
        1,
        &[],
        vec![f(&[2, 512, 7, 7], 54)],
    ));
    all.push(case("GlobalMaxPool", 1, &[], vec![f(&[2, 64, 7, 7], 55)]));
    // Normalizations and reductions.
    all.push(with_constants(
        case(
            "BatchNormalization",
            15,
            &[("epsilon", AttrValue::Float(1e-3))],
            vec![
                f(&x4, 60),
                f(&[16], 61),
                f(&[16], 62),
                f(&[16], 63),
                positive(&[16], 64),
            ],
        ),
        &[1, 2, 3, 4],
    ));
    all.push(case("Softmax", 13, &[], vec![f(&[8, 1000], 65)]));
    all.push(case(
        "Softmax",
        13,
        &[("axis", AttrValue::Int(1))],
        vec![f(&[2, 5, 7], 66)],
    ));
    all.push(case(
        "LogSoftmax",
        11,
        &[("axis", AttrValue::Int(1))],
        vec![f(&[2, 3, 4], 67)],
    ));
    all.push(case(
        "ReduceMean",
        13,
        &[("axes", ints(&[2, 3]))],
        vec![f(&x4, 68)],
    ));
    all.push(with_constants(
        case(
            "ReduceSum",
            13,
            &[("keepdims", AttrValue::Int(0))],
            vec![
                f(&x4, 69),
                Some(Tensor::from_shape_vec(&[1], vec![1i64]).unwrap()),
            ],
        ),
        &[1],
    ));
    all.push(case("ReduceMax", 13, &[], vec![f(&[3, 4, 5], 70)]));
    // Data movement.
    all.push(case(
        "Transpose",
        13,
        &[("perm", ints(&[0, 2, 3, 1]))],
        vec![f(&x4, 80)],
    ));
    all.push(case(
        "Concat",
        13,
        &[("axis", AttrValue::Int(1))],
        vec![
            f(&[2, 3, 4, 4], 81),
            f(&[2, 5, 4, 4], 82),
            f(&[2, 1, 4, 4], 83),
        ],
    ));
    all.push(with_constants(
        case(
            "Reshape",
            14,
            &[],
            vec![
                f(&x4, 84),
                Some(Tensor::from_shape_vec(&[2], vec![2i64, -1]).unwrap()),
            ],
        ),
        &[1],
    ));
    let i64v = |v: &[i64]| Some(Tensor::from_shape_vec(&[v.len()], v.to_vec()).unwrap());
    all.push(with_constants(
        case(
            "Slice",
            13,
            &[],
            vec![
                f(&x4, 85),
                i64v(&[1, 13]),
                i64v(&[12, 0]),
                i64v(&[1, 3]),
                i64v(&[3, -2]),
            ],
        ),
        &[1, 2, 3, 4],
    ));
    all.push(Case {
        op: "Split",
        opset: 13,
        attrs: attrs(&[("axis", AttrValue::Int(1))]),
        inputs: vec![f(&x4, 86)],
        constant: vec![false],
        outputs: 2,
    });
    all.push(with_constants(
        case("Expand", 13, &[], vec![f(&[3, 1], 87), i64v(&[2, 3, 4])]),
        &[1],
    ));
    all.push(with_constants(
        case(
            "Gather",
            13,
            &[("axis", AttrValue::Int(1))],
            vec![f(&x4, 88), i64v(&[3, -1, 0, 3])],
        ),
        &[1],
    ));
    all.push(with_constants(
        case(
            "Pad",
            13,
            &[],
            vec![
                f(&x4, 89),
                i64v(&[0, 1, 2, 0, 0, 0, 1, 3]),
                Some(Tensor::scalar(0.5f32)),
            ],
        ),
        &[1, 2],
    ));
    // NASNet's crop-then-pad: negative pads at the start, positive at the end.
    all.push(with_constants(
        case(
            "Pad",
            13,
            &[],
            vec![f(&x4, 90), i64v(&[0, 0, -1, -2, 0, 0, 1, 1])],
        ),
        &[1],
    ));
    // FPN's top-down path (nearest, 2×, asymmetric) and a detector's input resize (linear,
    // half-pixel, down then up), with sizes; a cubic resize with scales.
    let s = |v: &str| AttrValue::String(v.into());
    all.push(with_constants(
        case(
            "Resize",
            13,
            &[
                ("mode", s("nearest")),
                ("coordinate_transformation_mode", s("asymmetric")),
                ("nearest_mode", s("floor")),
            ],
            vec![
                f(&x4, 91),
                None,
                Some(Tensor::from_shape_vec(&[4], vec![1f32, 1.0, 2.0, 2.0]).unwrap()),
            ],
        ),
        &[2],
    ));
    all.push(with_constants(
        case(
            "Resize",
            13,
            &[("mode", s("linear"))],
            vec![f(&[1, 3, 37, 50], 92), None, None, i64v(&[1, 3, 30, 71])],
        ),
        &[3],
    ));
    all.push(with_constants(
        case(
            "Resize",
            13,
            &[("mode", s("cubic"))],
            vec![
                f(&[2, 3, 9, 11], 93),
                None,
                Some(Tensor::from_shape_vec(&[4], vec![1f32, 1.0, 1.5, 0.7]).unwrap()),
            ],
        ),
        &[2],
    ));
    all
}

/// Rois inside a `height` × `width` image (x1, y1, x2, y2 in pixels), some degenerate or
/// crossing the border, as a detector's proposals are.
fn rois(count: usize, height: f32, width: f32, seed: u64) -> Tensor {
    let u = seeded_f32(&[count, 4], seed).to_f32_array().unwrap();
    let mut v = Vec::with_capacity(count * 4);
    for r in 0..count {
        let (a, b) = ((u[[r, 0]] + 1.0) / 2.0, (u[[r, 1]] + 1.0) / 2.0);
        let (w, h) = ((u[[r, 2]] + 1.1) * 0.3, (u[[r, 3]] + 1.1) * 0.3);
        v.extend([
            a * width - 4.0,
            b * height - 4.0,
            (a + w) * width,
            (b + h) * height,
        ]);
    }
    Tensor::from_shape_vec(&[count, 4], v).unwrap()
}

/// The RoI pooling of a two-stage detector: RoiAlign, the ScatterElements that puts each
/// level's pooled features back in proposal order, ConstantOfShape and Gather with indices
/// computed on the GPU.
fn detection_cases() -> Vec<Case> {
    let s = |v: &str| AttrValue::String(v.to_string());
    let batch = |n: usize, images: i64| {
        Some(Tensor::from_shape_vec(&[n], (0..n as i64).map(|r| r % images).collect()).unwrap())
    };
    let mut all = Vec::new();
    for (mode, transform, sampling, scale) in [
        ("avg", "output_half_pixel", 2, 0.25),
        ("avg", "half_pixel", 0, 0.125),
        ("max", "half_pixel", 2, 0.25),
        ("max", "output_half_pixel", 0, 0.5),
    ] {
        all.push(case(
            "RoiAlign",
            16,
            &[
                ("mode", s(mode)),
                ("coordinate_transformation_mode", s(transform)),
                ("output_height", AttrValue::Int(7)),
                ("output_width", AttrValue::Int(7)),
                ("sampling_ratio", AttrValue::Int(sampling)),
                ("spatial_scale", AttrValue::Float(scale)),
            ],
            vec![
                f(&[2, 16, 50, 60], 120),
                Some(rois(40, 50.0 / scale, 60.0 / scale, 121)),
                batch(40, 2),
            ],
        ));
    }
    // Proposals 0..40 of one level written to rows `perm` of the 48 pooled rows (negative
    // indices count from the end); `add` sums duplicates along axis 1.
    let perm: Vec<i64> = (0..40).map(|j| (j * 7 % 48) as i64 - 24).collect();
    let rows = row_indices(&perm);
    all.push(case(
        "ScatterElements",
        18,
        &[("axis", AttrValue::Int(0))],
        vec![f(&[48, 16, 7, 7], 122), Some(rows), f(&[40, 16, 7, 7], 123)],
    ));
    let dup = seeded_f32(&[6, 20], 124).to_f32_array().unwrap();
    let dup = Tensor::I32(dup.mapv(|v| ((v + 1.0) * 4.0) as i32 - 4).into_shared());
    for reduction in ["add", "max", "mul"] {
        all.push(case(
            "ScatterElements",
            18,
            &[("axis", AttrValue::Int(1)), ("reduction", s(reduction))],
            vec![f(&[6, 5], 125), Some(dup.clone()), f(&[6, 20], 126)],
        ));
    }
    all.push(with_constants(
        case(
            "ConstantOfShape",
            9,
            &[(
                "value",
                AttrValue::Tensor(Tensor::from_shape_vec(&[1], vec![-2.5f32]).unwrap()),
            )],
            vec![Some(
                Tensor::from_shape_vec(&[4], vec![40i64, 16, 7, 7]).unwrap(),
            )],
        ),
        &[0],
    ));
    all.push(case(
        "Gather",
        13,
        &[("axis", AttrValue::Int(0))],
        vec![
            f(&[48, 5], 127),
            Some(Tensor::from_shape_vec(&[6], vec![3i64, -1, 0, 47, 3, -48]).unwrap()),
        ],
    ));
    all
}

/// `[rows, 16, 7, 7]` indices, each row's value repeated over the row.
fn row_indices(rows: &[i64]) -> Tensor {
    let v: Vec<i64> = rows
        .iter()
        .flat_map(|&r| std::iter::repeat_n(r, 16 * 49))
        .collect();
    Tensor::from_shape_vec(&[rows.len(), 16, 7, 7], v).unwrap()
}

/// Cases whose input, replaced as given, holds an index out of range.
fn bad_index_cases() -> Vec<(Case, usize, Tensor)> {
    let cases = detection_cases();
    let roi_align = cases.iter().position(|c| c.op == "RoiAlign").unwrap_or(0);
    let scatter = cases
        .iter()
        .position(|c| c.op == "ScatterElements")
        .unwrap_or(0);
    let gather = cases.iter().position(|c| c.op == "Gather").unwrap_or(0);
    let mut batch: Vec<i64> = (0..40).map(|r| r % 2).collect();
    batch[17] = 2;
    let mut rows: Vec<i64> = (0..40).map(|j| (j * 7 % 48) as i64 - 24).collect();
    rows[5] = 48;
    let rows = row_indices(&rows);
    let mut cases: Vec<Option<Case>> = cases.into_iter().map(Some).collect();
    let mut take = |i: usize| cases[i].take().expect("each case once");
    vec![
        (
            take(roi_align),
            2,
            Tensor::from_shape_vec(&[40], batch).unwrap(),
        ),
        (take(scatter), 1, rows),
        (
            take(gather),
            1,
            Tensor::from_shape_vec(&[6], vec![3i64, -1, 0, 47, -49, 3]).unwrap(),
        ),
    ]
}

/// What one case measured.
#[derive(Debug, serde::Serialize)]
struct Outcome {
    op: String,
    shapes: String,
    max_abs: f64,
    max_rel: f64,
    pass: bool,
    gpu_us: Option<f64>,
    cpu_us: f64,
    error: Option<String>,
}

/// Largest absolute and relative (to 1 + |expected|) differences; NaNs must match NaNs.
fn difference(expected: &Tensor, actual: &Tensor) -> Result<(f64, f64)> {
    if expected.dtype() != actual.dtype() || expected.shape() != actual.shape() {
        bail!(
            "{:?}{:?} vs {:?}{:?}",
            expected.dtype(),
            expected.shape(),
            actual.dtype(),
            actual.shape()
        );
    }
    let as_f64 = |t: &Tensor| -> Result<Vec<f64>> {
        Ok(match t {
            Tensor::Bool(a) => a.iter().map(|&b| b as u8 as f64).collect(),
            other => other.to_f64_vec()?,
        })
    };
    let (e, a) = (as_f64(expected)?, as_f64(actual)?);
    let (mut max_abs, mut max_rel) = (0f64, 0f64);
    for (x, y) in e.iter().zip(&a) {
        if x.is_nan() || y.is_nan() {
            if x.is_nan() != y.is_nan() {
                return Ok((f64::INFINITY, f64::INFINITY));
            }
            continue;
        }
        if x == y {
            continue;
        }
        let d = (x - y).abs();
        max_abs = max_abs.max(d);
        max_rel = max_rel.max(d / (1.0 + x.abs()));
    }
    Ok((max_abs, max_rel))
}

fn case_spec(c: &Case) -> NodeSpec<'_> {
    NodeSpec {
        op_type: c.op,
        domain: "",
        opset: c.opset,
        attrs: &c.attrs,
        num_inputs: c.inputs.len(),
        num_outputs: c.outputs,
        options: Default::default(),
    }
}

fn run_case(gpu: &Gpu, c: &Case) -> Result<Outcome> {
    check(gpu, &case_spec(c), &c.inputs, &c.constant)
}

/// Runs one node on the CPU and on the GPU and compares the outputs.
fn check(
    gpu: &Gpu,
    spec: &NodeSpec<'_>,
    inputs: &[Option<Tensor>],
    constant: &[bool],
) -> Result<Outcome> {
    let refs: Vec<Option<&Tensor>> = inputs.iter().map(Option::as_ref).collect();
    let cpu = spillway_kernels::cpu::build(spec)?;
    let start = Instant::now();
    let expected = cpu.run(&refs)?;
    let cpu_us = start.elapsed().as_secs_f64() * 1e6;
    let kernel = build_gpu(gpu, spec, inputs, constant, &expected)?;
    let run = launch_once(gpu, kernel.as_ref(), inputs, &expected, true)?;
    if let Some((code, value)) = run.status {
        bail!("the kernel reported {}", kernel.status_error(code, value));
    }
    let mut max_abs = 0f64;
    let mut max_rel = 0f64;
    for (want, got) in expected.iter().zip(&run.outputs) {
        let (a, r) = difference(want, got)?;
        max_abs = max_abs.max(a);
        max_rel = max_rel.max(r);
    }
    let exact = !expected.iter().any(|t| t.dtype().is_float());
    let pass = if exact {
        max_abs == 0.0
    } else {
        max_rel <= 1e-4
    };
    Ok(Outcome {
        op: spec.op_type.to_string(),
        shapes: shapes_of(inputs),
        max_abs,
        max_rel,
        pass,
        gpu_us: run.gpu_us,
        cpu_us,
        error: None,
    })
}

/// A node whose input `bad` makes the CPU kernel fail (an index out of range): the GPU kernel,
/// built for the shapes of the valid `inputs`, must report it through its status word.
fn check_reports(gpu: &Gpu, c: &Case, bad: (usize, Tensor)) -> Result<Outcome> {
    let spec = case_spec(c);
    let refs: Vec<Option<&Tensor>> = c.inputs.iter().map(Option::as_ref).collect();
    let cpu = spillway_kernels::cpu::build(&spec)?;
    let expected = cpu.run(&refs)?;
    let mut wrong = c.inputs.clone();
    wrong[bad.0] = Some(bad.1);
    let wrong_refs: Vec<Option<&Tensor>> = wrong.iter().map(Option::as_ref).collect();
    let cpu_error = match cpu.run(&wrong_refs) {
        Ok(_) => bail!("the CPU kernel accepts the bad input"),
        Err(e) => e.to_string(),
    };
    let kernel = build_gpu(gpu, &spec, &c.inputs, &c.constant, &expected)?;
    let run = launch_once(gpu, kernel.as_ref(), &wrong, &expected, false)?;
    let (pass, error) = match run.status {
        Some((code, value)) => (
            true,
            format!(
                "reported: {} (CPU: {cpu_error})",
                kernel.status_error(code, value)
            ),
        ),
        None => (false, format!("not reported (CPU: {cpu_error})")),
    };
    Ok(Outcome {
        op: format!("{} (bad index)", c.op),
        shapes: shapes_of(&wrong),
        max_abs: 0.0,
        max_rel: 0.0,
        pass,
        gpu_us: None,
        cpu_us: 0.0,
        error: Some(error),
    })
}

fn shapes_of(inputs: &[Option<Tensor>]) -> String {
    inputs
        .iter()
        .flatten()
        .map(|t| format!("{:?}", t.shape()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The GPU kernel of `spec` for the shapes of `inputs` and `outputs`.
fn build_gpu(
    gpu: &Gpu,
    spec: &NodeSpec<'_>,
    inputs: &[Option<Tensor>],
    constant: &[bool],
    outputs: &[Tensor],
) -> Result<Box<dyn ops::GpuKernel>> {
    let in_desc: Vec<Option<TensorDesc>> = inputs
        .iter()
        .map(|t| t.as_ref().map(|t| TensorDesc::new(t.dtype(), t.shape())))
        .collect();
    let out_desc: Vec<TensorDesc> = outputs
        .iter()
        .map(|t| TensorDesc::new(t.dtype(), t.shape()))
        .collect();
    let constants: Vec<Option<&Tensor>> = inputs
        .iter()
        .zip(constant)
        .map(|(t, &k)| if k { t.as_ref() } else { None })
        .collect();
    let node = GpuNode {
        spec,
        inputs: &in_desc,
        outputs: &out_desc,
        constants: &constants,
    };
    Ok(ops::build(gpu, &node)?)
}

/// What one launch gave.
struct GpuRun {
    outputs: Vec<Tensor>,
    /// The status word, when the kernel reported one.
    status: Option<(u32, i64)>,
    /// Median µs per launch, when timed.
    gpu_us: Option<f64>,
}

/// Uploads `inputs`, launches `kernel` once (outputs shaped as `like`) and reads back its
/// outputs and status word; then times it when `time` is set.
fn launch_once(
    gpu: &Gpu,
    kernel: &dyn ops::GpuKernel,
    inputs: &[Option<Tensor>],
    like: &[Tensor],
    time: bool,
) -> Result<GpuRun> {
    let out_desc: Vec<TensorDesc> = like
        .iter()
        .map(|t| TensorDesc::new(t.dtype(), t.shape()))
        .collect();
    // One arena: inputs, outputs, workspace, status word, each region aligned.
    let sizes: Vec<usize> = inputs
        .iter()
        .map(|t| t.as_ref().map_or(0, |t| t.len() * t.dtype().size_of()))
        .chain(out_desc.iter().map(TensorDesc::bytes))
        .chain([kernel.workspace_bytes(), ops::STATUS_BYTES])
        .map(|b| aligned(b.max(1)))
        .collect();
    let arena = DeviceArena::new(gpu.stream(0), sizes.iter().sum())?;
    let mut regions: Vec<DeviceRegion> = Vec::new();
    let mut at = 0;
    for &s in &sizes {
        regions.push(arena.region().sub(at, s).context("arena layout")?);
        at += s;
    }
    for (t, r) in inputs.iter().zip(&regions) {
        if let Some(t) = t {
            gpu.upload(&tensor_bytes(t).context("input bytes")?, *r)?;
        }
    }
    gpu.copy_in_stream().synchronize()?;
    let n_in = inputs.len();
    let input_regions: Vec<Option<DeviceRegion>> = inputs
        .iter()
        .zip(&regions)
        .map(|(t, r)| t.as_ref().map(|_| *r))
        .collect();
    let outputs = &regions[n_in..n_in + out_desc.len()];
    let workspace = (kernel.workspace_bytes() > 0).then(|| regions[n_in + out_desc.len()]);
    let status_word = regions[n_in + out_desc.len() + 1]
        .sub(0, ops::STATUS_BYTES)
        .context("status word")?;
    let status = kernel.reports_status().then_some(status_word);
    if let Some(word) = status {
        gpu.zero(word, 0)?;
    }
    let io = GpuIo {
        inputs: &input_regions,
        outputs,
        workspace,
        status,
    };
    kernel.launch(gpu, 0, &io)?;
    gpu.stream(0).synchronize()?;
    let mut reported = None;
    if let Some(word) = status {
        let mut host = vec![0u8; ops::STATUS_BYTES];
        gpu.download(word, &mut host)?;
        reported = ops::read_status(&host);
    }
    let mut got = Vec::new();
    for (i, desc) in out_desc.iter().enumerate() {
        let mut host = vec![0u8; desc.bytes()];
        gpu.download(outputs[i], &mut host)?;
        got.push(tensor_from_bytes(desc.dtype, &desc.shape, &host)?);
    }
    let gpu_us = if time {
        Some(time_gpu(gpu, kernel, &io)?)
    } else {
        None
    };
    Ok(GpuRun {
        outputs: got,
        status: reported,
        gpu_us,
    })
}

/// The graph of node test `test` when it is one node of an op with a GPU kernel.
fn gpu_node_test(test: &std::path::Path) -> Option<spillway::graph::Graph> {
    let graph = spillway::onnx::load_file(&test.join("model.onnx")).ok()?;
    let [node] = graph.nodes.as_slice() else {
        return None;
    };
    (ops::gpu_ops().contains(&node.op_type.as_str()) && node.subgraphs.is_empty()).then_some(graph)
}

/// Copies the node tests of `src` that [`node_tests`] runs into `dst` (for a GPU machine whose
/// `onnx` package has no test data).
fn copy_node_tests(src: &std::path::Path, dst: &std::path::Path) -> Result<usize> {
    let mut copied = 0;
    for entry in std::fs::read_dir(src)? {
        let test = entry?.path();
        if gpu_node_test(&test).is_none() {
            continue;
        }
        let target = dst.join(test.file_name().context("a test folder")?);
        for file in walk(&test)? {
            let to = target.join(file.strip_prefix(&test)?);
            std::fs::create_dir_all(to.parent().context("a parent")?)?;
            std::fs::copy(&file, &to)?;
        }
        copied += 1;
    }
    Ok(copied)
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files.extend(walk(&path)?);
        } else {
            files.push(path);
        }
    }
    Ok(files)
}

/// What the node-test pass found.
#[derive(Debug, Default, serde::Serialize)]
struct NodeTestSummary {
    passed: Vec<String>,
    failed: Vec<(String, String)>,
    /// The GPU builder refused the node with a typed error (the node stays on the CPU).
    no_gpu_kernel: Vec<(String, String)>,
    /// Not a single-node test of an op with a GPU kernel, or its CPU kernel refuses it.
    skipped: usize,
}

/// Every ONNX backend node test under `dir` whose model is one node of an op with a GPU
/// kernel: GPU outputs against the CPU kernel's on the test's inputs.
fn node_tests(gpu: &Gpu, dir: &std::path::Path) -> Result<NodeTestSummary> {
    let mut summary = NodeTestSummary::default();
    let mut tests: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    tests.sort();
    for test in tests {
        let name = test
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let Some(graph) = gpu_node_test(&test) else {
            summary.skipped += 1;
            continue;
        };
        let node = &graph.nodes[0];
        let data = test.join("test_data_set_0");
        let mut fed = Vec::new();
        for i in 0..graph.inputs.len() {
            match spillway_tests::read_tensor_pb(&data.join(format!("input_{i}.pb"))) {
                Ok(t) => fed.push(t),
                Err(_) => break,
            }
        }
        if fed.len() != graph.inputs.len() {
            summary.skipped += 1;
            continue;
        }
        let mut inputs = Vec::new();
        let mut constant = Vec::new();
        for input in &node.inputs {
            match input {
                None => {
                    inputs.push(None);
                    constant.push(false);
                }
                Some(v) => match graph.inputs.iter().position(|g| g == v) {
                    Some(i) => {
                        inputs.push(Some(fed[i].clone()));
                        constant.push(false);
                    }
                    None => {
                        inputs.push(graph.constants.get(v).cloned());
                        constant.push(true);
                    }
                },
            }
        }
        let spec = node.spec();
        if spillway_kernels::cpu::build(&spec).is_err() {
            summary.skipped += 1;
            continue;
        }
        // A session folds the inputs that parametrize a node (indices, scales, sizes, pads)
        // into constants; a node test feeds them. When the GPU refuses them fed, it is checked
        // with them constant.
        let mut outcome = check(gpu, &spec, &inputs, &constant);
        let refused = matches!(
            outcome
                .as_ref()
                .err()
                .and_then(|e| e.downcast_ref::<CudaError>()),
            Some(CudaError::Unsupported(_))
        );
        if refused && inputs.len() > 1 {
            let parameters: Vec<bool> = (0..inputs.len())
                .map(|i| (i > 0 && inputs[i].is_some()) || constant[i])
                .collect();
            if parameters != constant {
                outcome = check(gpu, &spec, &inputs, &parameters);
            }
        }
        match outcome {
            Ok(o) if o.pass => summary.passed.push(name),
            Ok(o) => summary
                .failed
                .push((name, format!("max rel {:.2e}", o.max_rel))),
            Err(e) => match e.downcast_ref::<CudaError>() {
                Some(CudaError::Unsupported(why)) => {
                    summary.no_gpu_kernel.push((name, why.clone()))
                }
                Some(CudaError::Kernel(k)) => summary.no_gpu_kernel.push((name, k.to_string())),
                _ => summary.failed.push((name, format!("{e:#}"))),
            },
        }
    }
    Ok(summary)
}

/// Median microseconds per launch over 5 batches of 20 launches, after 3 warm-up launches,
/// timed with CUDA events on stream 0.
fn time_gpu(gpu: &Gpu, kernel: &dyn ops::GpuKernel, io: &GpuIo<'_>) -> Result<f64> {
    use spillway_kernels::cuda::cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
    for _ in 0..3 {
        kernel.launch(gpu, 0, io)?;
    }
    let mut per_launch = Vec::new();
    for _ in 0..5 {
        let start = gpu.context().new_event(Some(CU_EVENT_DEFAULT))?;
        let end = gpu.context().new_event(Some(CU_EVENT_DEFAULT))?;
        start.record(gpu.stream(0))?;
        for _ in 0..20 {
            kernel.launch(gpu, 0, io)?;
        }
        end.record(gpu.stream(0))?;
        end.synchronize()?;
        per_launch.push(start.elapsed_ms(&end)? as f64 * 1000.0 / 20.0);
    }
    per_launch.sort_by(f64::total_cmp);
    Ok(per_launch[per_launch.len() / 2])
}

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--copy-node-tests") {
        let (src, dst) = (argv.get(2), argv.get(3));
        let (Some(src), Some(dst)) = (src, dst) else {
            bail!("usage: gpu_check --copy-node-tests SRC_DIR DST_DIR");
        };
        let n = copy_node_tests(src.as_ref(), dst.as_ref())?;
        println!("copied {n} node tests of GPU ops into {dst}");
        return Ok(());
    }
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .context("usage: gpu_check OUT_DIR")?,
    );
    std::fs::create_dir_all(&out)?;
    let system = match probe() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("CUDA is unavailable: {e}");
            std::fs::write(out.join("gpu_check.md"), format!("CUDA unavailable: {e}\n"))?;
            std::process::exit(2);
        }
    };
    let info = system.gpu(0)?.clone();
    let gpu = Gpu::open(0, 2, GpuOptions::default())?;
    let mut outcomes = Vec::new();
    // GPU_CHECK_ONLY=Conv,Gemm keeps those ops' cases (a quick check of one library).
    let only = std::env::var("GPU_CHECK_ONLY").ok();
    let wanted = |op: &str| only.as_ref().is_none_or(|o| o.split(',').any(|x| x == op));
    let checks = cases()
        .into_iter()
        .chain(detection_cases())
        .map(|c| (c, None))
        .chain(
            bad_index_cases()
                .into_iter()
                .map(|(c, i, bad)| (c, Some((i, bad)))),
        );
    for (c, bad) in checks.filter(|(c, _)| wanted(c.op)) {
        let outcome = match bad {
            None => run_case(&gpu, &c),
            Some(bad) => check_reports(&gpu, &c, bad),
        };
        let outcome = outcome.unwrap_or_else(|e| Outcome {
            op: c.op.to_string(),
            shapes: String::new(),
            max_abs: f64::NAN,
            max_rel: f64::NAN,
            pass: false,
            gpu_us: None,
            cpu_us: f64::NAN,
            error: Some(format!("{e:#}")),
        });
        println!(
            "{:<5} {:<20} {:<40} rel {:.2e}{}",
            if outcome.pass { "ok" } else { "FAIL" },
            outcome.op,
            outcome.shapes,
            outcome.max_rel,
            outcome
                .error
                .as_deref()
                .map(|e| format!("  {e}"))
                .unwrap_or_default()
        );
        outcomes.push(outcome);
    }
    let passed = outcomes.iter().filter(|o| o.pass).count();
    let mut md = format!(
        "# GPU kernels vs CPU kernels\n\nGPU: {} (compute capability {}.{}, {} SMs). TF32 off. \
         `gpu_check` (tests/src/bin/gpu_check.rs), run by `scripts/gpu_run.sh`.\n\n\
         {passed} of {} cases pass (float: largest |gpu-cpu|/(1+|cpu|) <= 1e-4; integer and \
         boolean outputs: exact).\n\n\
         GPU time: median per launch from CUDA events (5 x 20 launches after 3 warm-ups). CPU \
         time: one run of the CPU kernel on the same machine, for orientation only.\n\n\
         | op | input shapes | max abs | max rel | pass | GPU µs | CPU µs | error |\n|---|---|---|---|---|---|---|---|\n",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.multiprocessors,
        outcomes.len()
    );
    for o in &outcomes {
        md.push_str(&format!(
            "| {} | {} | {:.2e} | {:.2e} | {} | {} | {:.0} | {} |\n",
            o.op,
            o.shapes,
            o.max_abs,
            o.max_rel,
            if o.pass { "yes" } else { "**no**" },
            o.gpu_us.map(|t| format!("{t:.1}")).unwrap_or_default(),
            o.cpu_us,
            o.error.as_deref().unwrap_or("")
        ));
    }
    std::fs::write(out.join("gpu_check.md"), md)?;
    let json = serde_json::json!({
        "gpu": info.name,
        "compute_capability": [info.compute_capability.0, info.compute_capability.1],
        "passed": passed,
        "cases": outcomes,
    });
    std::fs::write(
        out.join("gpu_check.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    println!("{passed} of {} cases pass", outcomes.len());
    let mut node_failures = 0;
    if let Some(dir) = std::env::args().nth(2) {
        let summary = node_tests(&gpu, std::path::Path::new(&dir))?;
        node_failures = summary.failed.len();
        let mut md = format!(
            "# ONNX backend node tests on the GPU\n\nGPU: {}. Every single-node test under `{dir}` \
             whose op has a GPU kernel: GPU outputs vs the CPU kernel's (float: relative 1e-4; \
             others exact).\n\n{} pass, {} fail, {} have no GPU kernel for their types or \
             attributes (typed error; such nodes stay on the CPU), {} skipped (other ops, \
             multi-node models, or rejected by the CPU kernel too).\n\n## Failures\n\n",
            info.name,
            summary.passed.len(),
            summary.failed.len(),
            summary.no_gpu_kernel.len(),
            summary.skipped
        );
        for (name, why) in &summary.failed {
            md.push_str(&format!("- {name}: {why}\n"));
        }
        md.push_str("\n## No GPU kernel\n\n");
        for (name, why) in &summary.no_gpu_kernel {
            md.push_str(&format!("- {name}: {why}\n"));
        }
        std::fs::write(out.join("node_tests.md"), md)?;
        std::fs::write(
            out.join("node_tests.json"),
            serde_json::to_string_pretty(&summary)?,
        )?;
        println!(
            "node tests: {} pass, {} fail, {} no GPU kernel, {} skipped",
            summary.passed.len(),
            summary.failed.len(),
            summary.no_gpu_kernel.len(),
            summary.skipped
        );
    }
    std::process::exit(if passed == outcomes.len() && node_failures == 0 {
        0
    } else {
        1
    });
}
