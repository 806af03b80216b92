//! The integer matrix product under every quantized op: `C = (A - za) · (B - zb)` in `i32`, for
//! `A` (m×k) and `B` (k×n) of uint8 or int8, per-row `za` and per-column `zb` zero points.
//!
//! The fast paths work in one domain: `A` as uint8 and `B` as int8 (an int8 `A` is shifted by
//! 128, and so is a uint8 `B`, with its zero point), so that `vpdpbusd` (AVX-512 VNNI) or
//! `vpmaddwd` on widened values (AVX2) accumulate exactly; the zero points are applied after
//! the product from the row and column sums. [`reference()`] is the definition, computed
//! directly, that every path is tested against.

mod avx2;
mod pack;
mod vnni;

use rayon::prelude::*;

/// An operand: row-major bytes and whether they are int8 (else uint8).
#[derive(Debug, Clone, Copy)]
pub struct Operand<'a> {
    /// The elements' bytes.
    pub data: &'a [u8],
    /// True for int8 elements.
    pub signed: bool,
}

impl Operand<'_> {
    #[inline]
    fn value(&self, i: usize) -> i32 {
        if self.signed {
            i32::from(self.data[i] as i8)
        } else {
            i32::from(self.data[i])
        }
    }
}

/// The instruction set a product runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// Portable loops.
    Scalar,
    /// AVX2 `vpmaddwd` on 16-bit widened operands.
    Avx2,
    /// AVX-512 VNNI `vpdpbusd`.
    Avx512Vnni,
}

impl Isa {
    /// The best instruction set this CPU has.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vnni")
            {
                return Isa::Avx512Vnni;
            }
            if is_x86_feature_detected!("avx2") {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    }

    /// Whether this CPU can run `self`.
    pub fn available(self) -> bool {
        match self {
            Isa::Scalar => true,
            Isa::Avx2 => matches!(Isa::detect(), Isa::Avx2 | Isa::Avx512Vnni),
            Isa::Avx512Vnni => Isa::detect() == Isa::Avx512Vnni,
        }
    }
}

/// `c = (a - za) · (b - zb)` on the best instruction set; see [`gemm_on`].
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    (m, k, n): (usize, usize, usize),
    a: Operand<'_>,
    za: &[i32],
    b: Operand<'_>,
    zb: &[i32],
    c: &mut [i32],
) {
    gemm_on(Isa::detect(), (m, k, n), a, za, b, zb, c)
}

/// `c = (a - za) · (b - zb)` on `isa` (which must be [`Isa::available`]): `a` is m×k, `b` is
/// k×n, both row-major; `za` holds one zero point or one per row, `zb` one or one per column;
/// `c` (m×n, row-major) is overwritten.
#[allow(clippy::too_many_arguments)]
pub fn gemm_on(
    isa: Isa,
    (m, k, n): (usize, usize, usize),
    a: Operand<'_>,
    za: &[i32],
    b: Operand<'_>,
    zb: &[i32],
    c: &mut [i32],
) {
    assert!(a.data.len() >= m * k && b.data.len() >= k * n && c.len() >= m * n);
    assert!(isa.available(), "{isa:?} is not available on this CPU");
    if m == 0 || n == 0 {
        return;
    }
    // A as uint8, B as int8: x ^ 0x80 is x + 128 for int8 bits and x - 128 for uint8 bits.
    let a_shift = if a.signed { 128 } else { 0 };
    let b_shift = if b.signed { 0 } else { -128 };
    let za = |i: usize| za[if za.len() == 1 { 0 } else { i }] + a_shift;
    let zb = |j: usize| zb[if zb.len() == 1 { 0 } else { j }] + b_shift;
    let au: Vec<u8> = a.data[..m * k]
        .iter()
        .map(|&x| if a.signed { x ^ 0x80 } else { x })
        .collect();
    let bs: Vec<i8> = b.data[..k * n]
        .iter()
        .map(|&x| (if b.signed { x } else { x ^ 0x80 }) as i8)
        .collect();
    let (m, k, n) = (m, k, n);
    match isa {
        Isa::Scalar => raw_scalar((m, k, n), &au, &bs, c),
        Isa::Avx2 => avx2::raw((m, k, n), &au, &bs, c),
        Isa::Avx512Vnni => vnni::raw((m, k, n), &au, &bs, c),
    }
    let row_sums: Vec<i32> = (0..m)
        .map(|i| au[i * k..(i + 1) * k].iter().map(|&x| i32::from(x)).sum())
        .collect();
    let mut col_sums = vec![0i32; n];
    for row in bs.chunks_exact(n.max(1)).take(k) {
        for (s, &x) in col_sums.iter_mut().zip(row) {
            *s += i32::from(x);
        }
    }
    let kk = k as i32;
    c[..m * n]
        .par_chunks_mut(n)
        .enumerate()
        .for_each(|(i, row)| {
            let (zai, rs) = (za(i), row_sums[i]);
            for (j, v) in row.iter_mut().enumerate() {
                let zbj = zb(j);
                *v = v
                    .wrapping_sub(zai.wrapping_mul(col_sums[j]))
                    .wrapping_sub(zbj.wrapping_mul(rs))
                    .wrapping_add(kk.wrapping_mul(zai).wrapping_mul(zbj));
            }
        });
}

