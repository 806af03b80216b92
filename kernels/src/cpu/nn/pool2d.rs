//! The 2-D pooling fast path (no dilation, no `Indices` output), which is what CNNs use.
//!
//! Pooling is separable: windows are first combined down the rows, then across the columns.
//! Both passes are element-wise loops over long slices, which the compiler vectorizes, and no
//! loop combines a buffer into itself (an in-place `acc = max(acc, v)` compiles to masked
//! stores, which are slow on some CPUs, AMD Zen among them).
//!
//! - "Same" pooling with unit strides (the output plane as large as the input, as in
//!   Inception's and NASNet's 3×3 branches) runs each pass once over the whole flattened
//!   plane, then recomputes the few cells whose windows the flattening got wrong: the rows
//!   whose window crosses the top or bottom edge, and the columns whose window crosses the
//!   left or right edge. Planes of 7×7 or 14×14 cost a handful of loops instead of a handful
//!   per row.
//! - Any other geometry (strided windows, `ceil_mode`, other padding) copies each plane into
//!   its padded stride phases (`PhasePlanes`, padding cells at the combination's identity),
//!   where every window cell is one contiguous run over the whole output plane: one sweep of
//!   `kh·kw` combinations in register blocks, then the padding columns are cropped. A
//!   row-by-row loop spent most of its time on per-row overhead (googlenet's stride-2 max
//!   pools were 3–12× ONNX Runtime's time).
//! - `f32` max pools with a column stride of 2 and 2- or 3-wide windows skip the phase
//!   planes on AVX-512 ([`super::pool_stride2`]): rows are combined down into padded rows,
//!   whose stride-2 windows are vector permutes.

use rayon::prelude::*;

use super::phase_planes::{PhasePlanes, Window2d};
use super::pool_same::SameWindow;
use super::spatial::Geometry;

/// Outputs the strided path combines together, in registers.
const BLOCK: usize = 64;

/// The in-image input positions `[begin, end)` of each output position's window along one axis,
/// and how many window cells fall inside image plus padding (the `count_include_pad` divisor).
#[derive(Debug)]
pub struct AxisWindows {
    pub(super) spans: Vec<(usize, usize)>,
    pub(super) padded: Vec<usize>,
    pub(super) kernel: usize,
    pub(super) stride: usize,
    pub(super) pad_begin: usize,
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

    /// How many outputs there are along the axis.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when there are no outputs along the axis.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Output `o`'s window inside the image, as input positions `[begin, end)`.
    pub fn span(&self, o: usize) -> (usize, usize) {
        self.spans[o]
    }

    /// How many of output `o`'s window cells fall inside image plus padding.
    pub fn padded_cells(&self, o: usize) -> usize {
        self.padded[o]
    }

    /// True when the windows step by one and there are as many as input positions (`extent`).
    fn is_same(&self, extent: usize) -> bool {
        self.stride == 1 && self.spans.len() == extent
    }
}

/// The window of "same" pooling over an `h`×`w` image (unit strides, an output plane as large
/// as the input), or `None` for any other geometry.
pub fn same_window(
    rows: &AxisWindows,
    cols: &AxisWindows,
    (h, w): (usize, usize),
) -> Option<SameWindow> {
    (rows.is_same(h) && cols.is_same(w)).then_some(SameWindow {
        kernel: [rows.kernel, cols.kernel],
        pad_begin: [rows.pad_begin, cols.pad_begin],
    })
}

