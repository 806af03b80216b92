//! The 2-D pooling fast path (no dilation, no `Indices` output), which is what CNNs use.
//!
//! Each output row is computed separably: the window's input rows are first combined element
//! by element into one scratch row, which is padded on both sides with the combination's
//! identity; then the output row is combined from `k` shifted (and strided) views of that
//! scratch row, one window column at a time. Both passes are element-wise loops over whole rows,
//! which the compiler vectorizes; for a k×k window this reads k rows once instead of k²
//! scattered cells per output.

use rayon::prelude::*;

use super::spatial::Geometry;

/// The in-image input positions `[begin, end)` of each output position's window along one axis,
/// and how many window cells fall inside image plus padding (the `count_include_pad` divisor).
#[derive(Debug)]
pub struct AxisWindows {
    spans: Vec<(usize, usize)>,
    padded: Vec<usize>,
    kernel: usize,
    stride: usize,
    pad_begin: usize,
}

impl AxisWindows {
    /// The windows of spatial axis `axis` of an image `extent` long.
    pub fn new(geo: &Geometry, axis: usize, extent: usize) -> AxisWindows {
        let (k, s, pb, pe) = (
            geo.kernel[axis] as i64,
            geo.strides[axis] as i64,
            geo.pad_begin[axis] as i64,
            geo.pad_end[axis] as i64,
        );
        let n = extent as i64;
        let (spans, padded) = (0..geo.out[axis] as i64)
            .map(|o| {
                let first = o * s - pb;
                let begin = first.clamp(0, n) as usize;
                let end = (first + k).clamp(0, n) as usize;
                let padded = (n + pe - first).clamp(0, k) as usize;
                ((begin, end.max(begin)), padded)
            })
            .unzip();
        AxisWindows {
            spans,
            padded,
            kernel: geo.kernel[axis],
            stride: geo.strides[axis],
            pad_begin: geo.pad_begin[axis],
        }
    }
}

/// The row and column windows of a 2-D image (`image` = [height, width]).
pub fn plane_windows(geo: &Geometry, image: &[usize]) -> (AxisWindows, AxisWindows) {
    (
        AxisWindows::new(geo, 0, image[0]),
        AxisWindows::new(geo, 1, image[1]),
    )
}

/// True when the 2-D fast path applies to this geometry.
pub fn applies(geo: &Geometry) -> bool {
    geo.out.len() == 2 && geo.dilations.iter().all(|&d| d == 1)
}

/// Pools every `h`×`w` plane of `x` (planes back to back) into `y` (`rows.len()`×`cols.len()`
/// per plane). `combine` folds one input into an accumulator that starts at `init` (which must
/// leave any value unchanged: padding cells hold it); `finish` then turns one output row of
/// window accumulators into outputs, given its output row index.
#[allow(clippy::too_many_arguments)]
pub fn pool_planes<T, C, F>(
    x: &[T],
    (h, w): (usize, usize),
    rows: &AxisWindows,
    cols: &AxisWindows,
    y: &mut [T],
    init: T,
    combine: C,
    finish: F,
) where
    T: Copy + Send + Sync,
    C: Fn(T, T) -> T + Sync,
    F: Fn(usize, &mut [T]) + Sync,
{
    let olen = rows.spans.len() * cols.spans.len();
    if olen == 0 || h * w == 0 {
        return;
    }
    let ow = cols.spans.len();
    let plane_pool = PlanePool {
        w,
        rows,
        ow,
        window: (cols.kernel, cols.stride, cols.pad_begin),
        init,
        combine: &combine,
        finish: &finish,
    };
    y.par_chunks_mut(olen)
        .zip(x.par_chunks(h * w))
        .for_each(|(yp, plane)| plane_pool.run(plane, yp));
}

/// What [`pool_planes`] does to one plane.
struct PlanePool<'a, T, C, F> {
    w: usize,
    rows: &'a AxisWindows,
    ow: usize,
    /// Kernel width, stride and start padding along the row.
    window: (usize, usize, usize),
    init: T,
    combine: &'a C,
    finish: &'a F,
}

