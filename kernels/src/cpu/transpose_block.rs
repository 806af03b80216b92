//! The transpose of a block of 32-bit values, eight by eight in vector registers where the CPU
//! has AVX2: the output side of a product computed transposed, the packing of a `Gemm` input
//! read as its transpose, and the 2-D transposes of the `Transpose` op all go through it. A
//! scalar walk reads one value per load and writes one per store; an 8 × 8 block is eight
//! loads, 24 shuffles and eight stores.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use rayon::prelude::*;

/// Side of the square tiles the block is walked in, so that the tile's rows and columns stay in
/// L1 while its 8 × 8 blocks are moved.
const TILE: usize = 64;

/// Below this many values a [`transpose_parallel`] runs on the calling thread.
const PARALLEL_MIN: usize = 1 << 16;

/// `dst[j · ld_dst + i] = src[i · ld_src + j]` for `i < rows`, `j < cols`: the transpose of a
/// `rows × cols` block of 32-bit values (the bits are moved, never computed on).
///
/// # Safety
/// `src` is valid for reads and `dst` for writes at those offsets, and they do not overlap.
pub(crate) unsafe fn transpose_block(
    src: *const u32,
    ld_src: usize,
    rows: usize,
    cols: usize,
    dst: *mut u32,
    ld_dst: usize,
) {
    for i0 in (0..rows).step_by(TILE) {
        for j0 in (0..cols).step_by(TILE) {
            let (h, w) = (TILE.min(rows - i0), TILE.min(cols - j0));
            // SAFETY: the tile lies inside the caller's block.
            unsafe {
                tile(
                    src.add(i0 * ld_src + j0),
                    ld_src,
                    (h, w),
                    dst.add(j0 * ld_dst + i0),
                    ld_dst,
                )
            };
        }
    }
}

/// [`transpose_block`] over whole matrices of 32-bit values (`f32`, integers, or slots not yet
/// written): `dst` (`cols × rows`) becomes the transpose of the row-major `rows × cols` matrix
/// `src`, its rows cut into groups that threads write in parallel when the matrix is large.
///
/// # Panics
/// If `src` or `dst` holds fewer than `rows · cols` values (an internal contract).
pub(crate) fn transpose_parallel<S: Copy + Sync, D: Copy + Send>(
    src: &[S],
    rows: usize,
    cols: usize,
    dst: &mut [D],
) {
    const { assert!(size_of::<S>() == 4 && size_of::<D>() == 4) };
    assert!(src.len() >= rows * cols && dst.len() >= rows * cols);
    if rows == 0 || cols == 0 {
        return;
    }
    let dst = &mut dst[..rows * cols];
    let group = if rows * cols < PARALLEL_MIN {
        cols
    } else {
        let threads = rayon::current_num_threads().max(1);
        cols.div_ceil(2 * threads).next_multiple_of(8)
    };
    dst.par_chunks_mut(group * rows)
        .enumerate()
        .for_each(|(g, out)| {
            let j0 = g * group;
            let w = out.len() / rows;
            // SAFETY: output rows j0..j0 + w are this chunk; they read input columns
            // j0..j0 + w of every input row, inside `src`.
            unsafe {
                transpose_block(
                    src.as_ptr().add(j0).cast(),
                    cols,
                    rows,
                    w,
                    out.as_mut_ptr().cast(),
                    rows,
                )
            };
        });
}

/// One tile of at most `TILE × TILE`: its whole 8 × 8 blocks in registers, the rest value by
/// value.
///
/// # Safety
/// As [`transpose_block`] for an `h × w` block.
unsafe fn tile(
    src: *const u32,
    ld_src: usize,
    (h, w): (usize, usize),
    dst: *mut u32,
    ld_dst: usize,
) {
    let (h8, w8) = (h / 8 * 8, w / 8 * 8);
    #[cfg(target_arch = "x86_64")]
    let vector = h8 > 0 && w8 > 0 && has_avx2();
    #[cfg(not(target_arch = "x86_64"))]
    let vector = false;
    let (done_h, done_w) = if vector { (h8, w8) } else { (0, 0) };
    // SAFETY: every offset below lies inside the h × w block (caller's contract).
    unsafe {
        #[cfg(target_arch = "x86_64")]
        if vector {
            for i in (0..h8).step_by(8) {
                for j in (0..w8).step_by(8) {
                    block8_avx2(
                        src.add(i * ld_src + j),
                        ld_src,
                        dst.add(j * ld_dst + i),
                        ld_dst,
                    );
                }
            }
        }
        // The right-hand columns of the vector rows, then the rows below them.
        for i in 0..done_h {
            for j in done_w..w {
                *dst.add(j * ld_dst + i) = *src.add(i * ld_src + j);
            }
        }
        for i in done_h..h {
            for j in 0..w {
                *dst.add(j * ld_dst + i) = *src.add(i * ld_src + j);
            }
        }
    }
}