/// Pools windows of exactly one image cell each (a 1×1 window without padding at any
/// stride: a subsample, as NASNet's strided shortcut paths use) by copying that cell into `y`
/// (`rows.len()`×`cols.len()` per `h`×`w` plane of `x`): the average of one cell and its
/// largest are the cell. With `count_pad` (AveragePool's `count_include_pad`) a window's
/// padding cells count too, so a window is one cell only when it also covers no padding.
/// Returns false, having written nothing, when some window holds another number of cells.
pub fn one_cell_windows<T: Copy + Send + Sync>(
    x: &[T],
    (h, w): (usize, usize),
    (rows, cols): (&AxisWindows, &AxisWindows),
    count_pad: bool,
    y: &mut [T],
) -> bool {
    let one = |a: &AxisWindows| {
        a.spans.iter().all(|&(b, e)| e == b + 1) && (!count_pad || a.padded.iter().all(|&p| p == 1))
    };
    let (oh, ow) = (rows.len(), cols.len());
    if !one(rows) || !one(cols) || oh * ow == 0 || h * w == 0 {
        return false;
    }
    let columns: Vec<usize> = cols.spans.iter().map(|&(b, _)| b).collect();
    let stride2 = columns.iter().enumerate().all(|(o, &c)| c == 2 * o);
    y.par_chunks_mut(oh * ow)
        .zip(x.par_chunks(h * w))
        .with_min_len(8)
        .for_each(|(out, plane)| {
            for (oy, line) in out.chunks_exact_mut(ow).enumerate() {
                let src = &plane[rows.spans[oy].0 * w..][..w];
                if stride2 {
                    // Pairs of cells, the first of each kept: vectorizes.
                    for (o, pair) in line.iter_mut().zip(src.chunks_exact(2)) {
                        *o = pair[0];
                    }
                    if ow > w / 2 {
                        line[ow - 1] = src[w - 1];
                    }
                } else {
                    for (o, &c) in line.iter_mut().zip(&columns) {
                        *o = src[c];
                    }
                }
            }
        });
    true
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
/// leave any value unchanged: padding cells hold it); `finish` then turns one output plane of
/// window accumulators into outputs.
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
    F: Fn(&mut [T]) + Sync,
{
    let olen = rows.spans.len() * cols.spans.len();
    if olen == 0 || h * w == 0 {
        return;
    }
    let same = rows.is_same(h) && cols.is_same(w);
    let phases = (!same).then(|| {
        let window = Window2d {
            image: [h, w],
            out: [rows.spans.len(), cols.spans.len()],
            kernel: [rows.kernel, cols.kernel],
            strides: [rows.stride, cols.stride],
            dilations: [1, 1],
            pads: [rows.pad_begin, cols.pad_begin],
        };
        PhasePlanes::new(&window, BLOCK)
    });
    let plane_pool = PlanePool {
        w,
        rows,
        cols,
        phases,
        init,
        combine: &combine,
    };
    y.par_chunks_mut(olen)
        .zip(x.par_chunks(h * w))
        .for_each_init(
            || plane_pool.scratch(h * w),
            |scratch, (yp, plane)| {
                plane_pool.run(plane, yp, scratch);
                finish(yp);
            },
        );
}

/// Buffers one worker reuses from plane to plane: the vertical result and a spare plane
/// ("same" pooling), or the padded phase planes and the outputs at their width (strided).
struct Scratch<T> {
    a: Vec<T>,
    b: Vec<T>,
}

/// What [`pool_planes`] does to one plane.
struct PlanePool<'a, T, C> {
    w: usize,
    rows: &'a AxisWindows,
    cols: &'a AxisWindows,
    /// The strided path's layout; `None` for unit strides and an output plane as large as
    /// the input, where the whole-plane passes apply.
    phases: Option<PhasePlanes>,
    init: T,
    combine: &'a C,
}

