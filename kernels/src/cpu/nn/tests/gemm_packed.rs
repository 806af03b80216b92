//! `Gemm` in `f32` with enough rows takes the packed GEMM (`Yᵀ = B'ᵀ · A'ᵀ`, the weights packed
//! once and cached): every transpose combination, every `C` it accepts and the ones it leaves to
//! the generic path, `B` changing between runs, against the definition in f64.

use super::values;
use crate::cpu::nn::packed_gemm::KC;
use crate::kernel::NodeSpec;
use crate::{AttrValue, Attributes, Tensor};

/// `alpha · A' · B' + beta · C` by the definition (`C` broadcast from `c_shape`).
#[allow(clippy::too_many_arguments)]
fn definition(
    a: &[f32],
    b: &[f32],
    c: Option<(&[f32], &[usize])>,
    (m, k, n): (usize, usize, usize),
    (ta, tb): (bool, bool),
    alpha: f64,
    beta: f64,
) -> Vec<f64> {
    let mut y = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f64;
            for p in 0..k {
                let av = if ta { a[p * m + i] } else { a[i * k + p] };
                let bv = if tb { b[j * k + p] } else { b[p * n + j] };
                acc += av as f64 * bv as f64;
            }
            let cv = c.map_or(0.0, |(c, shape)| {
                let (cr, cc) = match shape {
                    [] => (1, 1),
                    [x] => (1, *x),
                    [r, x] => (*r, *x),
                    _ => unreachable!(),
                };
                c[(if cr == 1 { 0 } else { i }) * cc + if cc == 1 { 0 } else { j }] as f64
            });
            y[i * n + j] = alpha * acc + beta * cv;
        }
    }
    y
}

fn gemm(ta: bool, tb: bool, alpha: f32, beta: f32) -> Box<dyn crate::kernel::Kernel> {
    let attrs = Attributes::new()
        .with("transA", AttrValue::Int(i64::from(ta)))
        .with("transB", AttrValue::Int(i64::from(tb)))
        .with("alpha", AttrValue::Float(alpha))
        .with("beta", AttrValue::Float(beta));
    let spec = NodeSpec {
        op_type: "Gemm",
        domain: "",
        opset: 13,
        attrs: &attrs,
        num_inputs: 3,
        num_outputs: 1,
        options: Default::default(),
    };
    crate::cpu::nn::gemm_op::build(&spec).unwrap()
}

fn check(got: &Tensor, want: &[f64], label: &str) {
    let got = got.to_f64_vec().unwrap();
    assert_eq!(got.len(), want.len(), "{label}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{label}: element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn packed_gemm_matches_the_definition() {
    // (m, k, n): rows enough for the packed path, depths over one and several KC blocks,
    // widths off the micro-kernel's tiles; one product below the row threshold.
    let shapes = [
        (40, KC + 44, 70),
        (16, 17, 5),
        (150, 2 * KC + 88, 33),
        (7, 50, 20),
    ];
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    for (si, &(m, k, n)) in shapes.iter().enumerate() {
        for (ta, tb) in [(false, true), (false, false), (true, true), (true, false)] {
            let c_shapes: [Option<Vec<usize>>; 5] = [
                None,
                Some(vec![n]),
                Some(vec![1, n]),
                Some(vec![m, n]),
                Some(vec![m, 1]),
            ];
            for c_shape in c_shapes {
                for (alpha, beta) in [(1.0f32, 1.0f32), (1.0, 0.5), (0.5, 1.0)] {
                    let seed = si as u32 * 10;
                    let a = values(m * k, seed + 1);
                    let b = values(k * n, seed + 2);
                    let a_shape = if ta { [k, m] } else { [m, k] };
                    let b_shape = if tb { [n, k] } else { [k, n] };
                    let at = Tensor::from_shape_vec(&a_shape, a.clone()).unwrap();
                    let bt = Tensor::from_shape_vec(&b_shape, b.clone()).unwrap();
                    let c = c_shape.as_ref().map(|s| {
                        let len = s.iter().product();
                        (values(len, seed + 3), s.clone())
                    });
                    let ct = c
                        .as_ref()
                        .map(|(v, s)| Tensor::from_shape_vec(s, v.clone()).unwrap());
                    let want = definition(
                        &a,
                        &b,
                        c.as_ref().map(|(v, s)| (v.as_slice(), s.as_slice())),
                        (m, k, n),
                        (ta, tb),
                        f64::from(alpha),
                        f64::from(beta),
                    );
                    let label = format!(
                        "{m}x{k}x{n} transA {ta} transB {tb} C {c_shape:?} alpha {alpha} beta {beta}"
                    );
                    let kernel = gemm(ta, tb, alpha, beta);
                    for threads in ["1 thread", "2 threads"] {
                        let run = || kernel.run(&[Some(&at), Some(&bt), ct.as_ref()]).unwrap();
                        let y = if threads == "2 threads" {
                            pool.install(run)
                        } else {
                            run()
                        };
                        check(&y[0], &want, &format!("{label}, {threads}"));
                    }
                }
            }
        }
    }
}

#[test]
fn other_weights_are_never_answered_from_the_cache() {
    let (m, k, n) = (32, 64, 24);
    let kernel = gemm(false, true, 1.0, 1.0);
    let a = values(m * k, 1);
    let at = Tensor::from_shape_vec(&[m, k], a.clone()).unwrap();
    let first = values(n * k, 2);
    let second = values(n * k, 3);
    for (round, b) in [&first, &second, &first].into_iter().enumerate() {
        let bt = Tensor::from_shape_vec(&[n, k], b.clone()).unwrap();
        let y = kernel.run(&[Some(&at), Some(&bt), None]).unwrap();
        let want = definition(&a, b, None, (m, k, n), (false, true), 1.0, 1.0);
        check(&y[0], &want, &format!("round {round}"));
    }
}