/// Whether the CPU has AVX2 (read once per process).
#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    static AVX2: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVX2.get_or_init(|| is_x86_feature_detected!("avx2"))
}

/// The 8 × 8 transpose of eight rows of eight floats: rows are interleaved in pairs, then in
/// fours, then the 128-bit halves exchanged.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(s0, s4),
        _mm256_permute2f128_ps::<0x20>(s1, s5),
        _mm256_permute2f128_ps::<0x20>(s2, s6),
        _mm256_permute2f128_ps::<0x20>(s3, s7),
        _mm256_permute2f128_ps::<0x31>(s0, s4),
        _mm256_permute2f128_ps::<0x31>(s1, s5),
        _mm256_permute2f128_ps::<0x31>(s2, s6),
        _mm256_permute2f128_ps::<0x31>(s3, s7),
    ]
}

/// The transpose of one 8 × 8 block of 32-bit values.
///
/// # Safety
/// The CPU has AVX2; eight rows of eight values at `src` (stride `ld_src`) and at `dst`
/// (stride `ld_dst`) are valid.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn block8_avx2(src: *const u32, ld_src: usize, dst: *mut u32, ld_dst: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        let rows = std::array::from_fn(|i| _mm256_loadu_ps(src.add(i * ld_src).cast::<f32>()));
        for (j, v) in transpose8(rows).into_iter().enumerate() {
            _mm256_storeu_ps(dst.add(j * ld_dst).cast::<f32>(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shape class — under one block, whole blocks, ragged edges, several tiles, over the
    /// parallel threshold — against the definition, with values whose bits include NaNs'
    /// (moved, never computed on).
    #[test]
    fn transposes_match_the_definition() {
        for &(rows, cols) in &[
            (1, 1),
            (3, 7),
            (8, 8),
            (16, 24),
            (9, 17),
            (65, 130),
            (128, 3072),
            (1000, 91),
            (300, 301),
        ] {
            let src: Vec<f32> = (0..rows * cols)
                .map(|v| f32::from_bits(0x7fc0_0000 ^ v as u32))
                .collect();
            let mut dst = vec![0.0f32; rows * cols];
            transpose_parallel(&src, rows, cols, &mut dst);
            for i in 0..rows {
                for j in 0..cols {
                    assert_eq!(
                        dst[j * rows + i].to_bits(),
                        src[i * cols + j].to_bits(),
                        "{rows}x{cols} at ({i}, {j})"
                    );
                }
            }
        }
    }

    /// A block inside larger matrices: strides above the block's sides, and nothing outside
    /// the block written.
    #[test]
    fn a_block_of_a_larger_matrix_keeps_its_strides() {
        let (rows, cols, ld_src, ld_dst) = (11, 19, 23, 14);
        let src: Vec<u32> = (0..rows * ld_src).map(|v| v as u32).collect();
        let mut dst = vec![u32::MAX; cols * ld_dst];
        // SAFETY: both buffers hold the blocks at these strides.
        unsafe { transpose_block(src.as_ptr(), ld_src, rows, cols, dst.as_mut_ptr(), ld_dst) };
        for j in 0..cols {
            for i in 0..ld_dst {
                let want = if i < rows {
                    src[i * ld_src + j]
                } else {
                    u32::MAX
                };
                assert_eq!(dst[j * ld_dst + i], want, "({j}, {i})");
            }
        }
    }
}
