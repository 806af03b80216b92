use std::mem::MaybeUninit;

use super::*;
use crate::cpu::nn::epilogue::Activation;
use crate::test_values::uniform;

/// One test convolution: channels, image, padding (top, left, bottom, right).
struct Case {
    c: usize,
    m: usize,
    size: [usize; 2],
    pads: [usize; 4],
}

impl Case {
    fn out(&self) -> [usize; 2] {
        let [h, w] = self.size;
        let [t, l, b, r] = self.pads;
        [h + t + b - 2, w + l + r - 2]
    }

    /// The direct convolution in `f64`, planar, with each output's `Σ |w · x|` (the scale
    /// its rounding error is measured against).
    fn direct(&self, x: &[f32], w: &[f32], bias: &[f32]) -> (Vec<f64>, Vec<f64>) {
        let ([h, wd], [oh, ow]) = (self.size, self.out());
        let (pt, pl) = (self.pads[0] as isize, self.pads[1] as isize);
        let mut y = vec![0f64; self.m * oh * ow];
        let mut scale = vec![0f64; self.m * oh * ow];
        for o in 0..self.m {
            for i in 0..oh {
                for j in 0..ow {
                    let (mut sum, mut abs) = (f64::from(bias[o]), f64::from(bias[o]).abs());
                    for ch in 0..self.c {
                        for u in 0..3 {
                            for v in 0..3 {
                                let (yy, xx) =
                                    (i as isize + u as isize - pt, j as isize + v as isize - pl);
                                if yy < 0 || xx < 0 || yy >= h as isize || xx >= wd as isize {
                                    continue;
                                }
                                let a = f64::from(x[(ch * h + yy as usize) * wd + xx as usize]);
                                let b = f64::from(w[((o * self.c + ch) * 3 + u) * 3 + v]);
                                sum += a * b;
                                abs += (a * b).abs();
                            }
                        }
                    }
                    y[(o * oh + i) * ow + j] = sum;
                    scale[(o * oh + i) * ow + j] = abs;
                }
            }
        }
        (y, scale)
    }
}

/// Planes `[C][H][W]` to blocks `[C / 16][H][W][16]`.
fn to_blocks(x: &[f32], c: usize, plane: usize) -> Vec<f32> {
    let mut out = vec![0f32; x.len()];
    for ch in 0..c {
        for p in 0..plane {
            out[((ch / LANES) * plane + p) * LANES + ch % LANES] = x[ch * plane + p];
        }
    }
    out
}

/// Blocks `[C / 16][H][W][16]` to planes.
fn from_blocks(x: &[f32], c: usize, plane: usize) -> Vec<f32> {
    let mut out = vec![0f32; x.len()];
    for ch in 0..c {
        for p in 0..plane {
            out[ch * plane + p] = x[((ch / LANES) * plane + p) * LANES + ch % LANES];
        }
    }
    out
}

