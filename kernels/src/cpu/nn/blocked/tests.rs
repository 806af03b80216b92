//! The blocked kernels against the planar ones (`FusedConv`, `MaxPool`, `AveragePool`,
//! `GlobalAveragePool`), which the conformance run checks against ONNX Runtime: the same
//! inputs, reordered into blocks, must give the same outputs, reordered. Convolutions are
//! checked against the planar `FusedConv` in `f64` (the generic path, never Winograd), and
//! the planar `f32` one (which may take Winograd) against it too.

use super::{BLOCK, DOMAIN, available};
use crate::cpu::nn::packed_gemm::Isa;
use crate::cpu::nn::winograd::line;
use crate::error::Result;
use crate::kernel::NodeSpec;
use crate::test_values::uniform;
use crate::{AttrValue, Attributes, Tensor};

/// Runs `op_type` of `domain` on `inputs`.
fn run(
    domain: &str,
    op_type: &str,
    attrs: &Attributes,
    inputs: &[Option<&Tensor>],
) -> Result<Tensor> {
    let opset = if domain.is_empty() { 17 } else { 1 };
    let spec = NodeSpec {
        op_type,
        domain,
        opset,
        attrs,
        num_inputs: inputs.len(),
        num_outputs: 1,
        options: Default::default(),
    };
    Ok(crate::cpu::build(&spec)?.run(inputs)?.remove(0))
}

/// A seeded `f32` tensor with values in [-1, 1).
fn seeded(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_shape_vec(shape, uniform(shape.iter().product(), seed)).unwrap()
}

/// An `f32` tensor as `f64`, and back.
fn f64_copy(t: &Tensor) -> Tensor {
    Tensor::from_shape_vec(t.shape(), t.to_f64_vec().unwrap()).unwrap()
}

fn f32_copy(t: &Tensor) -> Tensor {
    let v: Vec<f32> = t.to_f64_vec().unwrap().iter().map(|&v| v as f32).collect();
    Tensor::from_shape_vec(t.shape(), v).unwrap()
}

/// `[N, C, H, W]` into blocks `[N, ⌈C / 16⌉, H, W, 16]`, the last block's padding zero.
fn block(t: &Tensor) -> Tensor {
    let &[n, c, h, w] = t.shape() else {
        panic!("4-D")
    };
    let blocks = c.div_ceil(BLOCK);
    let v = t.view::<f32>().unwrap();
    let mut out = vec![0.0f32; n * blocks * BLOCK * h * w];
    for (i, o) in out.iter_mut().enumerate() {
        let j = i % BLOCK;
        let q = i / BLOCK % (h * w);
        let cb = i / BLOCK / (h * w) % blocks;
        let b = i / (blocks * BLOCK * h * w);
        if cb * BLOCK + j < c {
            *o = v[[b, cb * BLOCK + j, q / w, q % w]];
        }
    }
    Tensor::from_shape_vec(&[n, blocks, h, w, BLOCK], out).unwrap()
}

fn assert_close(got: &Tensor, want: &Tensor, what: &str) {
    assert_close_within(got, want, 0.0, what);
}

/// [`assert_close`] with `atol` more allowed: Winograd's rounding error scales with the sum
/// of the terms' magnitudes, not with the result.
fn assert_close_within(got: &Tensor, want: &Tensor, atol: f32, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    let (g, w) = (got.view::<f32>().unwrap(), want.view::<f32>().unwrap());
    for (i, (a, b)) in g.iter().zip(w.iter()).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || (a - b).abs() <= atol + 1e-5 * (1.0 + b.abs());
        assert!(ok, "{what}: [{i}] {a} vs {b}");
    }
}

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