/// `c = Σ a·b` (no zero points) in portable loops.
fn raw_scalar((m, k, n): (usize, usize, usize), a: &[u8], b: &[i8], c: &mut [i32]) {
    c[..m * n]
        .par_chunks_mut(n)
        .enumerate()
        .for_each(|(i, row)| {
            row.fill(0);
            for p in 0..k {
                let x = i32::from(a[i * k + p]);
                for (v, &y) in row.iter_mut().zip(&b[p * n..(p + 1) * n]) {
                    *v += x * i32::from(y);
                }
            }
        });
}

/// The definition, computed directly: `c[i][j] = Σ_p (a[i][p] - za[i]) · (b[p][j] - zb[j])`.
pub fn reference(
    (m, k, n): (usize, usize, usize),
    a: Operand<'_>,
    za: &[i32],
    b: Operand<'_>,
    zb: &[i32],
    c: &mut [i32],
) {
    for i in 0..m {
        let zai = za[if za.len() == 1 { 0 } else { i }];
        for j in 0..n {
            let zbj = zb[if zb.len() == 1 { 0 } else { j }];
            c[i * n + j] = (0..k)
                .map(|p| (a.value(i * k + p) - zai) * (b.value(p * n + j) - zbj))
                .sum();
        }
    }
}

/// A raw pointer to the output that tiles of a parallel product write through; each task
/// writes a disjoint rectangle.
#[derive(Clone, Copy)]
struct OutPtr(*mut i32);
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// Runs `tile(row0, rows, tile_index)` for every block of `mr` rows and every column tile,
/// in parallel when the product is large enough to pay for it.
fn for_each_tile(
    m: usize,
    mr: usize,
    tiles: usize,
    work: usize,
    tile: impl Fn(usize, usize, usize) + Sync,
) {
    const TILES_PER_TASK: usize = 8;
    let row_blocks = m.div_ceil(mr);
    let groups = tiles.div_ceil(TILES_PER_TASK);
    let task = |t: usize| {
        let (rb, g) = (t / groups, t % groups);
        let rows = mr.min(m - rb * mr);
        for ti in g * TILES_PER_TASK..((g + 1) * TILES_PER_TASK).min(tiles) {
            tile(rb * mr, rows, ti);
        }
    };
    if work < 1 << 16 {
        (0..row_blocks * groups).for_each(task);
    } else {
        (0..row_blocks * groups).into_par_iter().for_each(task);
    }
}

#[cfg(test)]
mod tests;
