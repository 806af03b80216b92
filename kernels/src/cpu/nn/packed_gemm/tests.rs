use super::*;
use crate::cpu::nn::epilogue::Activation;
use crate::test_values::uniform as values;

/// `C = A · B` by the definition, in f64.
fn reference(a: &[f32], b: &[f32], ldb: usize, m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a[i * k + p] as f64;
            for j in 0..n {
                c[i * n + j] += av * b[p * ldb + j] as f64;
            }
        }
    }
    c
}

fn isas() -> Vec<Isa> {
    Isa::supported()
}

/// Checks every instruction set on `m × k × n` with padded strides, in a pool of `threads`.
fn check(m: usize, k: usize, n: usize, threads: usize) {
    let (ldb, ldc) = (n + 3, n + 5);
    let a = values(m * k, (m * 31 + k) as u64);
    let b = values(k.max(1) * ldb, (k * 17 + n) as u64);
    let want = reference(&a, &b, ldb, m, k, n);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    for isa in isas() {
        let packed = PackedA::with_isa(&a, m, k, isa);
        // Cells outside the m × n window must keep the sentinel.
        let mut c = vec![f32::NAN; m.max(1) * ldc];
        let src = BSource::Dense { data: &b, ld: ldb };
        pool.install(|| packed.multiply(src, n, &mut c, ldc, None, None));
        for i in 0..m {
            for j in 0..ldc {
                let got = c[i * ldc + j];
                if j >= n {
                    assert!(got.is_nan(), "{isa:?} {m}x{k}x{n}: wrote padding ({i},{j})");
                    continue;
                }
                let w = want[i * n + j];
                let tol = 1e-5 * (k as f64).sqrt().max(1.0) * (1.0 + w.abs());
                assert!(
                    (got as f64 - w).abs() <= tol,
                    "{isa:?} {m}x{k}x{n} threads {threads}: ({i},{j}) {got} vs {w}"
                );
            }
        }
    }
}

#[test]
fn matches_the_definition_on_edge_shapes() {
    for &(m, k, n) in &[
        (1, 1, 1),
        (1, 7, 1),
        (5, 3, 7),
        (8, 256, 32),
        (6, 16, 16),
        (9, 257, 33),
        (13, 300, 50),
        // Last panels 17, 24 and 29 columns wide (the narrow kernels' cases: 16 + 8, and
        // the full kernel past 24).
        (10, 300, 49),
        (11, 40, 24),
        (7, 20, 61),
        (3, 0, 4),
    ] {
        check(m, k, n, 1);
    }
}

#[test]
fn matches_the_definition_across_blocks_and_threads() {
    // Past MC rows, KC depth and NC columns; then parallel by columns and by rows.
    check(70, 2 * KC + 18, 2100, 1);
    check(70, 2 * KC + 18, 2100, 4);
    check(300, KC + 4, 20, 4);
}

#[test]
fn packing_keeps_every_value_once() {
    for isa in isas() {
        let (m, k) = (11, KC + 44);
        let a = values(m * k, 5);
        let p = PackedA::with_isa(&a, m, k, isa);
        let mut seen: Vec<f32> = p
            .data
            .as_slice()
            .iter()
            .copied()
            .filter(|&v| v != 0.0)
            .collect();
        let mut want: Vec<f32> = a.iter().copied().filter(|&v| v != 0.0).collect();
        seen.sort_by(f32::total_cmp);
        want.sort_by(f32::total_cmp);
        assert_eq!(seen, want, "{isa:?}");
        assert_eq!((p.rows(), p.cols()), (m, k));
    }
}

#[test]
fn epilogue_finishes_every_element_once() {
    // Depth past KC (two blocks) and a row stride past n: the residual must be added once per
    // element, after the last block, and the activation applied to the full sum; the padding
    // columns between rows stay untouched. The second shape has rows past MC and columns past
    // NC, so the epilogue runs over several row and column blocks; the third is cut into row
    // blocks that share one packed B of three depth blocks and three column panels.
    let cases = [
        (13, KC + 44, 41, 45),
        (70, KC + 44, 2100, 2103),
        (150, 2 * KC + 88, 70, 73),
    ];
    for (m, k, n, ldc) in cases {
        check_epilogue(m, k, n, ldc);
    }
}