#[test]
fn blocked_convolutions_equal_the_planar_fused_conv() {
    if !available() {
        crate::testing::skipped("neither AVX2 nor AVX-512: no blocked kernels on this CPU");
        return;
    }
    // (batch, in, out, side, kernel, stride, pad, dilation)
    let cases = [
        (1, 16, 32, 9, 3, 1, 1, 1),
        (2, 32, 48, 8, 1, 1, 0, 1),
        (1, 3, 64, 23, 7, 2, 3, 1),
        (1, 48, 16, 7, 3, 2, 1, 1),
        (1, 16, 80, 12, 3, 1, 2, 2),
        (1, 128, 32, 5, 5, 1, 2, 1),
        (1, 16, 16, 6, 3, 1, 0, 1),
        // Winograd's (3×3, unit strides, 32+ channels, 16+ tiles of 4×4 outputs).
        (2, 32, 48, 17, 3, 1, 1, 1),
        (1, 48, 32, 18, 3, 1, 0, 1),
        // Channels that leave the last block padded, in and out (NASNet's 42 and 168).
        (1, 42, 168, 11, 1, 1, 0, 1),
        (2, 168, 42, 9, 1, 1, 0, 1),
        (1, 40, 24, 13, 3, 1, 1, 1),
        (1, 84, 100, 8, 5, 2, 2, 1),
        // 1×1 windows as cell tiles: two depth blocks, the second ending in a part-filled
        // block; panels of three vectors, the last of one and of two; shallow (panels of
        // two); padded (positions apart: general tiles); strided (the cells gathered), on
        // odd and even sides, the last input block part-filled.
        (1, 1100, 40, 6, 1, 1, 0, 1),
        (1, 272, 100, 6, 1, 1, 0, 1),
        (2, 320, 168, 5, 1, 1, 0, 1),
        (1, 64, 56, 10, 1, 1, 0, 1),
        (1, 32, 200, 7, 1, 1, 1, 1),
        (1, 48, 32, 9, 1, 2, 0, 1),
        (1, 40, 48, 10, 1, 2, 0, 1),
        // Wider windows over whole blocks, depth rows tap by tap (as cell strips):
        // two depth blocks, a strided window, a part-filled last panel.
        (1, 128, 40, 9, 3, 2, 1, 1),
        // Panels of four vectors in tiles of 6 positions (AVX-512, 64 channels a panel):
        // cells with a last tile of one position (169 outputs), a strided window tap by tap,
        // a padded 1×1 (general tiles, three panels).
        (1, 64, 128, 13, 1, 1, 0, 1),
        (1, 32, 64, 15, 3, 2, 1, 1),
        (2, 16, 192, 8, 1, 1, 1, 1),
        // F(2×2) on few tiles for deep inputs (AVX2), direct elsewhere.
        (1, 256, 32, 7, 3, 1, 1, 1),
    ];
    for (i, &(n, c, m, side, k, s, p, d)) in cases.iter().enumerate() {
        // A padded output takes the epilogue's pass after the tiles (ReLU finishes in them).
        let activation = if m % BLOCK == 0 { "Relu" } else { "HardSwish" };
        let x = seeded(&[n, c, side, side], i as u64);
        let w = seeded(&[m, c, k, k], 100 + i as u64);
        let b = seeded(&[m], 200 + i as u64);
        let attrs = Attributes::new()
            .with("kernel_shape", ints(&[k as i64, k as i64]))
            .with("strides", ints(&[s as i64, s as i64]))
            .with("pads", ints(&[p as i64; 4]))
            .with("dilations", ints(&[d as i64, d as i64]))
            .with("activation", AttrValue::String(activation.into()));
        let fused = |inputs: &[&Tensor]| {
            let wide: Vec<Tensor> = inputs.iter().map(|t| f64_copy(t)).collect();
            let wide: Vec<Option<&Tensor>> = wide.iter().map(Some).collect();
            f32_copy(&run("com.microsoft", "FusedConv", &attrs, &wide).unwrap())
        };
        let want = fused(&[&x, &w, &b]);
        let z = seeded(want.shape(), 300 + i as u64);
        let want_z = fused(&[&x, &w, &b, &z]);
        // Values and weights lie in [-1, 1): a sum of `c · k²` terms below 1 each, whose
        // rounding in float32 grows with their count, and depends on the order the kernel
        // takes them in (channel by channel or tap by tap within blocks of 16).
        let winograd = k == 3 && s == 1 && d == 1 && c >= 32 && m >= 32;
        let terms = (c * k * k) as f32;
        let atol = if winograd { 1e-6 * terms } else { 1e-8 * terms };
        let assert_close =
            |got: &Tensor, want: &Tensor, what: &str| assert_close_within(got, want, atol, what);
        let planar = run(
            "com.microsoft",
            "FusedConv",
            &attrs,
            &[Some(&x), Some(&w), Some(&b), Some(&z)],
        )
        .unwrap();
        assert_close(&planar, &want_z, &format!("case {i}, planar f32 FusedConv"));
        let inputs: Vec<(&str, Tensor)> = match c >= BLOCK {
            true => vec![("planar", x.clone()), ("blocked", block(&x))],
            false => vec![("planar", x.clone())],
        };
        for (layout, xin) in &inputs {
            let what = format!("case {i}, {layout} input");
            let got = run(DOMAIN, "Conv", &attrs, &[Some(xin), Some(&w), Some(&b)]).unwrap();
            assert_close(&got, &block(&want), &format!("{what}, blocked output"));
            let zb = block(&z);
            let got = run(
                DOMAIN,
                "Conv",
                &attrs,
                &[Some(xin), Some(&w), Some(&b), Some(&zb)],
            )
            .unwrap();
            assert_close(&got, &block(&want_z), &format!("{what}, residual"));
            let rows = attrs.clone().with("blocked_output", AttrValue::Int(0));
            let got = run(DOMAIN, "Conv", &rows, &[Some(xin), Some(&w), Some(&b)]).unwrap();
            assert_close(&got, &want, &format!("{what}, planar output"));
        }
    }
}