impl<T, C> PlanePool<'_, T, C>
where
    T: Copy,
    C: Fn(T, T) -> T,
{
    /// Scratch for planes of `len` cells; padding cells start (and stay) at `init`.
    fn scratch(&self, len: usize) -> Scratch<T> {
        let init = self.init;
        match &self.phases {
            None => Scratch {
                a: vec![init; len],
                b: vec![init; len],
            },
            Some(phases) => Scratch {
                a: vec![init; phases.len],
                b: vec![init; phases.computed],
            },
        }
    }

    /// Pools `plane` into `yp`, with AVX2 code where the CPU has it (the loops are the same;
    /// the compiler vectorizes them 8 floats wide instead of 4).
    fn run(&self, plane: &[T], yp: &mut [T], scratch: &mut Scratch<T>) {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { self.run_avx2(plane, yp, scratch) };
        }
        self.run_portable(plane, yp, scratch)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn run_avx2(&self, plane: &[T], yp: &mut [T], scratch: &mut Scratch<T>) {
        self.run_portable(plane, yp, scratch)
    }

    #[inline(always)]
    fn run_portable(&self, plane: &[T], yp: &mut [T], scratch: &mut Scratch<T>) {
        match &self.phases {
            None => self.whole_plane(plane, yp, scratch),
            Some(phases) => self.strided(phases, plane, yp, scratch),
        }
    }

    /// Unit-stride "same" pooling, one pass per axis over the flattened plane.
    #[inline(always)]
    fn whole_plane(&self, plane: &[T], yp: &mut [T], scratch: &mut Scratch<T>) {
        let (w, combine, init) = (self.w, self.combine, self.init);
        let h = plane.len() / w;
        let (v, spare) = (&mut scratch.a[..], &mut scratch.b[..]);
        // Down the rows: the output rows whose window lies inside the image in one fold.
        let (k, top) = (self.rows.kernel, self.rows.pad_begin);
        let (lo, hi) = (top, (h + top + 1).saturating_sub(k).max(top));
        if hi > lo {
            let len = (hi - lo) * w;
            let first = (lo - top) * w;
            fold_slices(&mut v[lo * w..hi * w], spare, k, (init, combine), |dy| {
                &plane[first + dy * w..first + dy * w + len]
            });
        }
        for oh in (0..lo.min(h)).chain(hi.max(lo)..h) {
            let (r0, r1) = self.rows.spans[oh];
            let dst = &mut v[oh * w..(oh + 1) * w];
            if r1 == r0 {
                dst.fill(init);
            } else {
                fold_slices(dst, &mut spare[..w], r1 - r0, (init, combine), |i| {
                    &plane[(r0 + i) * w..(r0 + i + 1) * w]
                });
            }
        }
        // Across the columns: every cell at once, then the cells near the left and right
        // edges, whose flat window ran into the neighbouring row.
        let n = h * w;
        let (k, left) = (self.cols.kernel, self.cols.pad_begin);
        let right = k - 1 - left;
        if n > left + right {
            let len = n - left - right;
            fold_slices(&mut yp[left..left + len], spare, k, (init, combine), |dx| {
                &v[dx..dx + len]
            });
        }
        let edges = (0..left.min(w)).chain(w.saturating_sub(right).max(left.min(w))..w);
        for c in edges {
            let (c0, c1) = self.cols.spans[c];
            for r in 0..h {
                let row = &v[r * w..(r + 1) * w];
                yp[r * w + c] = row[c0..c1].iter().fold(init, |a, &x| combine(a, x));
            }
        }
    }

    /// Any geometry, through the plane's padded stride phases.
    #[inline(always)]
    fn strided(&self, phases: &PhasePlanes, plane: &[T], yp: &mut [T], scratch: &mut Scratch<T>) {
        let (padded, computed) = (&mut scratch.a[..], &mut scratch.b[..]);
        phases.scatter(plane, padded);
        for (block, out) in computed.chunks_exact_mut(BLOCK).enumerate() {
            let base = block * BLOCK;
            let mut acc = [self.init; BLOCK];
            for &tap in &phases.taps {
                let src: &[T; BLOCK] = padded[tap + base..tap + base + BLOCK]
                    .try_into()
                    .expect("a block is BLOCK long");
                // A fresh array each step: updating `acc` in place compiles to masked stores.
                acc = std::array::from_fn(|j| (self.combine)(acc[j], src[j]));
            }
            out.copy_from_slice(&acc);
        }
        phases.crop(computed, yp);
    }
}