#[test]
fn winograd_convolutions_match_the_direct_sum() {
    if !applies([3, 3], [1, 1], [1, 1], 16, 16) {
        crate::testing::skipped(
            "neither AVX2 nor AVX-512: the Winograd path does not run on this CPU",
        );
        assert!(pack_filters(&[0.0; 16 * 16 * 9], 16, 16, [8, 8]).is_none());
        return;
    }
    // (input channels, output channels, image, padding top/left/bottom/right)
    let cases = [
        (16, 16, [4, 4], [1, 1, 1, 1]),
        (32, 48, [7, 7], [1, 1, 1, 1]),
        (16, 32, [14, 13], [1, 1, 1, 1]),
        (48, 16, [9, 11], [0, 0, 0, 0]),
        (16, 16, [3, 3], [0, 0, 0, 0]),
        (16, 16, [10, 6], [2, 0, 1, 2]),
        (32, 32, [29, 31], [1, 1, 1, 1]),
        // Past BLOCK_FLOATS of scratch: F(4×4) in blocks of 32 and 31 tile rows, F(2×2) in
        // three of 42, 42 and 41.
        (32, 32, [250, 38], [1, 1, 1, 1]),
    ]
    .map(|(c, m, size, pads)| Case { c, m, size, pads });
    for (n, case) in cases.iter().enumerate() {
        let (c, m) = (case.c, case.m);
        let [h, w] = case.size;
        let [oh, ow] = case.out();
        let x = uniform(c * h * w, 10 + n as u64);
        let wt = uniform(m * c * 9, 20 + n as u64);
        let bias = uniform(m, 30 + n as u64);
        let z = uniform(m * oh * ow, 40 + n as u64);
        let (want, scale) = case.direct(&x, &wt, &bias);
        // Outputs of these sizes pack for F(4×4, 3×3) and for F(2×2, 3×3) ([`wide`]); the
        // filters serve any image.
        for (tiles, products) in [([32, 32], 36), ([14, 14], 16)] {
            let filters = pack_filters(&wt, m, c, tiles).expect("AVX2 or AVX-512");
            assert_eq!(filters.len(), products);
            for (blocked_in, blocked_out, with_epilogue) in [
                (false, false, false),
                (true, true, true),
                (false, true, false),
                (true, false, true),
            ] {
                let xin = match blocked_in {
                    true => to_blocks(&x, c, h * w),
                    false => x.clone(),
                };
                let zin = match blocked_out {
                    true => to_blocks(&z, m, oh * ow),
                    false => z.clone(),
                };
                let epilogue = Epilogue {
                    add: Some(&zin[..]),
                    activation: Activation::Relu,
                };
                let mut y = vec![MaybeUninit::new(f32::NAN); m * oh * ow];
                let image = WinogradImage {
                    x: &xin,
                    blocked: blocked_in,
                    channels: c,
                    size: case.size,
                    pads: [case.pads[0], case.pads[1]],
                    out: [oh, ow],
                };
                convolve(
                    &filters,
                    &image,
                    &mut y,
                    blocked_out,
                    Some(&bias),
                    with_epilogue.then_some(&epilogue),
                );
                // SAFETY: every element was initialized (to NaN, then by `convolve`).
                let y: Vec<f32> = y.iter().map(|v| unsafe { v.assume_init() }).collect();
                let y = match blocked_out {
                    true => from_blocks(&y, m, oh * ow),
                    false => y,
                };
                for (i, &got) in y.iter().enumerate() {
                    let mut expect = want[i];
                    if with_epilogue {
                        expect = (expect + f64::from(z[i])).max(0.0);
                    }
                    let bound = 1e-5 * (scale[i] + 1.0);
                    assert!(
                        (f64::from(got) - expect).abs() <= bound,
                        "case {n} ({products} products, in blocked {blocked_in}, out blocked {blocked_out}): output {i} is {got}, want {expect}"
                    );
                }
            }
        }
    }
}

#[test]
fn transformed_filters_give_the_products_of_the_definition() {
    // One channel, one 6×6 tile: Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A is the 4×4 valid correlation.
    let g = uniform(9, 7);
    let mut u = [0f32; 36];
    transform::F4x4::filter(&g, &mut u);
    let bt: [[f64; 6]; 6] = [
        [4., 0., -5., 0., 1., 0.],
        [0., -4., -4., 1., 1., 0.],
        [0., 4., -4., -1., 1., 0.],
        [0., -2., -1., 2., 1., 0.],
        [0., 2., -1., -2., 1., 0.],
        [0., 4., 0., -5., 0., 1.],
    ];
    let at: [[f64; 6]; 4] = [
        [1., 1., 1., 1., 1., 0.],
        [0., 1., -1., 2., -2., 0.],
        [0., 1., 1., 4., 4., 0.],
        [0., 1., -1., 8., -8., 1.],
    ];
    let d = uniform(36, 8);
    let dv = |r: usize, c: usize| f64::from(d[r * 6 + c]);
    let v: Vec<f64> = (0..36)
        .map(|i| {
            let (r, c) = (i / 6, i % 6);
            (0..6)
                .flat_map(|a| (0..6).map(move |b| (a, b)))
                .map(|(a, b)| bt[r][a] * dv(a, b) * bt[c][b])
                .sum()
        })
        .collect();
    for i in 0..4 {
        for j in 0..4 {
            let got: f64 = (0..6)
                .flat_map(|a| (0..6).map(move |b| (a, b)))
                .map(|(a, b)| at[i][a] * f64::from(u[a * 6 + b]) * v[a * 6 + b] * at[j][b])
                .sum();
            let want: f64 = (0..3)
                .flat_map(|a| (0..3).map(move |b| (a, b)))
                .map(|(a, b)| f64::from(g[a * 3 + b]) * dv(i + a, j + b))
                .sum();
            assert!(
                (got - want).abs() < 1e-5,
                "({i}, {j}): {got} against {want}"
            );
        }
    }
}

