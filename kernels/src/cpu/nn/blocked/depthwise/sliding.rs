//! Sliding runs along the rows of the blocked depthwise convolution: `R` outputs of one
//! block at a time, the image vectors a kernel row's outputs share loaded once into
//! registers, for strides 1 and 2 and windows up to 7 wide; and the run width a row's
//! geometry takes ([`slides`]).

use super::super::vector16::{Vector16, Zmm};
use super::{BLOCK, Columns, Filter, Planes, Slide, Sliding, Window, biases, store};

/// The run widths [`sliding`] has instances for at unit stride, widest first.
const WIDTHS: [usize; 3] = [11, 8, 4];

/// The run width for rows of `out` outputs and [`sliding`]'s instances for it (inside the
/// interior, and at the edges). At unit stride: the width that computes the fewest outputs
/// again (a row's last run overlaps the one before it), the wider on a tie (8 wide ran 42
/// outputs faster than 7, and 11 faster than 8); at stride 2, 8 (its `2 · 7 + 7` image
/// vectors and 8 accumulators still fit the registers) or 4. None for other strides,
/// dilations or windows, or rows narrower than every run.
pub(super) fn slides(columns: &Columns) -> Option<Sliding> {
    let out = columns.out;
    let width = match columns.stride {
        1 => WIDTHS
            .into_iter()
            .filter(|&w| w <= out)
            .min_by_key(|&w| out.div_ceil(w) * w)?,
        _ => [8, 4].into_iter().find(|&w| w <= out)?,
    };
    macro_rules! pair {
        ($r:literal, $kw:literal, $s:literal) => {
            (
                sliding::<$r, $kw, $s, false> as Slide,
                sliding::<$r, $kw, $s, true> as Slide,
            )
        };
    }
    macro_rules! widths {
        ($kw:literal, 1) => {
            match width {
                11 => pair!(11, $kw, 1),
                8 => pair!(8, $kw, 1),
                _ => pair!(4, $kw, 1),
            }
        };
        ($kw:literal, 2) => {
            match width {
                8 => pair!(8, $kw, 2),
                _ => pair!(4, $kw, 2),
            }
        };
    }
    let (inside, edges) = match (columns.stride, columns.dilation, columns.kernel) {
        (1, 1, 3) => widths!(3, 1),
        (1, 1, 5) => widths!(5, 1),
        (1, 1, 7) => widths!(7, 1),
        (2, 1, 3) => widths!(3, 2),
        (2, 1, 5) => widths!(5, 2),
        (2, 1, 7) => widths!(7, 2),
        _ => return None,
    };
    Some(Sliding {
        width,
        inside,
        edges,
    })
}

/// Most image vectors one kernel row of [`sliding`] reads: `S · (R − 1) + KW`, at most
/// `11 + 7 − 1` at unit stride and `2 · 7 + 7` at stride 2.
const WINDOW_VECTORS: usize = 21;

/// A vector of zeros, which [`sliding`] reads for the columns outside the image.
#[repr(align(64))]
struct Zeros([f32; BLOCK]);
static ZEROS: Zeros = Zeros([0.0; BLOCK]);

/// Outputs `ox..ox + R` of block `k` alone, for column stride `S` (1 or 2), unit dilation
/// and a `KW`-wide window (at most 7): the `S · (R − 1) + KW` image vectors a kernel row's
/// outputs share are loaded once into registers, and each tap's weights once for the `R`
/// outputs. One block's accumulators and its image vectors fit the 32 zmm registers; four
/// blocks of 4 together, which the compiler interleaved, spilled a dozen vectors to the stack
/// and ran at 18–23 % of the FMA peak (`depthwise_rate`). With `EDGE`, the image vectors
/// outside the row are read from a vector of zeros, so the padding's taps add zeros; a row's
/// edges then run as fast as its interior, where one output at a time had cost small images
/// up to half their time. Each output adds its taps in the same order as in [`super::run`].
///
/// # Safety
/// As [`super::run`]'s for block `k` (below the planes' count), with `columns.stride` `S`,
/// `columns.dilation` 1 and `columns.kernel` `KW`, `ox + R` at most the output width; without
/// `EDGE`, every tap of these outputs inside the image.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn sliding<const R: usize, const KW: usize, const S: usize, const EDGE: bool>(
    planes: &Planes<'_>,
    k: usize,
    window: &Window<'_>,
    columns: &Columns,
    filter: &Filter<'_>,
    ox: usize,
) {
    debug_assert!(S * (R - 1) + KW <= WINDOW_VECTORS);
    let taps = filter.taps;
    // The run's first image column (before the row when the run starts in the padding).
    let first = (ox * S) as isize - columns.pad as isize;
    // SAFETY: the caller's contract: without `EDGE` every tap of these outputs lies inside
    // the image; with it, only the vectors inside the row are read.
    unsafe {
        let img = planes.image.as_ptr().add(k * planes.plane);
        let w = filter.weights.as_ptr().add(k * taps * BLOCK);
        let [mut acc] = biases::<Zmm, 1, R>(filter.bias.as_ptr().add(k * BLOCK));
        let floor = Zmm::splat(filter.floor);
        for (ky, iy) in window.inside() {
            let line = img.add(iy * columns.width * BLOCK);
            let mut xs = [Zmm::splat(0.0); WINDOW_VECTORS];
            for (i, x) in xs.iter_mut().enumerate().take(S * (R - 1) + KW) {
                let ix = first + i as isize;
                let at = line.wrapping_offset(ix * BLOCK as isize);
                // Outside the row, a vector of zeros: a pointer chosen without a branch
                // (masked loads took each mask from the stack, a second load per vector).
                let at = match EDGE && (ix as usize) >= columns.width {
                    true => ZEROS.0.as_ptr(),
                    false => at,
                };
                *x = floor.max(Zmm::load(at));
            }
            for kx in 0..KW {
                let wv = Zmm::load(w.add((ky * KW + kx) * BLOCK));
                for (j, a) in acc.iter_mut().enumerate() {
                    *a = xs[S * j + kx].mul_add(wv, *a);
                }
            }
        }
        let block = Planes {
            image: planes.image,
            plane: planes.plane,
            out: planes.out.add(k * planes.out_plane),
            out_plane: planes.out_plane,
        };
        store(&[acc], filter.clamp, &block, ox);
    }
}
