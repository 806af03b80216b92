//! `Conv` (2-D) through a session at every optimization level against the spec's sum: general
//! small cases (groups, strides, dilations, asymmetric pads, bias), and shapes that take the
//! blocked NCHW16c layout (level `All`, output channels filling blocks), Winograd (3×3, stride
//! 1, 32 channels, enough tiles) and the depthwise kernels (one group per channel).

use proptest::prelude::*;
use spillway::{OptimizationLevel, Session};
use spillway_tests::build::{Attr, ModelBuilder};

use super::{assert_all_close, config, tensor, values};

/// One convolution: `x` is `[n, groups·cin, h, w]`, `w` is `[groups·cout, cin, kh, kw]`.
#[derive(Debug, Clone)]
struct Case {
    n: usize,
    groups: usize,
    cin: usize,
    cout: usize,
    h: usize,
    w: usize,
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    /// top, left, bottom, right (ONNX order: begins then ends).
    pads: [usize; 4],
    bias: bool,
}

impl Case {
    fn out(&self) -> Option<[usize; 2]> {
        let dim = |i: usize, len: usize| {
            let padded = len + self.pads[i] + self.pads[i + 2];
            let span = self.dilations[i] * (self.kernel[i] - 1) + 1;
            (padded >= span).then(|| (padded - span) / self.strides[i] + 1)
        };
        Some([dim(0, self.h)?, dim(1, self.w)?])
    }
    fn x_len(&self) -> usize {
        self.n * self.groups * self.cin * self.h * self.w
    }
    fn w_len(&self) -> usize {
        self.groups * self.cout * self.cin * self.kernel[0] * self.kernel[1]
    }
}

/// The spec's sum in f64, and the sum of magnitudes of its terms (for the tolerance).
#[allow(clippy::needless_range_loop)] // indices as the spec writes the sum
fn reference(c: &Case, x: &[f32], w: &[f32], b: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let [oh, ow] = c.out().expect("valid case");
    let (cin_all, m_all) = (c.groups * c.cin, c.groups * c.cout);
    let mut y = Vec::with_capacity(c.n * m_all * oh * ow);
    let mut mag = Vec::with_capacity(y.capacity());
    for n in 0..c.n {
        for m in 0..m_all {
            let g = m / c.cout;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = if c.bias { b[m] as f64 } else { 0.0 };
                    let mut abs = acc.abs();
                    for ic in 0..c.cin {
                        for ky in 0..c.kernel[0] {
                            for kx in 0..c.kernel[1] {
                                let iy = (oy * c.strides[0] + ky * c.dilations[0]) as isize
                                    - c.pads[0] as isize;
                                let ix = (ox * c.strides[1] + kx * c.dilations[1]) as isize
                                    - c.pads[1] as isize;
                                if iy < 0 || ix < 0 || iy >= c.h as isize || ix >= c.w as isize {
                                    continue;
                                }
                                let xi = ((n * cin_all + g * c.cin + ic) * c.h + iy as usize) * c.w
                                    + ix as usize;
                                let wi = ((m * c.cin + ic) * c.kernel[0] + ky) * c.kernel[1] + kx;
                                let t = x[xi] as f64 * w[wi] as f64;
                                acc += t;
                                abs += t.abs();
                            }
                        }
                    }
                    y.push(acc);
                    mag.push(abs);
                }
            }
        }
    }
    (y, mag)
}

fn check(c: &Case, x: &[f32], w: &[f32], b: &[f32]) -> Result<(), TestCaseError> {
    let [oh, ow] = c.out().expect("valid case");
    let (cin_all, m_all) = (c.groups * c.cin, c.groups * c.cout);
    let mut model = ModelBuilder::new(1);
    model
        .input("x", &[c.n as i64, cin_all as i64, c.h as i64, c.w as i64])
        .floats(
            "w",
            &[
                m_all as i64,
                c.cin as i64,
                c.kernel[0] as i64,
                c.kernel[1] as i64,
            ],
            w,
        );
    let mut inputs = vec!["x", "w"];
    if c.bias {
        model.floats("b", &[m_all as i64], b);
        inputs.push("b");
    }
    let ints = |v: &[usize]| Attr::Ints(v.iter().map(|&d| d as i64).collect());
    model
        .node(
            "Conv",
            &inputs,
            &["y"],
            &[
                ("group", Attr::Int(c.groups as i64)),
                ("kernel_shape", ints(&c.kernel)),
                ("strides", ints(&c.strides)),
                ("dilations", ints(&c.dilations)),
                ("pads", ints(&c.pads)),
            ],
        )
        .output("y");
    let bytes = model.to_bytes(17);
    let (want, mag) = reference(c, x, w, b);
    let atol: Vec<f64> = mag.iter().map(|m| 2e-4 * (m + 1.0)).collect();
    let image = tensor(&[c.n, cin_all, c.h, c.w], x);
    for level in [OptimizationLevel::Disabled, OptimizationLevel::All] {
        let session = Session::builder()
            .with_optimization(level)
            .commit_from_memory(&bytes)
            .map_err(|e| TestCaseError::fail(format!("{level:?}: load: {e}")))?;
        let out = session
            .run(vec![("x", image.clone())])
            .map_err(|e| TestCaseError::fail(format!("{level:?}: run: {e}")))?;
        assert_all_close(
            &format!("Conv {c:?} at {level:?}"),
            &[c.n, m_all, oh, ow],
            &want,
            &out[0],
            &atol,
            0.0,
        )?;
    }
    Ok(())
}

