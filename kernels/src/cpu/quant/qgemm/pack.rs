//! Operand layouts for the SIMD paths: `B` in column tiles whose `group` consecutive `k`
//! values per column sit together (what one `vpdpbusd` or `vpmaddwd` lane consumes), `A` in
//! rows padded to whole groups. Padding is zero, which adds nothing to a product.

/// `B` (k×n int8, row-major) packed in tiles of `nr` columns: tile `t`, group `g`, column
/// `c`, member `q` at `((t * groups + g) * nr + c) * group + q`. Returns the data and the
/// number of groups.
pub(super) fn pack_b<T: Copy + Default + From<i8>>(
    (k, n): (usize, usize),
    b: &[i8],
    group: usize,
    nr: usize,
) -> (Vec<T>, usize) {
    let groups = k.div_ceil(group);
    let tiles = n.div_ceil(nr);
    let mut out = vec![T::default(); tiles * groups * nr * group];
    for t in 0..tiles {
        for g in 0..groups {
            let base = (t * groups + g) * nr * group;
            for q in 0..group {
                let p = g * group + q;
                if p >= k {
                    break;
                }
                let row = &b[p * n..(p + 1) * n];
                for c in 0..nr.min(n - t * nr) {
                    out[base + c * group + q] = T::from(row[t * nr + c]);
                }
            }
        }
    }
    (out, groups)
}

/// `A` (m×k uint8) with each row padded with zeros to `kp` elements.
pub(super) fn pad_a<T: Copy + Default + From<u8>>(
    (m, k): (usize, usize),
    a: &[u8],
    kp: usize,
) -> Vec<T> {
    let mut out = vec![T::default(); m * kp];
    for i in 0..m {
        for (o, &x) in out[i * kp..i * kp + k]
            .iter_mut()
            .zip(&a[i * k..(i + 1) * k])
        {
            *o = T::from(x);
        }
    }
    out
}
