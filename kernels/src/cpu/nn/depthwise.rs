//! Direct depthwise convolution (one input channel per group) for 1-d and 2-d images; a 1-d
//! image is computed as a 2-d image of height 1.
//!
//! Each input plane is first copied into a zero-padded buffer split into its stride phases:
//! phase `(a, b)` holds the padded pixels `(s_h·i + a, s_w·j + b)`. In that layout every tap
//! of the kernel reads, for consecutive outputs, consecutive elements of one phase plane, so
//! the whole output plane (computed at the phase planes' width, the extra columns cropped) is
//! one sweep of `kh·kw` multiply-adds over long contiguous runs, whatever the stride, dilation
//! or padding. Rows as short as 7 or 14 pixels then cost no per-row loop overhead, which is
//! where a row-by-row loop lost most of its time (ONNX Runtime was 7× faster on 14×14 planes).

use rayon::prelude::*;

use super::common::Real;
use super::epilogue::Epilogue;
use super::spatial::Geometry;

/// Output elements computed together; their sums stay in registers across all taps.
const BLOCK: usize = 64;

/// The shape of one depthwise convolution, in two dimensions.
#[derive(Debug, Clone)]
pub(super) struct Depthwise {
    in_ch: usize,
    out_ch: usize,
    image: [usize; 2],
    out: [usize; 2],
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    pads: [usize; 2],
}

/// Where one plane's taps read: the padded phase layout of an input plane.
struct PhaseLayout {
    /// Rows and columns of every phase plane.
    rows: usize,
    cols: usize,
    /// Offset of each tap's first read, in kernel order.
    taps: Vec<usize>,
    /// Length of the buffer (phase planes plus the slack the last block reads).
    len: usize,
    /// Output elements computed per plane (`out rows × cols`, rounded up to [`BLOCK`]).
    computed: usize,
    /// Where the columns of an image row go, one span per column phase.
    spans: Vec<ColumnSpan>,
}

impl Depthwise {
    /// The convolution of images of `in_ch` channels to `out_ch` channels (a multiple of
    /// `in_ch`), `image` and `geo` of one or two spatial dimensions.
    pub(super) fn new(in_ch: usize, out_ch: usize, image: &[usize], geo: &Geometry) -> Depthwise {
        let two = |v: &[usize], one: usize| {
            if v.len() == 2 {
                [v[0], v[1]]
            } else {
                [one, v[0]]
            }
        };
        Depthwise {
            in_ch,
            out_ch,
            image: two(image, 1),
            out: two(&geo.out, 1),
            kernel: two(&geo.kernel, 1),
            strides: two(&geo.strides, 1),
            dilations: two(&geo.dilations, 1),
            pads: two(&geo.pad_begin, 0),
        }
    }

    fn layout(&self) -> PhaseLayout {
        let [oh, ow] = self.out;
        // The padded extent every tap of every output reaches, and at least the image.
        let reach = |d: usize| {
            let needed =
                (self.out[d] - 1) * self.strides[d] + (self.kernel[d] - 1) * self.dilations[d] + 1;
            needed.max(self.pads[d] + self.image[d])
        };
        let [sh, sw] = self.strides;
        let (rows, cols) = (reach(0).div_ceil(sh), reach(1).div_ceil(sw));
        let plane = rows * cols;
        let mut taps = Vec::with_capacity(self.kernel[0] * self.kernel[1]);
        for ky in 0..self.kernel[0] {
            for kx in 0..self.kernel[1] {
                let (r, c) = (ky * self.dilations[0], kx * self.dilations[1]);
                let phase = (r % sh) * sw + c % sw;
                taps.push(phase * plane + (r / sh) * cols + c / sw);
            }
        }
        let computed = (oh * cols).div_ceil(BLOCK) * BLOCK;
        let last = taps.iter().copied().max().unwrap_or(0);
        debug_assert!(ow <= cols);
        let (iw, pw) = (self.image[1], self.pads[1]);
        // Image column `x` is padded column `x + pw`: phase `(x + pw) % sw`, column `(x + pw) / sw`.
        // The first `sw` image columns start the spans, in column order.
        let spans = (0..sw.min(iw))
            .map(|from| ColumnSpan {
                from,
                to: ((from + pw) % sw) * plane + (from + pw) / sw,
                count: (iw - from).div_ceil(sw),
            })
            .collect();
        PhaseLayout {
            rows,
            cols,
            len: (sh * sw * plane).max(last + computed),
            taps,
            computed,
            spans,
        }
    }

