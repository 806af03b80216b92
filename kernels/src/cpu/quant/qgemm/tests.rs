//! Every instruction set's product against the definition, on ragged sizes and every mix of
//! signedness and zero-point shape.

use super::*;

fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u8
        })
        .collect()
}

#[test]
fn every_isa_matches_the_definition() {
    let isas: Vec<Isa> = [Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni]
        .into_iter()
        .filter(|i| i.available())
        .collect();
    let mut seed = 1;
    for (m, k, n) in [
        (1, 1, 1),
        (7, 5, 3),
        (6, 4, 32),
        (13, 37, 45),
        (2, 300, 17),
        (25, 9, 70),
    ] {
        for (a_signed, b_signed) in [(false, true), (true, true), (false, false), (true, false)] {
            for per_row in [false, true] {
                seed += 1;
                let a = bytes(m * k, seed);
                let b = bytes(k * n, seed + 100);
                let zs = bytes(m + n, seed + 200);
                // Extreme zero points too: 0 and the type's ends.
                let z = |x: u8, signed: bool| {
                    if signed {
                        i32::from(x as i8)
                    } else {
                        i32::from(x)
                    }
                };
                let za: Vec<i32> = if per_row {
                    (0..m).map(|i| z(zs[i], a_signed)).collect()
                } else {
                    vec![if a_signed { -128 } else { 255 }]
                };
                let zb: Vec<i32> = if per_row {
                    (0..n).map(|j| z(zs[m + j], b_signed)).collect()
                } else {
                    vec![z(zs[0], b_signed)]
                };
                let (a, b) = (
                    Operand {
                        data: &a,
                        signed: a_signed,
                    },
                    Operand {
                        data: &b,
                        signed: b_signed,
                    },
                );
                let mut want = vec![0; m * n];
                reference((m, k, n), a, &za, b, &zb, &mut want);
                for &isa in &isas {
                    let mut got = vec![i32::MIN; m * n];
                    gemm_on(isa, (m, k, n), a, &za, b, &zb, &mut got);
                    assert_eq!(
                        got, want,
                        "{isa:?} m{m} k{k} n{n} a_signed {a_signed} b_signed {b_signed} per_row {per_row}"
                    );
                }
            }
        }
    }
}

#[test]
fn extreme_values_do_not_saturate() {
    // 255 · -128 over a long k overflows 16 bits many times; vpmaddubsw would saturate.
    let (m, k, n) = (3, 1000, 20);
    let a = vec![255u8; m * k];
    let b = vec![0x80u8; k * n];
    for isa in [Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni] {
        if !isa.available() {
            continue;
        }
        let mut c = vec![0; m * n];
        gemm_on(
            isa,
            (m, k, n),
            Operand {
                data: &a,
                signed: false,
            },
            &[0],
            Operand {
                data: &b,
                signed: true,
            },
            &[0],
            &mut c,
        );
        assert!(c.iter().all(|&v| v == 255 * -128 * k as i32), "{isa:?}");
    }
}