impl<T, C, F> PlanePool<'_, T, C, F>
where
    T: Copy,
    C: Fn(T, T) -> T,
    F: Fn(usize, &mut [T]),
{
    /// Pools `plane` into `yp`, with AVX2 code where the CPU has it (the loops are the same;
    /// the compiler vectorizes them 8 floats wide instead of 4).
    fn run(&self, plane: &[T], yp: &mut [T]) {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { self.run_avx2(plane, yp) };
        }
        self.run_portable(plane, yp)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(&self, plane: &[T], yp: &mut [T]) {
        self.run_portable(plane, yp)
    }

    // Every loop below writes a buffer other than the ones it reads: an in-place
    // `acc = max(acc, v)` would let the compiler store only where `v` wins, as a masked store,
    // which is slow on some CPUs (AMD Zen).
    #[inline(always)]
    fn run_portable(&self, plane: &[T], yp: &mut [T]) {
        let (w, init, combine) = (self.w, self.init, self.combine);
        let (k, step, pad) = self.window;
        // Window starts at full resolution along the row; every `step`-th one is an output.
        let starts = (self.ow - 1) * step + 1;
        // Padded rows: `pad` identity cells, the image row, then identity cells up to the last
        // window's end (which `ceil_mode` or end padding can put past the image).
        let width = (pad + w).max(starts - 1 + k);
        let (mut acc, mut next) = (vec![init; width], vec![init; width]);
        let (mut h, mut h_next) = (vec![init; starts], vec![init; starts]);
        for (oh, (&(r0, r1), yrow)) in self
            .rows
            .spans
            .iter()
            .zip(yp.chunks_mut(self.ow))
            .enumerate()
        {
            // Down the window's rows, into the padded row `acc` (its padding stays `init`).
            acc[pad..pad + w].fill(init);
            for r in r0..r1 {
                let row = &plane[r * w..(r + 1) * w];
                let (from, to) = (&acc[pad..pad + w], &mut next[pad..pad + w]);
                for ((t, &a), &v) in to.iter_mut().zip(from).zip(row) {
                    *t = combine(a, v);
                }
                std::mem::swap(&mut acc, &mut next);
            }
            // Across the window's columns, at every start position; with unit stride the last
            // column's pass writes the output row itself.
            let direct = step == 1;
            for dx in 1..k {
                let folded: &[T] = if dx == 1 { &acc[..starts] } else { &h };
                let to = if direct && dx == k - 1 {
                    &mut yrow[..]
                } else {
                    &mut h_next[..]
                };
                for ((t, &a), &v) in to.iter_mut().zip(folded).zip(&acc[dx..]) {
                    *t = combine(a, v);
                }
                std::mem::swap(&mut h, &mut h_next);
            }
            let folded: &[T] = if k == 1 { &acc[..starts] } else { &h };
            if k == 1 && direct {
                yrow.copy_from_slice(&folded[..self.ow]);
            } else if !direct {
                for (o, y) in yrow.iter_mut().enumerate() {
                    *y = folded[o * step];
                }
            }
            (self.finish)(oh, yrow);
        }
    }
}

/// For every output `(oh, ow)` (row-major), how many cells its window covers: in-image cells
/// only, or image-plus-padding cells when `include_pad` (`AveragePool`'s divisor).
pub fn window_counts(rows: &AxisWindows, cols: &AxisWindows, include_pad: bool) -> Vec<usize> {
    let count = |a: &AxisWindows, o: usize| {
        if include_pad {
            a.padded[o]
        } else {
            a.spans[o].1 - a.spans[o].0
        }
    };
    (0..rows.spans.len())
        .flat_map(|oh| (0..cols.spans.len()).map(move |ow| count(rows, oh) * count(cols, ow)))
        .collect()
}