    /// `y = epilogue(conv(xs, ws) + bias)`: `xs` is `[batch, in_ch, image]`, `ws`
    /// `[out_ch, 1, kernel]`, `bias` `[out_ch]`, and `y` `[batch, out_ch, out]`, all contiguous.
    /// Every element of `y` is written.
    pub(super) fn run<T: Real>(
        &self,
        xs: &[T],
        ws: &[T],
        bias: Option<&[T]>,
        epilogue: Option<&Epilogue<'_, T>>,
        y: &mut [T],
    ) {
        let layout = self.layout();
        let olen = self.out[0] * self.out[1];
        let ilen = self.image[0] * self.image[1];
        let klen = self.kernel[0] * self.kernel[1];
        let mult = self.out_ch / self.in_ch;
        if olen == 0 {
            return;
        }
        // The padding cells are the same in every plane: zeroed once per task, never written.
        let scratch = || (vec![T::ZERO; layout.len], vec![T::ZERO; layout.computed]);
        let isa = Isa::detect();
        y.par_chunks_mut(olen)
            .enumerate()
            .for_each_init(scratch, |(padded, sums), (r, out)| {
                let (n, m) = (r / self.out_ch, r % self.out_ch);
                let c = n * self.in_ch + m / mult;
                let plane = Plane {
                    src: &xs[c * ilen..(c + 1) * ilen],
                    ws: &ws[m * klen..(m + 1) * klen],
                    bias: bias.map_or(T::ZERO, |bs| bs[m]),
                };
                self.plane(isa, &layout, &plane, padded, sums, out);
                if let Some(e) = epilogue {
                    e.finish(out, r * olen);
                }
            });
    }