fn check_epilogue(m: usize, k: usize, n: usize, ldc: usize) {
    let a = values(m * k, 9);
    let b = values(k * n, 10);
    let z = values(m * ldc, 11);
    let bias: Vec<f32> = (0..m).map(|i| 0.5 * i as f32 - 3.0).collect();
    let want = reference(&a, &b, n, m, k, n);
    for isa in isas() {
        for threads in [1, 4] {
            let packed = PackedA::with_isa(&a, m, k, isa);
            let mut c = vec![7.0f32; m * ldc];
            let epilogue = Epilogue {
                add: Some(&z),
                activation: Activation::Relu,
            };
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                packed.multiply(
                    BSource::Dense { data: &b, ld: n },
                    n,
                    &mut c,
                    ldc,
                    Some(&bias),
                    Some(&epilogue),
                )
            });
            for i in 0..m {
                for j in 0..ldc {
                    let got = c[i * ldc + j] as f64;
                    if j >= n {
                        assert_eq!(got, 7.0, "{isa:?}: padding ({i}, {j}) written");
                        continue;
                    }
                    let w = (want[i * n + j] + bias[i] as f64 + z[i * ldc + j] as f64).max(0.0);
                    assert!(
                        (got - w).abs() <= 1e-4 * (1.0 + w.abs()),
                        "{isa:?} x{threads}: ({i}, {j}) {got} vs {w}"
                    );
                }
            }
        }
    }
}

