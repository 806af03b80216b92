//! Session options travel with the session, not the process: sessions of one model built side
//! by side in one process with different layouts, GEMM instruction sets and Winograd choices
//! each compute the convolutions right (against a direct f64 convolution) and each took the
//! path its options ask for (the optimized graph's nodes, the kernels' reported choices).
//! Thread pinning is off unless asked for.

use spillway::kernel_options::{GemmIsa, Winograd};
use spillway::{
    ActivationLayout, KernelOptions, RunStats, Session, SessionBuilder, Tensor, ThreadOptions,
};
use spillway_kernels::cpu::nn::blocked::DOMAIN;
use spillway_kernels::cpu::nn::packed_gemm::Isa;
use spillway_kernels::testing::skipped;
use spillway_tests::build::{Attr, ModelBuilder};

/// Channels in and out of both convolutions.
const C: usize = 32;
/// Image height and width.
const S: usize = 14;

/// Seeded values in [-scale, scale).
fn seeded(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0) * scale
        })
        .collect()
}

/// The weights and biases of the two 3×3 convolutions.
struct Weights {
    w: [Vec<f32>; 2],
    b: [Vec<f32>; 2],
}

fn weights() -> Weights {
    Weights {
        w: [seeded(C * C * 9, 11, 0.1), seeded(C * C * 9, 12, 0.1)],
        b: [seeded(C, 13, 0.1), seeded(C, 14, 0.1)],
    }
}

/// `x [1, 32, 14, 14] → Conv 3×3 (pads 1) → Relu → Conv 3×3 (pads 1) → Relu → y`: Winograd
/// pays on both convolutions by default, and the default layout blocks the first one's output.
fn model(weights: &Weights) -> Vec<u8> {
    let mut m = ModelBuilder::new(5);
    let (c, s) = (C as i64, S as i64);
    m.input("x", &[1, c, s, s]);
    let mut from = "x".to_string();
    for i in 0..2 {
        let (w, b, conv, relu) = (
            format!("w{i}"),
            format!("b{i}"),
            format!("conv{i}"),
            format!("relu{i}"),
        );
        m.floats(&w, &[c, c, 3, 3], &weights.w[i])
            .floats(&b, &[c], &weights.b[i])
            .node(
                "Conv",
                &[&from, &w, &b],
                &[&conv],
                &[
                    ("kernel_shape", Attr::Ints(vec![3, 3])),
                    ("pads", Attr::Ints(vec![1; 4])),
                ],
            )
            .node("Relu", &[&conv], &[&relu], &[]);
        from = relu;
    }
    m.output(&from);
    m.to_bytes(13)
}

/// `relu(conv(x, w) + b)`, 3×3 with pads 1, in f64.
fn conv_relu(x: &[f64], w: &[f32], b: &[f32]) -> Vec<f64> {
    let mut y = vec![0f64; C * S * S];
    for m in 0..C {
        for oy in 0..S {
            for ox in 0..S {
                let mut sum = f64::from(b[m]);
                for c in 0..C {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let (iy, ix) = ((oy + ky) as isize - 1, (ox + kx) as isize - 1);
                            if iy < 0 || ix < 0 || iy >= S as isize || ix >= S as isize {
                                continue;
                            }
                            let xv = x[(c * S + iy as usize) * S + ix as usize];
                            sum += xv * f64::from(w[((m * C + c) * 3 + ky) * 3 + kx]);
                        }
                    }
                }
                y[(m * S + oy) * S + ox] = sum.max(0.0);
            }
        }
    }
    y
}

/// The model's output computed directly.
fn reference(x: &[f32], weights: &Weights) -> Vec<f64> {
    let x: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let h = conv_relu(&x, &weights.w[0], &weights.b[0]);
    conv_relu(&h, &weights.w[1], &weights.b[1])
}

/// Runs `session` on `x` and checks its output against `want`: the largest difference at most
/// 1e-4 of the largest value.
fn check(label: &str, session: &Session, x: &[f32], want: &[f64]) -> RunStats {
    let input = Tensor::from_shape_vec(&[1, C, S, S], x.to_vec()).unwrap();
    let (outputs, stats) = session.run_with_stats(vec![("x", input)]).unwrap();
    let y = outputs.tensor_at(0).unwrap().to_f32_array().unwrap();
    assert_eq!(y.shape(), &[1, C, S, S], "{label}");
    let scale = want.iter().fold(0f64, |a, v| a.max(v.abs()));
    let worst = y
        .iter()
        .zip(want)
        .fold(0f64, |a, (&got, &w)| a.max((f64::from(got) - w).abs()));
    assert!(scale > 0.0, "{label}: the reference is all zeros");
    assert!(
        worst <= 1e-4 * scale,
        "{label}: off by {worst} (largest value {scale})"
    );
    stats
}

/// How many nodes of the session's optimized graph are blocked (`spillway.nchw16c`) kernels.
fn blocked_nodes(session: &Session) -> usize {
    session
        .graph()
        .nodes
        .iter()
        .filter(|n| n.domain == DOMAIN)
        .count()
}