/// A convolution into its outputs with its epilogue.
type Convolution<'a> = dyn Fn(&mut [MaybeUninit<f32>], Option<&Epilogue<'_, f32>>) + 'a;

/// A NaN in the image stays NaN in every output whose window holds it, whatever finishes the
/// outputs: none, a `Relu` or `Clip` clamped in registers (as the unfused kernels, which keep
/// NaN), with or without a residual; 2-D and 1-D (F(4, 3) along the width), blocked and
/// planar outputs.
#[test]
fn a_nan_in_the_image_stays_nan_through_every_epilogue() {
    if !applies([3, 3], [1, 1], [1, 1], 16, 16) {
        crate::testing::skipped(
            "neither AVX2 nor AVX-512: the Winograd path does not run on this CPU",
        );
        return;
    }
    let (c, m, side) = (16, 32, 9);
    let plane = side * side;
    let (nan_channel, nan_at) = (5, 4 * side + 4);
    let mut x = uniform(c * plane, 1);
    x[nan_channel * plane + nan_at] = f32::NAN;
    let blocked_x = to_blocks(&x, c, plane);
    let z = uniform(m * plane, 2);
    let bias = uniform(m, 3);
    let image = |blocked: bool, pads: [usize; 2]| WinogradImage {
        x: if blocked { &blocked_x } else { &x },
        blocked,
        channels: c,
        size: [side, side],
        pads,
        out: [side, side],
    };
    // Outputs laid out as `blocked` says, the residual likewise.
    let run = |blocked: bool, finish: Option<(Activation, bool)>, conv: &Convolution| {
        let zin = match blocked {
            true => to_blocks(&z, m, plane),
            false => z.clone(),
        };
        let epilogue = finish.map(|(activation, with_z)| Epilogue {
            add: with_z.then_some(&zin[..]),
            activation,
        });
        let mut y = vec![MaybeUninit::new(0.0f32); m * plane];
        conv(&mut y, epilogue.as_ref());
        // SAFETY: every element was initialized.
        let y: Vec<f32> = y.iter().map(|v| unsafe { v.assume_init() }).collect();
        match blocked {
            true => from_blocks(&y, m, plane),
            false => y,
        }
    };
    let finishes = [
        None,
        Some((Activation::Identity, true)),
        Some((Activation::Relu, false)),
        Some((Activation::Relu, true)),
        Some((Activation::Clip(-0.5, 0.5), false)),
    ];
    let wt = uniform(m * c * 9, 4);
    let filters = pack_filters(&wt, m, c, [side, side]).expect("AVX2 or AVX-512");
    let wt_line = uniform(m * c * 3, 5);
    let line_filters = line::pack_filters(&wt_line, m, c, 3).expect("AVX2 or AVX-512");
    for finish in finishes {
        for blocked_out in [true, false] {
            let y = run(blocked_out, finish, &|y, e| {
                convolve(
                    &filters,
                    &image(true, [1, 1]),
                    y,
                    blocked_out,
                    Some(&bias),
                    e,
                )
            });
            for o in 0..m {
                let got = y[o * plane + nan_at];
                assert!(
                    got.is_nan(),
                    "2-D, {finish:?}, out blocked {blocked_out}: channel {o} is {got}"
                );
            }
        }
        let y = run(true, finish, &|y, e| {
            line::convolve(
                &line_filters,
                line::Along::Width,
                &image(true, [0, 1]),
                y,
                Some(&bias),
                e,
            )
        });
        for o in 0..m {
            let got = y[o * plane + nan_at];
            assert!(got.is_nan(), "1×3, {finish:?}: channel {o} is {got}");
        }
    }
}