    /// Computes one output plane with the widest code the CPU runs.
    fn plane<T: Real>(
        &self,
        isa: Isa,
        layout: &PhaseLayout,
        plane: &Plane<'_, T>,
        padded: &mut [T],
        sums: &mut [T],
        out: &mut [T],
    ) {
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::detect` saw AVX-512F (and with it FMA).
            Isa::Avx512 => unsafe { self.plane_avx512(layout, plane, padded, sums, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::detect` saw AVX2 and FMA.
            Isa::Avx2 => unsafe { self.plane_avx2(layout, plane, padded, sums, out) },
            Isa::Portable => self.plane_with::<T, false>(layout, plane, padded, sums, out),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn plane_avx512<T: Real>(
        &self,
        layout: &PhaseLayout,
        plane: &Plane<'_, T>,
        padded: &mut [T],
        sums: &mut [T],
        out: &mut [T],
    ) {
        self.plane_with::<T, true>(layout, plane, padded, sums, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn plane_avx2<T: Real>(
        &self,
        layout: &PhaseLayout,
        plane: &Plane<'_, T>,
        padded: &mut [T],
        sums: &mut [T],
        out: &mut [T],
    ) {
        self.plane_with::<T, true>(layout, plane, padded, sums, out)
    }

    /// The body of [`Depthwise::plane`]: scatter, sweep, crop. `FMA` fuses each multiply-add
    /// (only where the CPU has FMA: the software fallback is far slower than a multiply and
    /// an add).
    #[inline(always)]
    fn plane_with<T: Real, const FMA: bool>(
        &self,
        layout: &PhaseLayout,
        plane: &Plane<'_, T>,
        padded: &mut [T],
        sums: &mut [T],
        out: &mut [T],
    ) {
        self.scatter(plane.src, layout, padded);
        sweep::<T, FMA>(padded, &layout.taps, plane.ws, plane.bias, sums);
        let ow = self.out[1];
        for (row, sum) in out.chunks_exact_mut(ow).zip(sums.chunks(layout.cols)) {
            row.iter_mut().zip(sum).for_each(|(o, &v)| *o = v);
        }
    }

    /// Copies one input plane into the interior of its padded phase planes.
    #[inline(always)]
    fn scatter<T: Real>(&self, plane: &[T], layout: &PhaseLayout, padded: &mut [T]) {
        let iw = self.image[1];
        let [sh, sw] = self.strides;
        let (phase_rows, cols) = (sw * layout.rows * layout.cols, layout.cols);
        // Padded row `iy + ph` lies in row phase `a`, row `i` of its phase planes.
        let (mut a, mut i) = (self.pads[0] % sh, self.pads[0] / sh);
        for src in plane.chunks_exact(iw) {
            let row = &mut padded[a * phase_rows + i * cols..];
            if sw == 1 {
                row[self.pads[1]..self.pads[1] + iw].copy_from_slice(src);
            } else if let [even, odd] = layout.spans[..] {
                // Stride 2: even and odd columns go to two phases, one pair at a time.
                let (lo, hi) = row.split_at_mut(even.to.max(odd.to));
                let (to_even, to_odd) = if even.to < odd.to {
                    (&mut lo[even.to..], hi)
                } else {
                    (hi, &mut lo[odd.to..])
                };
                let pairs = src.chunks_exact(2).zip(to_even.iter_mut().zip(to_odd));
                for (pair, (e, o)) in pairs {
                    (*e, *o) = (pair[0], pair[1]);
                }
                if iw % 2 == 1 {
                    to_even[iw / 2] = src[iw - 1];
                }
            } else {
                for span in &layout.spans {
                    let dst = &mut row[span.to..span.to + span.count];
                    let src = &src[span.from..span.from + (span.count - 1) * sw + 1];
                    for (k, d) in dst.iter_mut().enumerate() {
                        *d = src[k * sw];
                    }
                }
            }
            a += 1;
            if a == sh {
                (a, i) = (0, i + 1);
            }
        }
    }
}

/// The image columns of one column phase: every `stride`-th column from `from`, `count` of
/// them, land at `to..to + count` of a padded row (counted from the row's first phase).
#[derive(Debug, Clone, Copy)]
struct ColumnSpan {
    from: usize,
    to: usize,
    count: usize,
}

/// The instruction set [`Depthwise::plane`] compiles its loops for.
#[derive(Debug, Clone, Copy)]
enum Isa {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Portable,
}

impl Isa {
    fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }
}

/// One output plane's operands: its input plane, its kernel and its bias.
struct Plane<'a, T> {
    src: &'a [T],
    ws: &'a [T],
    bias: T,
}

/// `sums[i] = bias + Σ_t ws[t] · padded[taps[t] + i]` for every `i` of `sums` (a multiple of
/// [`BLOCK`] long).
#[inline(always)]
fn sweep<T: Real, const FMA: bool>(
    padded: &[T],
    taps: &[usize],
    ws: &[T],
    bias: T,
    sums: &mut [T],
) {
    for (block, out) in sums.chunks_exact_mut(BLOCK).enumerate() {
        let base = block * BLOCK;
        let mut acc = [bias; BLOCK];
        for (&tap, &w) in taps.iter().zip(ws) {
            let src: &[T; BLOCK] = padded[tap + base..tap + base + BLOCK]
                .try_into()
                .expect("a block is BLOCK long");
            for (a, &v) in acc.iter_mut().zip(src) {
                *a = if FMA { w.mul_add(v, *a) } else { *a + w * v };
            }
        }
        out.copy_from_slice(&acc);
    }
}