#[test]
fn blocked_line_convolutions_equal_the_planar_fused_conv() {
    if !available() {
        crate::testing::skipped("neither AVX2 nor AVX-512: no blocked kernels on this CPU");
        return;
    }
    // (in, out, image, window, pads top/left/bottom/right): inception_v3's factorized
    // windows, which blocked images and outputs take by F(4, r) where it pays (32+ channels,
    // 64+ tiles), and cases that it does not take.
    let cases = [
        (32, 48, [17, 17], [1, 7], [0, 3, 0, 3]),
        (48, 32, [17, 17], [7, 1], [3, 0, 3, 0]),
        (32, 32, [16, 16], [1, 3], [0, 1, 0, 1]),
        (32, 32, [16, 16], [3, 1], [1, 0, 1, 0]),
        // Lines not a whole number of tiles, uneven and missing padding, padding across
        // the window (rows of zeros).
        (32, 32, [12, 22], [1, 7], [1, 2, 0, 5]),
        (32, 48, [23, 14], [7, 1], [0, 0, 2, 1]),
        (32, 32, [33, 10], [1, 3], [0, 0, 0, 0]),
        (32, 32, [7, 40], [3, 1], [2, 1, 0, 0]),
        // Too few channels or tiles, or another window length: the position tiles.
        (16, 32, [17, 17], [1, 7], [0, 3, 0, 3]),
        (32, 32, [8, 8], [1, 3], [0, 1, 0, 1]),
        (32, 32, [11, 11], [1, 5], [0, 2, 0, 2]),
    ];
    for (i, &(c, m, [h, wd], [kh, kw], pads)) in cases.iter().enumerate() {
        let out = [
            h + pads[0] + pads[2] + 1 - kh,
            wd + pads[1] + pads[3] + 1 - kw,
        ];
        let options = crate::KernelOptions::default();
        let chosen = line::chooses([kh, kw], [1, 1], [1, 1], (c, m), out, &options).is_some();
        // The line transforms run on AVX2 and AVX-512; elsewhere every case takes position
        // tiles.
        let vectors = Isa::detect().is_some();
        assert_eq!(chosen, i < 8 && vectors, "case {i}: F(4, r) taken");
        let x = seeded(&[1, c, h, wd], 400 + i as u64);
        let w = seeded(&[m, c, kh, kw], 500 + i as u64);
        let b = seeded(&[m], 600 + i as u64);
        let attrs = Attributes::new()
            .with("kernel_shape", ints(&[kh as i64, kw as i64]))
            .with("pads", ints(&pads.map(|p| p as i64)))
            .with("activation", AttrValue::String("Relu".into()));
        let fused = |inputs: &[&Tensor]| {
            let wide: Vec<Tensor> = inputs.iter().map(|t| f64_copy(t)).collect();
            let wide: Vec<Option<&Tensor>> = wide.iter().map(Some).collect();
            f32_copy(&run("com.microsoft", "FusedConv", &attrs, &wide).unwrap())
        };
        let want = fused(&[&x, &w, &b]);
        let z = seeded(want.shape(), 700 + i as u64);
        let want_z = fused(&[&x, &w, &b, &z]);
        // Values and weights lie in [-1, 1): a sum of `c · r` terms below 1 each, whose
        // rounding F(4, 7)'s transforms scale up the most.
        let atol = 2e-6 * (c * kh * kw) as f32;
        let (xb, zb) = (block(&x), block(&z));
        let what = format!("case {i}");
        let got = run(DOMAIN, "Conv", &attrs, &[Some(&xb), Some(&w), Some(&b)]).unwrap();
        assert_close_within(&got, &block(&want), atol, &what);
        let got = run(
            DOMAIN,
            "Conv",
            &attrs,
            &[Some(&xb), Some(&w), Some(&b), Some(&zb)],
        )
        .unwrap();
        assert_close_within(&got, &block(&want_z), atol, &format!("{what}, residual"));
    }
}

