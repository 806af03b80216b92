//! The 2-D pooling fast path (no dilation, no `Indices` output), which is what CNNs use.
//!
//! Each output row is computed separably: the window's input rows are first combined element
//! by element into one scratch row (a loop the compiler vectorizes), then each output column
//! combines its window's span of that row. For a k×k window this reads k rows once instead of
//! k² scattered cells per output.

use rayon::prelude::*;

use super::spatial::Geometry;

/// The in-image input positions `[begin, end)` of each output position's window along one axis,
/// and how many window cells fall inside image plus padding (the `count_include_pad` divisor).
#[derive(Debug)]
pub struct AxisWindows {
    spans: Vec<(usize, usize)>,
    padded: Vec<usize>,
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
        AxisWindows { spans, padded }
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
/// per plane). `combine` folds one input into an accumulator that starts at `init`; `finish`
/// turns a window's accumulator into the output, given its output row and column.
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
    F: Fn(T, usize, usize) -> T + Sync,
{
    let olen = rows.spans.len() * cols.spans.len();
    if olen == 0 || h * w == 0 {
        return;
    }
    let ow = cols.spans.len();
    y.par_chunks_mut(olen)
        .zip(x.par_chunks(h * w))
        .for_each(|(yp, plane)| {
            let mut scratch = vec![init; w];
            for (oh, (&(r0, r1), yrow)) in rows.spans.iter().zip(yp.chunks_mut(ow)).enumerate() {
                scratch.fill(init);
                for r in r0..r1 {
                    for (s, &v) in scratch.iter_mut().zip(&plane[r * w..(r + 1) * w]) {
                        *s = combine(*s, v);
                    }
                }
                for (o, (&(c0, c1), out)) in cols.spans.iter().zip(yrow.iter_mut()).enumerate() {
                    let acc = scratch[c0..c1].iter().fold(init, |a, &v| combine(a, v));
                    *out = finish(acc, oh, o);
                }
            }
        });
}

/// The window of output `(oh, ow)`: how many in-image cells, and how many image-plus-padding
/// cells it covers.
pub fn window_counts(
    rows: &AxisWindows,
    cols: &AxisWindows,
    oh: usize,
    ow: usize,
) -> (usize, usize) {
    let (r0, r1) = rows.spans[oh];
    let (c0, c1) = cols.spans[ow];
    ((r1 - r0) * (c1 - c0), rows.padded[oh] * cols.padded[ow])
}