#[test]
fn bias_starts_every_row_once() {
    // Depth past KC (two blocks): the bias must be added once, not per block.
    let (m, k, n) = (11, KC + 44, 37);
    let a = values(m * k, 7);
    let b = values(k * n, 8);
    let bias: Vec<f32> = (0..m).map(|i| i as f32 - 4.0).collect();
    let want = reference(&a, &b, n, m, k, n);
    for isa in isas() {
        let packed = PackedA::with_isa(&a, m, k, isa);
        let mut c = vec![0.0f32; m * n];
        packed.multiply(
            BSource::Dense { data: &b, ld: n },
            n,
            &mut c,
            n,
            Some(&bias),
            None,
        );
        for i in 0..m {
            for j in 0..n {
                let w = want[i * n + j] + bias[i] as f64;
                assert!(
                    (c[i * n + j] as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                    "{isa:?}"
                );
            }
        }
    }
}

/// The im2col matrix of `im` by the definition.
fn im2col_by_definition(im: &Image2d, channels: usize) -> Vec<f32> {
    let ([h, w], [kh, kw], [oh, ow]) = (im.size, im.kernel, im.out);
    let mut out = Vec::new();
    for c in 0..channels {
        for u in 0..kh {
            for v in 0..kw {
                for i in 0..oh {
                    for j in 0..ow {
                        let y =
                            (i * im.strides[0] + u * im.dilations[0]) as i64 - im.pads[0] as i64;
                        let x =
                            (j * im.strides[1] + v * im.dilations[1]) as i64 - im.pads[1] as i64;
                        let inside = y >= 0 && x >= 0 && y < h as i64 && x < w as i64;
                        out.push(if inside {
                            im.img[(c * h + y as usize) * w + x as usize]
                        } else {
                            0.0
                        });
                    }
                }
            }
        }
    }
    out
}

#[test]
fn image_source_is_the_im2col_matrix() {
    // (channels, size, kernel, strides, dilations, pads): unit and large strides, dilations,
    // pads larger than the kernel reach, 1x1, non-square, output rows shorter than NR.
    type Case = (
        usize,
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 2],
    );
    let cases: &[Case] = &[
        (3, [9, 11], [3, 3], [1, 1], [1, 1], [1, 1]),
        (2, [14, 14], [7, 7], [2, 2], [1, 1], [3, 3]),
        (4, [10, 7], [3, 2], [2, 1], [2, 1], [2, 0]),
        (1, [5, 5], [1, 1], [1, 1], [1, 1], [0, 0]),
        (KC / 9 + 4, [8, 8], [3, 3], [1, 1], [1, 1], [1, 1]),
        (2, [6, 40], [1, 5], [1, 3], [1, 2], [0, 4]),
        // Unit strides, rows of 37 and 33 (full tiles plus narrow ones), several depth blocks.
        (KC / 9 + 4, [5, 37], [3, 3], [1, 1], [1, 1], [1, 1]),
        (3, [12, 33], [3, 3], [1, 1], [2, 2], [2, 2]),
        (3, [4, 17], [1, 7], [1, 1], [1, 1], [0, 3]),
        // Pointwise, read without a copy: two depth blocks and a last tile that would run
        // past the image (packed instead); several tiles ending in a narrow one.
        (KC + 44, [7, 9], [1, 1], [1, 1], [1, 1], [0, 0]),
        (5, [12, 12], [1, 1], [1, 1], [1, 1], [0, 0]),
        // Unpadded windows, read without a copy (inception's 3×3 stems): tiles whose window
        // would reach past the last channel are packed; dilated; several depth blocks.
        (32, [15, 15], [3, 3], [1, 1], [1, 1], [0, 0]),
        (3, [11, 19], [3, 2], [1, 1], [2, 3], [0, 0]),
        (KC / 9 + 4, [6, 21], [3, 3], [1, 1], [1, 1], [0, 0]),
        // 1x1 with stride 2: one of the four phases is read, and only it is copied.
        (6, [9, 9], [1, 1], [2, 2], [1, 1], [0, 0]),
        // Strided windows without padding (squeezenet's stem), read in place by position
        // tiles: the last row and column unread, uneven strides with dilations.
        (3, [16, 17], [3, 3], [2, 2], [1, 1], [0, 0]),
        (2, [13, 12], [3, 2], [2, 3], [2, 1], [0, 0]),
        // Outputs of 7×7, 7×5 and 1×41: position tiles of 7 (the last one partly empty for
        // 41).
        (20, [7, 7], [3, 3], [1, 1], [1, 1], [1, 1]),
        (3, [14, 10], [3, 3], [2, 2], [1, 1], [1, 1]),
        (2, [1, 41], [1, 3], [1, 1], [1, 1], [0, 1]),
        // 576 outputs: position tiles in a group of 64 and one of 8, and for 150 rows, their
        // channels in blocks of 4 panels and 1.
        (3, [24, 24], [3, 3], [1, 1], [1, 1], [1, 1]),
        // Last position tiles of 7, 2, 5 and 1 positions (15, 66, 85 and 121 outputs in tiles
        // of 8), each computed by its own kernel.
        (3, [1, 15], [1, 1], [1, 1], [1, 1], [0, 0]),
        (3, [1, 66], [1, 1], [1, 1], [1, 1], [0, 0]),
        (3, [1, 85], [1, 1], [1, 1], [1, 1], [0, 0]),
        (4, [11, 11], [1, 1], [1, 1], [1, 1], [0, 0]),
    ];
    for &(ch, size, kernel, strides, dilations, pads) in cases {
        let out = [0, 1]
            .map(|d| (size[d] + 2 * pads[d] - dilations[d] * (kernel[d] - 1) - 1) / strides[d] + 1);
        let img = values(ch * size[0] * size[1], ch as u64);
        let im = Image2d {
            img: &img,
            size,
            kernel,
            strides,
            dilations,
            pads,
            out,
        };
        // Few rows (one row block) and many (row blocks in parallel, B gathered once); for
        // position tiles, a last channel panel of 10, 8 (16 wide) and 22 (32 wide), and
        // on AVX-512 two panels of four vectors (128).
        for (m, threads) in [(10, 1), (10, 4), (40, 3), (150, 4), (128, 2)] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            check_image(&im, ch, m, &pool);
        }
    }
}

