use super::*;

/// A seeded uniform stream in [-1, 1).
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

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
        pool.install(|| packed.multiply(&b, ldb, n, &mut c, ldc));
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
        (3, 0, 4),
    ] {
        check(m, k, n, 1);
    }
}

#[test]
fn matches_the_definition_across_blocks_and_threads() {
    // Past MC rows, KC depth and NC columns; then parallel by columns and by rows.
    check(70, 530, 2100, 1);
    check(70, 530, 2100, 4);
    check(300, 260, 20, 4);
}

#[test]
fn packing_keeps_every_value_once() {
    for isa in isas() {
        let (m, k) = (11, 300);
        let a = values(m * k, 5);
        let p = PackedA::with_isa(&a, m, k, isa);
        let mut seen: Vec<f32> = p.data.iter().copied().filter(|&v| v != 0.0).collect();
        let mut want: Vec<f32> = a.iter().copied().filter(|&v| v != 0.0).collect();
        seen.sort_by(f32::total_cmp);
        want.sort_by(f32::total_cmp);
        assert_eq!(seen, want, "{isa:?}");
        assert_eq!((p.rows(), p.cols()), (m, k));
    }
}