/// The kernel choices of the session's convolutions (one per convolution node).
fn conv_choices(session: &Session) -> Vec<String> {
    session
        .kernel_choices()
        .into_iter()
        .map(|(_, choice)| choice)
        .collect()
}

fn build(builder: SessionBuilder, bytes: &[u8]) -> Session {
    builder.commit_from_memory(bytes).unwrap()
}

#[test]
fn sessions_side_by_side_take_the_paths_their_options_ask_for() {
    let weights = weights();
    let bytes = model(&weights);
    let x = seeded(C * S * S, 21, 1.0);
    let want = reference(&x, &weights);

    // Built one after the other, then run interleaved: each keeps its own choices.
    let default = build(Session::builder(), &bytes);
    let generic = build(
        Session::builder()
            .with_layout(ActivationLayout::Planar)
            .with_kernel_options(
                KernelOptions::default()
                    .with_gemm(GemmIsa::Generic)
                    .with_winograd(Winograd::Never),
            ),
        &bytes,
    );
    let planar_never = build(
        Session::builder()
            .with_layout(ActivationLayout::Planar)
            .with_kernel_options(KernelOptions::default().with_winograd(Winograd::Never)),
        &bytes,
    );
    let avx2_always = build(
        Session::builder()
            .with_layout(ActivationLayout::Planar)
            .with_kernel_options(
                KernelOptions::default()
                    .with_gemm(GemmIsa::Avx2)
                    .with_winograd(Winograd::Always)
                    .with_four_vector_panels(false),
            ),
        &bytes,
    );
    let sessions = [
        ("default", &default),
        ("generic", &generic),
        ("planar, never Winograd", &planar_never),
        ("planar, AVX2, always Winograd", &avx2_always),
    ];
    for _ in 0..2 {
        for (label, session) in sessions {
            check(label, session, &x, &want);
        }
    }

    // What each session was built with.
    assert_eq!(default.kernel_options(), KernelOptions::default());
    assert_eq!(generic.kernel_options().gemm, GemmIsa::Generic);
    assert_eq!(avx2_always.kernel_options().winograd, Winograd::Always);

    // The generic matrix core has no packed GEMM: planes, and no Winograd, on any CPU.
    assert_eq!(blocked_nodes(&generic), 0);
    assert_eq!(conv_choices(&generic), ["generic", "generic"]);
    assert_eq!(blocked_nodes(&planar_never), 0);
    assert_eq!(blocked_nodes(&avx2_always), 0);

    if Isa::supported().contains(&Isa::Avx2) {
        // AVX2 even on an AVX-512 CPU (and whatever `SPILLWAY_GEMM` makes the default).
        assert_eq!(conv_choices(&avx2_always), ["winograd-avx2"; 2]);
    } else {
        skipped("no AVX2: the AVX2 session falls to the generic matrix core");
    }
    let Some(isa) = Isa::detect() else {
        skipped("the default GEMM is the generic one here (no AVX2 or AVX-512, or SPILLWAY_GEMM)");
        return;
    };
    // By default: blocks of 16 channels, and Winograd (which pays on 14×14 with 32 channels).
    assert!(blocked_nodes(&default) > 0, "{:?}", default.graph().nodes);
    let winograd = format!("winograd-{}", isa.name());
    assert_eq!(conv_choices(&default), [winograd.as_str(); 2]);
    // Never Winograd: the packed GEMM.
    let packed = format!("packed-{}", isa.name());
    assert_eq!(conv_choices(&planar_never), [packed.as_str(); 2]);
}

/// A session runs where its runs are faster, on the kernel pool or on the calling thread, and
/// tries both on its first runs: every run computes the convolutions right, wherever it ran.
#[test]
fn runs_on_the_pool_and_on_the_calling_thread_compute_the_same() {
    let weights = weights();
    let bytes = model(&weights);
    let x = seeded(C * S * S, 21, 1.0);
    let want = reference(&x, &weights);
    let session = build(Session::builder(), &bytes);
    let sites: Vec<bool> = (0..8)
        .map(|run| check(&format!("run {run}"), &session, &x, &want).on_calling_thread)
        .collect();
    // The first runs go to the pool, the third is tried on the calling thread.
    assert_eq!(&sites[..3], &[false, false, true], "{sites:?}");
}

#[test]
fn a_library_session_does_not_pin_its_threads_unless_asked() {
    let bytes = model(&weights());
    assert!(!ThreadOptions::default().pin);
    assert!(ThreadOptions::default().spin);
    let plain = build(Session::builder(), &bytes);
    assert_eq!(plain.thread_options(), ThreadOptions::default());
    assert!(!plain.thread_options().pin);
    let pinned = build(
        Session::builder()
            .with_thread_pinning(true)
            .with_spinning(false),
        &bytes,
    );
    assert!(pinned.thread_options().pin);
    assert!(!pinned.thread_options().spin);
    // Both run, on their own pools.
    let x = seeded(C * S * S, 22, 1.0);
    let want = reference(&x, &weights());
    check("unpinned", &plain, &x, &want);
    check("pinned, not spinning", &pinned, &x, &want);
}