/// The image source against the im2col matrix built by definition, `m` rows of `A`, with a
/// bias: through [`PackedA::multiply`], and through each path it may take (packing `B`, or
/// reading the image in place).
fn check_image(im: &Image2d, ch: usize, m: usize, pool: &rayon::ThreadPool) {
    let (k, n) = (ch * im.kernel[0] * im.kernel[1], im.out[0] * im.out[1]);
    let (size, kernel, strides) = (im.size, im.kernel, im.strides);
    let cols = im2col_by_definition(im, ch);
    let a = values(m * k, 99);
    let bias = values(m, 7);
    let mut want = reference(&a, &cols, n, m, k, n);
    for (i, row) in want.chunks_mut(n).enumerate() {
        row.iter_mut().for_each(|w| *w += bias[i] as f64);
    }
    for isa in isas() {
        let packed = PackedA::with_isa(&a, m, k, isa);
        type Path<'a> = &'a (dyn Fn(&mut [f32]) + Sync);
        let every_isa: [(&str, Path); 3] = [
            ("multiply", &|c| {
                packed.multiply(BSource::Image(im), n, c, n, Some(&bias), None)
            }),
            ("packed", &|c| {
                packed.multiply_packed(BSource::Image(im), n, c, n, Some(&bias), None)
            }),
            ("in place", &|c| {
                packed.multiply_in_place(im, c, n, Some(&bias), None)
            }),
        ];
        let mut paths = every_isa.to_vec();
        let positions = |c: &mut [f32]| packed.multiply_positions(im, c, n, Some(&bias), None);
        paths.push(("positions", &positions));
        for (path, run) in paths {
            let mut c = vec![f32::NAN; m * n];
            pool.install(|| run(&mut c));
            for (idx, (g, w)) in c.iter().zip(&want).enumerate() {
                let tol = 1e-5 * (k as f64).sqrt() * (1.0 + w.abs());
                assert!(
                    (*g as f64 - w).abs() <= tol,
                    "{path} {isa:?} {size:?} {kernel:?} {strides:?} m {m}: [{idx}] {g} vs {w}"
                );
            }
        }
        // A residual and a Relu finish each output exactly once, on both paths.
        let z: Vec<f32> = values(m * n, 5).iter().map(|v| v - 0.5).collect();
        let epilogue = Epilogue {
            add: Some(&z),
            activation: Activation::Relu,
        };
        let every_isa: [(&str, Path); 2] = [
            ("packed + epilogue", &|c| {
                packed.multiply_packed(BSource::Image(im), n, c, n, Some(&bias), Some(&epilogue))
            }),
            ("in place + epilogue", &|c| {
                packed.multiply_in_place(im, c, n, Some(&bias), Some(&epilogue))
            }),
        ];
        let mut finished = every_isa.to_vec();
        let positions_finished =
            |c: &mut [f32]| packed.multiply_positions(im, c, n, Some(&bias), Some(&epilogue));
        finished.push(("positions + epilogue", &positions_finished));
        for (path, run) in finished {
            let mut c = vec![f32::NAN; m * n];
            pool.install(|| run(&mut c));
            for (idx, (g, w)) in c.iter().zip(&want).enumerate() {
                let w = (w + z[idx] as f64).max(0.0);
                let tol = 1e-5 * (k as f64).sqrt() * (1.0 + w.abs());
                assert!(
                    (*g as f64 - w).abs() <= tol,
                    "{path} {isa:?} {size:?} {kernel:?} {strides:?} m {m}: [{idx}] {g} vs {w}"
                );
            }
        }
    }
}

