//! The matrices of Winograd's 1-D F(4, r) for r = 3 and 7 (the convolutions are in
//! [`super::line`]), built from interpolation points as Toom–Cook's construction gives them
//! (Lavin & Gray 2016 derive theirs so): `y = Aᵀ [(G g) ⊙ (Bᵀ d)]` for `n = r + 3` inputs `d`,
//! the `r` taps `g` and 4 outputs `y`, with `G = V_r`, `Aᵀ = V_4ᵀ` and `Bᵀ = (V_n⁻¹)ᵀ`, where
//! `V_k` is the `n × k` matrix of the powers `0..k` of the points and of ∞ (whose row takes
//! the highest power).
//!
//! The points are 0, ±1, ±2 for r = 3 and 0, ±1, ±2, ±1/2, ±3/2 for r = 7: on 192 channels of
//! values in [0, 1) the latter's outputs came within 3.6e-6 (relative L2) of exact ones,
//! against 2e-7 for the direct sum in `f32` and 1e-6 for F(2, 7); ±3 in place of ±3/2 gave
//! 5.9e-6.

use std::sync::OnceLock;

/// Outputs per tile.
pub(super) const OUTPUT: usize = 4;
/// The most inputs per tile (r = 7).
pub(super) const MOST_INPUTS: usize = 10;

/// The three matrices of F(4, r), row-major, each row padded with zeros to [`MOST_INPUTS`]
/// (the transforms run on arrays of a size fixed at compile time, `N` = 6 or 10).
pub(super) struct Transform {
    /// Inputs per tile, `r + 3`.
    pub(super) n: usize,
    /// `G` (`n × r`), in `f64`: the filters are transformed once.
    pub(super) g: Vec<f64>,
    /// `Bᵀ` (`n × n`).
    pub(super) bt: [[f32; MOST_INPUTS]; MOST_INPUTS],
    /// `Aᵀ` (`4 × n`).
    pub(super) at: [[f32; MOST_INPUTS]; OUTPUT],
}

/// The transform of F(4, r), built on first use; `None` for any `r` but 3 and 7.
pub(super) fn transform(r: usize) -> Option<&'static Transform> {
    static THREE: OnceLock<Transform> = OnceLock::new();
    static SEVEN: OnceLock<Transform> = OnceLock::new();
    match r {
        3 => Some(THREE.get_or_init(|| Transform::new(&[0.0, 1.0, -1.0, 2.0, -2.0], 3))),
        7 => {
            Some(SEVEN.get_or_init(|| {
                Transform::new(&[0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1.5, -1.5], 7)
            }))
        }
        _ => None,
    }
}

impl Transform {
    /// F(4, r) on the finite `points` (`r + 2` of them) and ∞.
    fn new(points: &[f64], r: usize) -> Self {
        let n = r + OUTPUT - 1;
        assert_eq!(
            points.len() + 1,
            n,
            "F(4, {r}) takes {} finite points",
            n - 1
        );
        let v_n = powers(points, n);
        let v_4 = powers(points, OUTPUT);
        let inverse = inverse(&v_n, n);
        let mut bt = [[0f32; MOST_INPUTS]; MOST_INPUTS];
        let mut at = [[0f32; MOST_INPUTS]; OUTPUT];
        for (xi, row) in bt.iter_mut().enumerate().take(n) {
            for (j, value) in row.iter_mut().enumerate().take(n) {
                *value = inverse[j * n + xi] as f32;
            }
        }
        for (k, row) in at.iter_mut().enumerate() {
            for (xi, value) in row.iter_mut().enumerate().take(n) {
                *value = v_4[xi * OUTPUT + k] as f32;
            }
        }
        Transform {
            n,
            g: powers(points, r),
            bt,
            at,
        }
    }
}

/// The `(points + 1) × k` matrix, row-major, of the powers `0..k` of each point, then the
/// row of ∞: zeros but a one in the last column.
fn powers(points: &[f64], k: usize) -> Vec<f64> {
    let mut v: Vec<f64> = points
        .iter()
        .flat_map(|&p| (0..k).map(move |j| p.powi(j as i32)))
        .collect();
    v.extend((0..k).map(|j| if j + 1 == k { 1.0 } else { 0.0 }));
    v
}

/// The inverse of the invertible `n × n` matrix `a` (row-major), by Gauss–Jordan elimination
/// with partial pivoting.
fn inverse(a: &[f64], n: usize) -> Vec<f64> {
    let mut a = a.to_vec();
    let mut inv: Vec<f64> = (0..n * n)
        .map(|e| if e / n == e % n { 1.0 } else { 0.0 })
        .collect();
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))
            .unwrap_or(col);
        for j in 0..n {
            a.swap(col * n + j, pivot * n + j);
            inv.swap(col * n + j, pivot * n + j);
        }
        let scale = 1.0 / a[col * n + col];
        for j in 0..n {
            a[col * n + j] *= scale;
            inv[col * n + j] *= scale;
        }
        for i in (0..n).filter(|&i| i != col) {
            let factor = a[i * n + col];
            for j in 0..n {
                a[i * n + j] -= factor * a[col * n + j];
                inv[i * n + j] -= factor * inv[col * n + j];
            }
        }
    }
    inv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_values::uniform;

    #[test]
    fn the_transforms_give_the_correlation_of_one_tile() {
        // Aᵀ[(G g) ⊙ (Bᵀ d)] on one channel is the 4 outputs of the valid correlation of
        // the n inputs `d` with the r taps `g`, up to the matrices' rounding to f32.
        for r in [3, 7] {
            let t = transform(r).expect("F(4, 3) and F(4, 7)");
            let n = r + OUTPUT - 1;
            assert_eq!(t.n, n);
            let (g, d) = (uniform(r, 1), uniform(n, 2));
            let u: Vec<f64> =
                t.g.chunks_exact(r)
                    .map(|row| row.iter().zip(&g).map(|(a, &b)| a * f64::from(b)).sum())
                    .collect();
            let v: Vec<f64> = (0..n)
                .map(|xi| {
                    (0..n)
                        .map(|j| f64::from(t.bt[xi][j]) * f64::from(d[j]))
                        .sum()
                })
                .collect();
            for k in 0..OUTPUT {
                let got: f64 = (0..n)
                    .map(|xi| f64::from(t.at[k][xi]) * u[xi] * v[xi])
                    .sum();
                let want: f64 = (0..r).map(|j| f64::from(g[j]) * f64::from(d[k + j])).sum();
                assert!(
                    (got - want).abs() < 1e-5,
                    "r {r}, output {k}: {got} against {want}"
                );
            }
        }
        assert!(transform(5).is_none());
    }
}