/// `dst[i] = combine(…combine(combine(init, src(0)[i]), src(1)[i])…, src(n - 1)[i])` for
/// `n >= 1` sources as long as `dst`, never reading the buffer it writes (`spare`, at least as
/// long, holds every other intermediate). Starting from `init` (−∞ for a max) keeps a NaN in
/// the first source from winning, as it wins no other place in a window.
#[inline(always)]
fn fold_slices<'s, T, C>(
    dst: &mut [T],
    spare: &mut [T],
    n: usize,
    (init, combine): (T, &C),
    src: impl Fn(usize) -> &'s [T],
) where
    T: Copy + 's,
    C: Fn(T, T) -> T,
{
    let len = dst.len();
    match n {
        1 => {
            for (t, &a) in dst.iter_mut().zip(&src(0)[..len]) {
                *t = combine(init, a);
            }
        }
        3 => {
            let (s0, s1, s2) = (&src(0)[..len], &src(1)[..len], &src(2)[..len]);
            for (((t, &a), &b), &c) in dst.iter_mut().zip(s0).zip(s1).zip(s2) {
                *t = combine(combine(combine(init, a), b), c);
            }
        }
        _ => {
            let spare = &mut spare[..len];
            // The passes alternate between the two buffers so that the last writes `dst`.
            for p in 1..n {
                let (to, from): (&mut [T], &[T]) = if (n - 1 - p).is_multiple_of(2) {
                    (&mut *dst, if p == 1 { &src(0)[..len] } else { &*spare })
                } else {
                    (&mut *spare, if p == 1 { &src(0)[..len] } else { &*dst })
                };
                for ((t, &a), &v) in to.iter_mut().zip(from).zip(src(p)) {
                    let a = if p == 1 { combine(init, a) } else { a };
                    *t = combine(a, v);
                }
            }
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

#[cfg(test)]
impl AxisWindows {
    /// Stride-2 windows `kernel` wide along an axis `n` long, `pad` before it, `out` of them.
    pub(super) fn stride2(n: usize, kernel: usize, pad: usize, out: usize) -> Self {
        let spans = (0..out)
            .map(|o| {
                let first = (2 * o) as i64 - pad as i64;
                let begin = first.clamp(0, n as i64) as usize;
                let end = (first + kernel as i64).clamp(0, n as i64) as usize;
                (begin, end.max(begin))
            })
            .collect();
        Self {
            spans,
            padded: vec![kernel; out],
            kernel,
            stride: 2,
            pad_begin: pad,
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn one_cell_windows_copy_each_windows_cell() {
        // Strides 1 to 3 over even and odd extents, and windows that are not one cell.
        for (h, w) in [(1, 1), (5, 7), (8, 9), (42, 42), (83, 83), (6, 33)] {
            for stride in 1..=3 {
                let axis = |n: usize| {
                    let out = (n - 1) / stride + 1;
                    let spans = (0..out).map(|o| (o * stride, o * stride + 1)).collect();
                    AxisWindows {
                        spans,
                        padded: vec![1; out],
                        kernel: 1,
                        stride,
                        pad_begin: 0,
                    }
                };
                let (rows, cols) = (axis(h), axis(w));
                let (oh, ow) = (rows.len(), cols.len());
                let x = crate::test_values::uniform(3 * h * w, (h * w + stride) as u64);
                let mut y = vec![f32::NAN; 3 * oh * ow];
                assert!(one_cell_windows(&x, (h, w), (&rows, &cols), true, &mut y));
                for (idx, &got) in y.iter().enumerate() {
                    let (plane, i, j) = (idx / (oh * ow), idx / ow % oh, idx % ow);
                    let want = x[plane * h * w + i * stride * w + j * stride];
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{h}x{w} stride {stride}: {idx}"
                    );
                }
            }
        }
        let two = AxisWindows::stride2(9, 2, 0, 4);
        let mut y = vec![0.0f32; 16];
        assert!(!one_cell_windows(
            &[0.0; 81],
            (9, 9),
            (&two, &two),
            false,
            &mut y
        ));
        assert!(y.iter().all(|&v| v == 0.0), "wrote nothing");
    }

    #[test]
    fn one_cell_windows_refuse_counted_padding() {
        // A 3×3 window over a 1×1 image with padding 1 holds one image cell and eight
        // padding cells: its average counting padding is the cell / 9, not the cell.
        let geo = Geometry {
            kernel: vec![3, 3],
            strides: vec![1, 1],
            dilations: vec![1, 1],
            pad_begin: vec![1, 1],
            pad_end: vec![1, 1],
            out: vec![1, 1],
        };
        let (rows, cols) = plane_windows(&geo, &[1, 1]);
        let mut y = [0.0f32];
        assert!(!one_cell_windows(
            &[2.0],
            (1, 1),
            (&rows, &cols),
            true,
            &mut y
        ));
        assert_eq!(y, [0.0], "wrote nothing");
        assert!(one_cell_windows(
            &[2.0],
            (1, 1),
            (&rows, &cols),
            false,
            &mut y
        ));
        assert_eq!(y, [2.0]);
    }
}