#[test]
fn tile_epilogue_equals_the_separate_pass_bit_for_bit() {
    // The clamp epilogues finish in the tiles' registers; the result must be what the separate
    // pass makes of the plain product: the residual holds NaN, −0.0 and values on the clip's
    // bounds. Position tiles and column tiles (packed, or reading the image in place), on a
    // padded 3×3 image two depth blocks deep (the clamp follows the last one; in place, the
    // tiles are cropped first), a pointwise one read in place and one whose last tiles are
    // narrow; 44 rows end in a partial row panel.
    type Run<'a> = &'a dyn Fn(&PackedA, &Image2d, &mut [f32], Option<&Epilogue<'_, f32>>);
    let positions: Run = &|p, im, c, e| p.multiply_positions(im, c, c.len() / p.m, Some(&BIAS), e);
    let packed: Run = &|p, im, c, e| {
        let n = c.len() / p.m;
        p.multiply_packed(BSource::Image(im), n, c, n, Some(&BIAS), e)
    };
    let in_place: Run = &|p, im, c, e| p.multiply_in_place(im, c, c.len() / p.m, Some(&BIAS), e);
    // (channels, size, kernel, rows, paths)
    type Case<'a> = (usize, [usize; 2], [usize; 2], usize, &'a [Run<'a>]);
    let cases: [Case; 3] = [
        (
            KC / 9 + 4,
            [6, 13],
            [3, 3],
            40,
            &[positions, packed, in_place],
        ),
        (16, [32, 32], [1, 1], 44, &[packed, in_place]),
        (5, [3, 47], [1, 1], 44, &[packed, in_place]),
    ];
    for (ch, size, kernel, m, runs) in cases {
        let img = values(ch * size[0] * size[1], 3);
        let pads = kernel.map(|k| k / 2);
        let im = Image2d {
            img: &img,
            size,
            kernel,
            strides: [1, 1],
            dilations: [1, 1],
            pads,
            out: size,
        };
        let (k, n) = (ch * kernel[0] * kernel[1], size[0] * size[1]);
        let a: Vec<f32> = values(m * k, 4).iter().map(|v| v - 0.5).collect();
        let special = [f32::NAN, -0.0, 0.0, -0.25, 0.25];
        let z: Vec<f32> = values(m * n, 6)
            .iter()
            .enumerate()
            .map(|(i, v)| special.get(i % 11).copied().unwrap_or(v - 0.5))
            .collect();
        for activation in [
            Activation::Identity,
            Activation::Relu,
            Activation::Clip(-0.25, 0.25),
        ] {
            for add in [None, Some(&z[..])] {
                let epilogue = Epilogue { add, activation };
                for isa in isas() {
                    let packed = PackedA::with_isa(&a, m, k, isa);
                    for (path, run) in runs.iter().enumerate() {
                        let mut want = vec![0.0f32; m * n];
                        run(&packed, &im, &mut want, None);
                        epilogue.finish(&mut want, 0);
                        let mut got = vec![0.0f32; m * n];
                        run(&packed, &im, &mut got, Some(&epilogue));
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(
                            bits(&got),
                            bits(&want),
                            "{size:?} path {path} {isa:?} {activation:?} {add:?}"
                        );
                    }
                }
            }
        }
    }
}

/// The bias of [`tile_epilogue_equals_the_separate_pass_bit_for_bit`]'s rows.
const BIAS: [f32; 44] = {
    let mut b = [0.0f32; 44];
    let mut i = 0;
    while i < 44 {
        b[i] = (i % 7) as f32 * 0.125 - 0.375;
        i += 1;
    }
    b
};

#[test]
fn token_major_product_matches_the_definition() {
    // (tokens, k, m): partial tiles of tokens, a half panel of features (m = 48), several
    // depth blocks (k > KC), on one thread and on three.
    for &(tokens, k, m) in &[(1, 5, 16), (9, 33, 48), (128, 64, 32), (17, 2 * KC + 7, 64)] {
        let w = values(m * k, (m * 7 + k) as u64);
        let x = values(tokens * k, (tokens + 3 * k) as u64);
        let bias = values(m, 11);
        // y[t][j] = Σ x[t][p] · w[j][p]: the definition with A = x, B = wᵀ.
        let wt: Vec<f32> = (0..k * m).map(|i| w[(i % m) * k + i / m]).collect();
        let want = reference(&x, &wt, m, tokens, k, m);
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for isa in isas() {
                let packed = PackedA::with_isa(&w, m, k, isa);
                assert!(packed.takes_token_major(), "whole blocks of 16 features");
                let mut y = vec![std::mem::MaybeUninit::new(f32::NAN); tokens * m];
                pool.install(|| packed.multiply_token_major(&x, tokens, &mut y, Some(&bias)));
                for (i, got) in y.iter().enumerate() {
                    // SAFETY: every element was written (NaN before: a skipped one fails).
                    let got = unsafe { got.assume_init() } as f64;
                    let w = want[i] + bias[i % m] as f64;
                    let tol = 1e-5 * (k as f64).sqrt() * (1.0 + w.abs());
                    assert!(
                        (got - w).abs() <= tol,
                        "{tokens}x{k}x{m} threads {threads}: {i} {got} vs {w}"
                    );
                }
            }
        }
    }
}