/// A case and its data.
fn with_data(
    case: impl Strategy<Value = Case>,
) -> impl Strategy<Value = (Case, Vec<f32>, Vec<f32>, Vec<f32>)> {
    case.prop_filter("output must not be empty", |c| c.out().is_some())
        .prop_flat_map(|c| {
            let (xl, wl, bl) = (c.x_len(), c.w_len(), c.groups * c.cout);
            (
                Just(c),
                values(xl, false),
                values(wl, false),
                values(bl, false),
            )
        })
}

fn general() -> impl Strategy<Value = Case> {
    (
        (1usize..=2, 1usize..=3, 1usize..=3, 1usize..=3),
        (1usize..=7, 1usize..=7),
        (
            [1usize..=3, 1usize..=3],
            [1usize..=3, 1usize..=3],
            [1usize..=2, 1usize..=2],
        ),
        (
            [0usize..=2, 0usize..=2, 0usize..=2, 0usize..=2],
            any::<bool>(),
        ),
    )
        .prop_map(
            |((n, groups, cin, cout), (h, w), (kernel, strides, dilations), (pads, bias))| Case {
                n,
                groups,
                cin,
                cout,
                h,
                w,
                kernel,
                strides,
                dilations,
                pads,
                bias,
            },
        )
}

/// Group 1 with output channels that fill blocks of 16: the blocked layout at level `All`.
fn blocked() -> impl Strategy<Value = Case> {
    (
        prop::sample::select(vec![1usize, 3, 8, 16, 17]),
        prop::sample::select(vec![16usize, 32]),
        (3usize..=9, 3usize..=9),
        (
            prop::sample::select(vec![1usize, 3]),
            1usize..=2,
            0usize..=1,
            any::<bool>(),
        ),
    )
        .prop_map(|(cin, cout, (h, w), (k, s, p, bias))| Case {
            n: 1,
            groups: 1,
            cin,
            cout,
            h,
            w,
            kernel: [k, k],
            strides: [s, s],
            dilations: [1, 1],
            pads: [p; 4],
            bias,
        })
}

/// 3×3, stride 1, 32 → 32 channels, 10×10 or larger outputs: Winograd where the CPU has it.
fn winograd() -> impl Strategy<Value = Case> {
    (10usize..=12, 10usize..=12, 0usize..=1, any::<bool>()).prop_map(|(h, w, p, bias)| Case {
        n: 1,
        groups: 1,
        cin: 32,
        cout: 32,
        h,
        w,
        kernel: [3, 3],
        strides: [1, 1],
        dilations: [1, 1],
        pads: [p; 4],
        bias,
    })
}

/// One group per channel (multiplier 1): the depthwise kernels, blocked ones where the
/// channels fill blocks.
fn depthwise() -> impl Strategy<Value = Case> {
    (
        prop::sample::select(vec![1usize, 3, 16, 32]),
        (3usize..=9, 3usize..=9),
        (
            prop::sample::select(vec![3usize, 5]),
            1usize..=2,
            0usize..=2,
            any::<bool>(),
        ),
    )
        .prop_map(|(channels, (h, w), (k, s, p, bias))| Case {
            n: 1,
            groups: channels,
            cin: 1,
            cout: 1,
            h,
            w,
            kernel: [k, k],
            strides: [s, s],
            dilations: [1, 1],
            pads: [p; 4],
            bias,
        })
}

proptest! {
    #![proptest_config(config(48))]
    #[test]
    fn conv_general((c, x, w, b) in with_data(general())) {
        check(&c, &x, &w, &b)?;
    }
}

proptest! {
    #![proptest_config(config(16))]
    #[test]
    fn conv_blocked((c, x, w, b) in with_data(blocked())) {
        check(&c, &x, &w, &b)?;
    }

    #[test]
    fn conv_depthwise((c, x, w, b) in with_data(depthwise())) {
        check(&c, &x, &w, &b)?;
    }
}

proptest! {
    #![proptest_config(config(4))]
    #[test]
    fn conv_winograd((c, x, w, b) in with_data(winograd())) {
        check(&c, &x, &w, &b)?;
    }
}