#[test]
fn blocked_pools_equal_the_planar_pools() {
    if !available() {
        crate::testing::skipped("neither AVX2 nor AVX-512: no blocked kernels on this CPU");
        return;
    }
    // NaN never wins a window, in either layout.
    let shape = [2, 32, 11, 13];
    let mut v = uniform(shape.iter().product(), 7);
    v[3 * 11 * 13 + 4 * 13 + 5] = f32::NAN;
    let x = Tensor::from_shape_vec(&shape, v).unwrap();
    let xb = block(&x);
    // (op, kernel, stride, pads, ceil_mode, count_include_pad)
    type Case = (&'static str, i64, i64, [i64; 4], i64, i64);
    let cases: [Case; 7] = [
        ("MaxPool", 3, 2, [0, 0, 0, 0], 1, 0),
        ("MaxPool", 3, 1, [1, 1, 1, 1], 0, 0),
        ("MaxPool", 2, 2, [0, 0, 0, 0], 0, 0),
        ("MaxPool", 3, 2, [1, 1, 1, 1], 0, 0),
        ("AveragePool", 3, 1, [1, 1, 1, 1], 0, 0),
        ("AveragePool", 3, 1, [1, 1, 1, 1], 0, 1),
        ("AveragePool", 5, 3, [0, 0, 2, 2], 1, 0),
    ];
    for (op, k, s, pads, ceil, count_pad) in cases {
        let mut attrs = Attributes::new()
            .with("kernel_shape", ints(&[k, k]))
            .with("strides", ints(&[s, s]))
            .with("pads", ints(&pads))
            .with("ceil_mode", AttrValue::Int(ceil));
        if op == "AveragePool" {
            attrs = attrs.with("count_include_pad", AttrValue::Int(count_pad));
        }
        let want = run("", op, &attrs, &[Some(&x)]).unwrap();
        let got = run(DOMAIN, op, &attrs, &[Some(&xb)]).unwrap();
        assert_close(&got, &block(&want), &format!("{op} {k}/{s} {pads:?}"));
    }
    let want = run("", "GlobalAveragePool", &Attributes::new(), &[Some(&x)]).unwrap();
    let got = run(
        DOMAIN,
        "GlobalAveragePool",
        &Attributes::new(),
        &[Some(&xb)],
    )
    .unwrap();
    assert_close(&got, &want, "GlobalAveragePool");
    // 42 live channels in 3 blocks, 2 images: the padding is left out of the means.
    let x = seeded(&[2, 42, 5, 6], 8);
    let want = run("", "GlobalAveragePool", &Attributes::new(), &[Some(&x)]).unwrap();
    let live = Attributes::new().with("channels", AttrValue::Int(42));
    let got = run(DOMAIN, "GlobalAveragePool", &live, &[Some(&block(&x))]).unwrap();
    assert_close(&got, &want, "GlobalAveragePool of 42 channels");
}

#[test]
fn pools_keep_padded_blocks_padded() {
    if !available() {
        crate::testing::skipped("neither AVX2 nor AVX-512: no blocked kernels on this CPU");
        return;
    }
    let x = seeded(&[1, 40, 9, 10], 12);
    let attrs = Attributes::new()
        .with("kernel_shape", ints(&[3, 3]))
        .with("strides", ints(&[2, 2]))
        .with("pads", ints(&[1, 1, 1, 1]));
    for op in ["MaxPool", "AveragePool"] {
        let want = run("", op, &attrs, &[Some(&x)]).unwrap();
        let got = run(DOMAIN, op, &attrs, &[Some(&block(&x))]).unwrap();
        assert_close(&got, &block(&want), &format!("{op} of 40 channels"));
    }
}

#[test]
fn blocked_concat_packs_the_live_channels() {
    if !available() {
        crate::testing::skipped("neither AVX2 nor AVX-512: no blocked kernels on this CPU");
        return;
    }
    // Shifts of 0, 10, 8 and 12 lanes; a whole block after a padded one; a last block padded.
    let parts = [
        seeded(&[2, 42, 4, 5], 20),
        seeded(&[2, 16, 4, 5], 21),
        seeded(&[2, 168, 4, 5], 22),
        seeded(&[2, 4, 4, 5], 23),
        seeded(&[2, 33, 4, 5], 24),
    ];
    let planar: Vec<Option<&Tensor>> = parts.iter().map(Some).collect();
    let axis = Attributes::new().with("axis", AttrValue::Int(1));
    let want = run("", "Concat", &axis, &planar).unwrap();
    assert_eq!(want.shape(), [2, 263, 4, 5]);
    let blocked: Vec<Tensor> = parts.iter().map(block).collect();
    let blocked: Vec<Option<&Tensor>> = blocked.iter().map(Some).collect();
    let live = Attributes::new().with("channels", ints(&[42, 16, 168, 4, 33]));
    let got = run(DOMAIN, "Concat", &live, &blocked).unwrap();
    assert_close(
        &got,
        &block(&want),
        "Concat of 42, 16, 168, 4 and 33 channels",
    );
    // Counts that do not match the inputs.
    let wrong = Attributes::new().with("channels", ints(&[42, 16, 160, 4, 33]));
    let err = run(DOMAIN, "Concat", &wrong, &blocked).unwrap_err();
    assert!(err.to_string().contains("160 channels"), "{err}");
    let short = Attributes::new().with("channels", ints(&[42, 16]));
    assert!(run(DOMAIN, "Concat", &short, &blocked).is_err());
    // Images of no cells give an empty output of the joined blocks.
    let empty = Tensor::from_shape_vec(&[1, 3, 0, 5, BLOCK], Vec::<f32>::new()).unwrap();
    let two = Attributes::new().with("channels", ints(&[42, 42]));
    let got = run(DOMAIN, "Concat", &two, &[Some(&empty), Some(&empty)]).unwrap();
    assert_eq!(got.shape(), [1, 6, 0, 5, BLOCK]);
}

#[test]
fn blocked_concat_with_relu_equals_concat_then_relu() {
    if !available() {
        crate::testing::skipped("neither AVX2 nor AVX-512: no blocked kernels on this CPU");
        return;
    }
    // Whole blocks (copied without the Relu) and a shifted padded one; NaN, -0 and negatives.
    let mut values = uniform(32 * 3 * 4, 30);
    values
        .iter_mut()
        .step_by(7)
        .zip([f32::NAN, -0.0, -3.0].into_iter().cycle())
        .for_each(|(x, v)| *x = v);
    let first = Tensor::from_shape_vec(&[1, 32, 3, 4], values).unwrap();
    let parts = [
        first,
        seeded(&[1, 42, 3, 4], 31),
        seeded(&[1, 16, 3, 4], 32),
    ];
    let planar: Vec<Option<&Tensor>> = parts.iter().map(Some).collect();
    let axis = Attributes::new().with("axis", AttrValue::Int(1));
    let joined = run("", "Concat", &axis, &planar).unwrap();
    let want = run("", "Relu", &Attributes::new(), &[Some(&joined)]).unwrap();
    let blocked: Vec<Tensor> = parts.iter().map(block).collect();
    let blocked: Vec<Option<&Tensor>> = blocked.iter().map(Some).collect();
    let attrs = Attributes::new()
        .with("channels", ints(&[32, 42, 16]))
        .with("relu", AttrValue::Int(1));
    let got = run(DOMAIN, "Concat", &attrs, &blocked).unwrap();
    let (got, want) = (got.view::<f32>().unwrap(), block(&want));
    let want = want.view::<f32>().unwrap();
    assert!(
        got.iter()
            .zip(want.iter())
            .all(|(g, w)| g.to_bits() == w.to_bits()),
        "Relu of the concatenation, bit for bit"
    );
    let bad = attrs.with("relu", AttrValue::Int(2));
    assert!(run(DOMAIN, "Concat", &bad, &blocked).is_err());
}

#[test]
fn reorder_output_undoes_the_blocking() {
    let x = seeded(&[2, 48, 5, 7], 9);
    let got = run(
        DOMAIN,
        "ReorderOutput",
        &Attributes::new(),
        &[Some(&block(&x))],
    )
    .unwrap();
    assert_close(&got, &x, "ReorderOutput");
    // A padded last block: 2 images of 42 channels in 3 blocks.
    let x = seeded(&[2, 42, 5, 7], 10);
    let live = Attributes::new().with("channels", AttrValue::Int(42));
    let got = run(DOMAIN, "ReorderOutput", &live, &[Some(&block(&x))]).unwrap();
    assert_close(&got, &x, "ReorderOutput of 42 channels");
    let wrong = Attributes::new().with("channels", AttrValue::Int(30));
    let err = run(DOMAIN, "ReorderOutput", &wrong, &[Some(&block(&x))]).unwrap_err();
    assert!(err.to_string().contains("30 channels"), "{err}");
}

#[test]
fn bad_blocked_inputs_are_typed_errors() {
    if !available() {
        crate::testing::skipped("neither AVX2 nor AVX-512: no blocked kernels on this CPU");
        return;
    }
    let attrs = Attributes::new().with("kernel_shape", ints(&[3, 3]));
    // A planar tensor where a blocked one is needed; weights for 16 channels on a blocked
    // image of two blocks (17 to 32 channels).
    let x = seeded(&[1, 16, 6, 6], 1);
    let err = run(DOMAIN, "MaxPool", &attrs, &[Some(&x)]).unwrap_err();
    assert!(err.to_string().contains("blocked"), "{err}");
    let xb = block(&seeded(&[1, 32, 6, 6], 1));
    let w = seeded(&[24, 16, 3, 3], 2);
    let err = run(DOMAIN, "Conv", &attrs, &[Some(&xb), Some(&w)]).unwrap_err();
    assert!(err.to_string().contains("W is [24, 16, 3, 3]"), "{err}");
    let grouped = attrs.clone().with("group", AttrValue::Int(2));
    assert!(run(DOMAIN, "Conv", &grouped, &[Some(&x), Some(&w)]).is_err());
}

#[test]
fn blocked_depthwise_convolutions_equal_the_planar_ones() {
    if !available() {
        crate::testing::skipped("neither AVX2 nor AVX-512: no blocked kernels on this CPU");
        return;
    }
    // (batch, channels, height, width, kernel, stride, pads, dilation, activation, bias)
    type Case = (
        usize,
        usize,
        usize,
        usize,
        usize,
        i64,
        [i64; 4],
        i64,
        &'static str,
        bool,
    );
    let cases: [Case; 16] = [
        (1, 32, 11, 11, 3, 1, [1; 4], 1, "Relu", true),
        // Interiors of 7 and 6 outputs: sliding runs of 4, the last overlapping.
        (1, 32, 6, 9, 3, 1, [1; 4], 1, "Relu", true),
        (1, 16, 7, 10, 5, 1, [2; 4], 1, "Relu", true),
        // 7×7 at unit stride (the sliding window's widest), five blocks (4 together and 1).
        (1, 80, 15, 17, 7, 1, [3; 4], 1, "Relu", true),
        (1, 16, 21, 13, 5, 1, [2; 4], 1, "Relu", true),
        (2, 80, 23, 23, 7, 2, [3; 4], 1, "Relu", true),
        (1, 16, 20, 19, 5, 2, [1, 2, 2, 1], 1, "Relu", false),
        (1, 32, 14, 25, 3, 1, [2; 4], 2, "HardSwish", true),
        (1, 16, 9, 30, 3, 1, [0; 4], 1, "LeakyRelu", true),
        (1, 48, 2, 3, 5, 1, [2; 4], 1, "Relu", true),
        (1, 16, 8, 8, 3, 3, [0, 1, 1, 0], 1, "Clip", true),
        // Padded last blocks: 42 channels in 3 blocks, 168 in 11 (4 + 4 + 3 together).
        (1, 42, 13, 12, 5, 1, [2; 4], 1, "Relu", true),
        (1, 168, 9, 9, 3, 2, [1; 4], 1, "HardSwish", true),
        // Whole rows in sliding runs: of 11 (the last overlapping) at 42 outputs; one run of 11
        // with both edges in it; runs of 4 under uneven padding wider than the window's half,
        // the last outputs' every tap in the padding.
        (1, 48, 6, 42, 5, 1, [2; 4], 1, "Clip", true),
        (1, 16, 4, 11, 7, 1, [3; 4], 1, "Relu", true),
        (1, 32, 5, 23, 3, 1, [0, 2, 1, 3], 1, "LeakyRelu", true),
    ];
    for (i, &(n, c, h, w, k, s, pads, d, activation, with_bias)) in cases.iter().enumerate() {
        let x = seeded(&[n, c, h, w], 400 + i as u64);
        let wt = seeded(&[c, 1, k, k], 500 + i as u64);
        let b = seeded(&[c], 600 + i as u64);
        let mut attrs = Attributes::new()
            .with("kernel_shape", ints(&[k as i64, k as i64]))
            .with("strides", ints(&[s, s]))
            .with("pads", ints(&pads))
            .with("dilations", ints(&[d, d]))
            .with("group", AttrValue::Int(c as i64))
            .with("activation", AttrValue::String(activation.into()));
        match activation {
            "LeakyRelu" => attrs = attrs.with("activation_params", AttrValue::Floats(vec![0.1])),
            "Clip" => attrs = attrs.with("activation_params", AttrValue::Floats(vec![-0.5, 0.5])),
            _ => {}
        }
        let inputs: Vec<&Tensor> = match with_bias {
            true => vec![&x, &wt, &b],
            false => vec![&x, &wt],
        };
        let wide: Vec<Tensor> = inputs.iter().map(|t| f64_copy(t)).collect();
        let wide: Vec<Option<&Tensor>> = wide.iter().map(Some).collect();
        let want = f32_copy(&run("com.microsoft", "FusedConv", &attrs, &wide).unwrap());
        let xb = block(&x);
        let mut blocked: Vec<Option<&Tensor>> = vec![Some(&xb), Some(&wt)];
        if with_bias {
            blocked.push(Some(&b));
        }
        let got = run(DOMAIN, "Conv", &attrs, &blocked).unwrap();
        assert_close(&got, &block(&want), &format!("depthwise case {i}"));
        // With `relu_input`: the convolution of `Relu` of the image.
        let relu: Vec<f32> = x
            .view::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.max(0.0))
            .collect();
        let relu = Tensor::from_shape_vec(x.shape(), relu).unwrap();
        let mut wide: Vec<Tensor> = inputs.iter().map(|t| f64_copy(t)).collect();
        wide[0] = f64_copy(&relu);
        let wide: Vec<Option<&Tensor>> = wide.iter().map(Some).collect();
        let want = f32_copy(&run("com.microsoft", "FusedConv", &attrs, &wide).unwrap());
        let relu_attrs = attrs.clone().with("relu_input", AttrValue::Int(1));
        let got = run(DOMAIN, "Conv", &relu_attrs, &blocked).unwrap();
        assert_close(
            &got,
            &block(&want),
            &format!("depthwise case {i}, relu_input"),
        );
    }
    // An image of width 0 with padding: every output is its bias (ReLU'd), no tap inside.
    let attrs = Attributes::new()
        .with("kernel_shape", ints(&[1, 3]))
        .with("pads", ints(&[0, 2, 0, 2]))
        .with("group", AttrValue::Int(16))
        .with("activation", AttrValue::String("Relu".into()));
    let x = Tensor::from_shape_vec(&[1, 1, 2, 0, BLOCK], Vec::<f32>::new()).unwrap();
    let (wt, b) = (seeded(&[16, 1, 1, 3], 3), seeded(&[16], 4));
    let got = run(DOMAIN, "Conv", &attrs, &[Some(&x), Some(&wt), Some(&b)]).unwrap();
    assert_eq!(got.shape(), [1, 1, 2, 2, BLOCK]);
    let bias = b.view::<f32>().unwrap();
    let got = got.view::<f32>().unwrap();
    for (i, v) in got.iter().enumerate() {
        assert_eq!(*v, bias[[i % BLOCK]].max(0.0), "empty image, output {i}");
    }
    // One group per channel only, and no residual.
    let x = block(&seeded(&[1, 32, 6, 6], 1));
    let attrs = Attributes::new()
        .with("kernel_shape", ints(&[3, 3]))
        .with("group", AttrValue::Int(16));
    let w = seeded(&[32, 2, 3, 3], 2);
    let err = run(DOMAIN, "Conv", &attrs, &[Some(&x), Some(&w)]).unwrap_err();
    assert!(err.to_string().contains("W must be [C, 1"), "{err}");
    let w = seeded(&[32, 1, 3, 3], 2);
    let err = run(DOMAIN, "Conv", &attrs, &[Some(&x), Some(&w)]).unwrap_err();
    assert!(err.to_string().contains("group"), "{err}");
    let depthwise = attrs.clone().with("group", AttrValue::Int(32));
    let z = x.clone();
    let err = run(
        DOMAIN,
        "Conv",
        &depthwise,
        &[Some(&x), Some(&w), None, Some(&z)],
    )
    .unwrap_err();
    assert!(err.to_string().contains("at most 3 inputs"), "{err}");
    let empty = Tensor::from_shape_vec(&[32, 1, 0, 3], Vec::<f32>::new()).unwrap();
    let err = run(DOMAIN, "Conv", &depthwise, &[Some(&x), Some(&empty)]).unwrap_err();
    assert!(err.to_string().contains("empty window"), "{err}");
}

