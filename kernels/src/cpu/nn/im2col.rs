//! `im2col` / `col2im`: the gather and scatter between an N-d image and the matrix the
//! convolution GEMMs work on.
//!
//! The column matrix has one row per (channel, kernel offset) and one column per output
//! (for `im2col`) or input (for `col2im`) spatial position.

use rayon::prelude::*;

use super::matrix::MatElem;
use super::spatial::strides_of;

/// Geometry of one N-d window sweep: `image` positions are `o * stride - pad + k * dilation`.
#[derive(Debug, Clone)]
pub struct Sweep<'a> {
    /// Spatial extent of the image.
    pub image: &'a [usize],
    /// Spatial extent of the grid of window positions.
    pub grid: &'a [usize],
    /// Kernel extent.
    pub kernel: &'a [usize],
    /// Strides.
    pub strides: &'a [usize],
    /// Dilations.
    pub dilations: &'a [usize],
    /// Padding before each dim (may be negative for ConvTranspose with `output_shape`).
    pub pad_begin: &'a [i64],
}

impl Sweep<'_> {
    /// Number of kernel offsets.
    pub fn kernel_len(&self) -> usize {
        self.kernel.iter().product()
    }

    /// Number of grid positions.
    pub fn grid_len(&self) -> usize {
        self.grid.iter().product()
    }

    fn image_len(&self) -> usize {
        self.image.iter().product()
    }

    /// Calls `f(grid_index_of_row_start, image_index_of_row_start_or_none, inner_map)` for every
    /// row of the grid along the last dim, for kernel offset `koff`. `inner_map(ow)` gives the
    /// image index along the last dim or `None` when it falls in the padding.
    fn for_each_row(&self, koff: &[usize], mut f: impl FnMut(usize, Option<usize>)) {
        let n = self.image.len();
        let last = n - 1;
        let img_strides = strides_of(self.image);
        let outer_grid: usize = self.grid[..last].iter().product();
        let mut idx = vec![0usize; last];
        for row in 0..outer_grid {
            let mut base = Some(0usize);
            for d in 0..last {
                let pos = (idx[d] * self.strides[d] + koff[d] * self.dilations[d]) as i64
                    - self.pad_begin[d];
                if pos < 0 || pos >= self.image[d] as i64 {
                    base = None;
                    break;
                }
                base = base.map(|b| b + pos as usize * img_strides[d]);
            }
            f(row * self.grid[last], base);
            for d in (0..last).rev() {
                idx[d] += 1;
                if idx[d] < self.grid[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }

    /// The half-open range of last-dim grid positions whose image position is inside the image
    /// for kernel offset `k`, and the image position of the first grid position (may be < 0).
    fn inner_range(&self, k: usize) -> (usize, usize, i64) {
        let last = self.image.len() - 1;
        let (s, w) = (self.strides[last] as i64, self.image[last] as i64);
        let start = (k * self.dilations[last]) as i64 - self.pad_begin[last];
        let g = self.grid[last] as i64;
        // first o with start + o*s >= 0, and first o with start + o*s >= w.
        let lo = if start >= 0 { 0 } else { (-start + s - 1) / s };
        let hi = if start >= w {
            0
        } else {
            (w - start + s - 1) / s
        };
        (lo.clamp(0, g) as usize, hi.clamp(0, g) as usize, start)
    }
}

fn unravel(mut i: usize, shape: &[usize], out: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        out[d] = i % shape[d];
        i /= shape[d];
    }
}

/// Fills `col` (`channels * kernel_len` rows by `grid_len` columns) from `image`
/// (`channels` planes of `image_len`). Padding reads as zero.
pub fn im2col<T: MatElem>(image: &[T], channels: usize, sweep: &Sweep<'_>, col: &mut [T]) {
    let (klen, glen, ilen) = (sweep.kernel_len(), sweep.grid_len(), sweep.image_len());
    if glen == 0 {
        return;
    }
    let last = sweep.image.len() - 1;
    let s = sweep.strides[last];
    col[..channels * klen * glen]
        .par_chunks_mut(glen)
        .enumerate()
        .for_each(|(r, dst)| {
            let (c, k) = (r / klen, r % klen);
            let plane = &image[c * ilen..(c + 1) * ilen];
            let mut koff = vec![0; sweep.kernel.len()];
            unravel(k, sweep.kernel, &mut koff);
            let (lo, hi, start) = sweep.inner_range(koff[last]);
            sweep.for_each_row(&koff, |g0, base| {
                let row = &mut dst[g0..g0 + sweep.grid[last]];
                match base {
                    Some(b) if lo < hi => {
                        row[..lo].fill(T::ZERO);
                        row[hi..].fill(T::ZERO);
                        let first = (b as i64 + start + (lo * s) as i64) as usize;
                        if s == 1 {
                            row[lo..hi].copy_from_slice(&plane[first..first + (hi - lo)]);
                        } else {
                            for (j, v) in row[lo..hi].iter_mut().enumerate() {
                                *v = plane[first + j * s];
                            }
                        }
                    }
                    _ => row.fill(T::ZERO),
                }
            });
        });
}

/// Adds `col` (`channels * kernel_len` rows by `grid_len` columns) into `image` (`channels`
/// planes of `image_len`); positions in the padding are dropped. The inverse of [`im2col`].
pub fn col2im<T: MatElem + std::ops::AddAssign>(
    col: &[T],
    channels: usize,
    sweep: &Sweep<'_>,
    image: &mut [T],
) {
    let (klen, glen, ilen) = (sweep.kernel_len(), sweep.grid_len(), sweep.image_len());
    if glen == 0 || ilen == 0 {
        return;
    }
    let last = sweep.image.len() - 1;
    let s = sweep.strides[last];
    image[..channels * ilen]
        .par_chunks_mut(ilen)
        .enumerate()
        .for_each(|(c, plane)| {
            let mut koff = vec![0; sweep.kernel.len()];
            for k in 0..klen {
                let src = &col[(c * klen + k) * glen..(c * klen + k + 1) * glen];
                unravel(k, sweep.kernel, &mut koff);
                let (lo, hi, start) = sweep.inner_range(koff[last]);
                if lo >= hi {
                    continue;
                }
                sweep.for_each_row(&koff, |g0, base| {
                    if let Some(b) = base {
                        let first = (b as i64 + start + (lo * s) as i64) as usize;
                        for (j, &v) in src[g0 + lo..g0 + hi].iter().enumerate() {
                            plane[first + j * s] += v;
                        }
                    }
                });
            }
        });
}
