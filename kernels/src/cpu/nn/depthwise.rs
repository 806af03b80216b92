//! Direct depthwise convolution (one input channel per group) for 1-d and 2-d images; a 1-d
//! image is computed as a 2-d image of height 1.
//!
//! Each input plane is copied into its padded stride phases ([`PhasePlanes`]), and the whole
//! output plane is then one sweep of `kh·kw` multiply-adds over long contiguous runs, in
//! register blocks. A row-by-row loop lost most of its time to per-row overhead on short rows
//! (ONNX Runtime was 7× faster on 14×14 planes).

use rayon::prelude::*;

use super::common::Real;
use super::epilogue::Epilogue;
use super::phase_planes::{PhasePlanes, Window2d};
use super::spatial::Geometry;

/// Output elements computed together; their sums stay in registers across all taps.
const BLOCK: usize = 64;

/// The shape of one depthwise convolution, in two dimensions.
#[derive(Debug, Clone)]
pub(super) struct Depthwise {
    in_ch: usize,
    out_ch: usize,
    window: Window2d,
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
            window: Window2d {
                image: two(image, 1),
                out: two(&geo.out, 1),
                kernel: two(&geo.kernel, 1),
                strides: two(&geo.strides, 1),
                dilations: two(&geo.dilations, 1),
                pads: two(&geo.pad_begin, 0),
            },
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
        let Window2d {
            image, out, kernel, ..
        } = self.window;
        let layout = PhasePlanes::new(&self.window, BLOCK);
        let (olen, ilen, klen) = (out[0] * out[1], image[0] * image[1], kernel[0] * kernel[1]);
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
        layout: &PhasePlanes,
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
        layout: &PhasePlanes,
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
        layout: &PhasePlanes,
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
        layout: &PhasePlanes,
        plane: &Plane<'_, T>,
        padded: &mut [T],
        sums: &mut [T],
        out: &mut [T],
    ) {
        layout.scatter(plane.src, padded);
        sweep::<T, FMA>(padded, &layout.taps, plane.ws, plane.bias, sums);
        layout.crop(sums, out);
    }
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