#[test]
fn blocked_pad_equals_the_planar_pad() {
    // 40 channels (a padded last block); pads that grow, crop, and do both.
    let x = seeded(&[2, 40, 6, 7], 30);
    let cases: [([i64; 4], f32); 4] = [
        ([1, 1, 1, 1], 0.0),
        ([1, 0, 1, 0], 0.0),
        ([-1, -1, 1, 1], 0.0),
        ([0, 2, -2, 0], 0.5),
    ];
    for (pads, value) in cases {
        let [top, left, bottom, right] = pads;
        let onnx_pads =
            Tensor::from_shape_vec(&[8], vec![0i64, 0, top, left, 0, 0, bottom, right]).unwrap();
        let constant = Tensor::from_shape_vec(&[], vec![value]).unwrap();
        let want = run(
            "",
            "Pad",
            &Attributes::new(),
            &[Some(&x), Some(&onnx_pads), Some(&constant)],
        )
        .unwrap();
        let attrs = Attributes::new()
            .with("pads", ints(&pads))
            .with("value", AttrValue::Float(value));
        let got = run(DOMAIN, "Pad", &attrs, &[Some(&block(&x))]).unwrap();
        // The live channels, back in planes (the constant fills the padding lanes too).
        let live = Attributes::new().with("channels", AttrValue::Int(40));
        let got = run(DOMAIN, "ReorderOutput", &live, &[Some(&got)]).unwrap();
        assert_close(&got, &want, &format!("Pad {pads:?} with {value}"));
    }
    let crop_all = Attributes::new().with("pads", ints(&[-4, 0, -3, 0]));
    let err = run(DOMAIN, "Pad", &crop_all, &[Some(&block(&x))]).unwrap_err();
    assert!(err.to_string().contains("crop more"), "{err}");
}
