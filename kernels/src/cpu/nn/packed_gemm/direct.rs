//! Convolutions without packing `B`: the image is copied once into a zero-padded buffer
//! (split into its stride phases, see [`PaddedImage`]), and then every row `(c, u, v)` of the
//! im2col matrix, restricted to one output row, is a contiguous run of that buffer — at a
//! fixed offset from the output row's start. The micro-kernels read those runs in place
//! through a table of per-row offsets ([`micro::Offsets`]), so the im2col gather and the panel
//! copies, a quarter to a third of a small-channel 3×3 convolution's time, disappear; the
//! padded copy costs one pass over the input instead of `kh · kw`.
//!
//! A pointwise convolution (1×1, unit stride, no padding) is its image read as it is: no
//! copy at all; the one tile that would read past the image's end is packed instead.
//!
//! Tiles run across output rows at the padded width (the columns that padding adds are
//! computed, then cropped), so that narrow rows do not end in narrow tiles. Where padding
//! widens rows a lot (a 1×7 kernel on 17-wide rows computes 23 columns per 17), the packed
//! path, which computes only real columns, stays ([`applies`]).

use rayon::prelude::*;

use super::micro::{self, Offsets};
use super::source::Image2d;
use super::{KC, MC, NC, PackedA, TASKS_PER_THREAD, split};
use crate::cpu::nn::epilogue::Epilogue;
use crate::cpu::nn::matrix::SendPtr;

/// How much wasted work the in-place path accepts, against the packing it saves: an output
/// row of `ow` columns computed at the padded width `w` wastes `w/ow − 1` of its
/// multiply-adds, while packing costs about `PACKING_WEIGHT / m` of them (each packed value
/// feeds `m` rows). Fitted on single 3×3, 5×5 and 1×7 convolutions against the packed path
/// (1 thread, AMD EPYC).
pub(super) const PACKING_WEIGHT: usize = 20;

/// True when `im`, multiplied by an `m`-row matrix, is best read in place: when its padding
/// widens the rows little enough for what packing would cost.
pub(super) fn applies(im: &Image2d<'_>, m: usize) -> bool {
    let ow = im.out[1];
    ow > 0 && (padded_width(im) - ow) * m < PACKING_WEIGHT * ow
}

/// The row length the in-place path computes at: an output row plus the window's reach past
/// it, in the padded image's phase plane.
pub(super) fn padded_width(im: &Image2d<'_>) -> usize {
    im.out[1] + (im.kernel[1] - 1) * im.dilations[1] / im.strides[1]
}

/// Floats of padded image one parallel task copies at least.
const COPY_TASK: usize = 1 << 13;

/// An image copied into a zero-padded buffer, with the offset of each im2col row.
///
/// With stride `s` along an axis the buffer holds the padded image's `s` phases along it
/// (every `s`-th column, starting at `0..s`): window column `o·s + v` of output column `o` is
/// column `o + v / s` of phase `v % s`, so an output row's im2col row is contiguous there too.
pub(super) struct PaddedImage<'a> {
    pub(super) data: &'a [f32],
    /// Row length of one phase plane.
    pub(super) width: usize,
    /// Output height and width.
    pub(super) out: [usize; 2],
    /// Offset of im2col row `(c, u, v)` from an output row's start in `data`.
    pub(super) offsets: Vec<usize>,
    /// Tiles starting at this column (from the first output row's start) or later would read
    /// past `data` at full width: `usize::MAX` when `data` ends in a tile's width of slack.
    tail: usize,
}

/// Where an image row's columns land in a row of column phase `qx` (stride `sw`): columns
/// `first..end` of the phase row hold image columns `start`, `start + sw`, …; the others are
/// padding. The same for every row, so computed once per phase, as is the choice of copy.
#[derive(Clone, Copy)]
struct PhaseColumns {
    first: usize,
    end: usize,
    start: usize,
    stride: usize,
    /// Unit stride on a CPU with AVX-512F: rows are copied as masked vectors.
    masked: bool,
}

impl PhaseColumns {
    /// The columns of phase `qx` for image rows `w` long, phase rows `width` long.
    fn new(w: usize, width: usize, qx: usize, sw: usize, left: usize) -> Self {
        let end = (w + left).saturating_sub(qx).div_ceil(sw).min(width);
        let first = left.saturating_sub(qx).div_ceil(sw).min(end);
        let start = (first * sw + qx).saturating_sub(left).min(w);
        #[cfg(target_arch = "x86_64")]
        let masked = sw == 1 && std::arch::is_x86_feature_detected!("avx512f");
        #[cfg(not(target_arch = "x86_64"))]
        let masked = false;
        PhaseColumns {
            first,
            end,
            start,
            stride: sw,
            masked,
        }
    }

    /// Fills `row` (a phase row) from the image row `src`: column `j` holds image column
    /// `j·sw + qx − left` where that is one, zero elsewhere.
    #[inline]
    fn fill(&self, row: &mut [f32], src: &[f32]) {
        let PhaseColumns {
            first, end, start, ..
        } = *self;
        assert!(first <= end && end <= row.len() && start + (end - first) <= src.len());
        #[cfg(target_arch = "x86_64")]
        if self.masked {
            // SAFETY: `masked` was set only where the CPU has AVX-512F; the assert above
            // bounds the copied columns.
            return unsafe { shifted_row_avx512(row, src, *self) };
        }
        row[..first].fill(0.0);
        let (dst, from) = (&mut row[first..end], &src[start..]);
        match self.stride {
            1 => dst.copy_from_slice(&from[..dst.len()]),
            2 => every_nth::<2>(dst, from),
            sw => dst
                .iter_mut()
                .zip(from.iter().step_by(sw))
                .for_each(|(d, s)| *d = *s),
        }
        row[end..].fill(0.0);
    }
}

/// [`PhaseColumns::fill`] for unit stride in masked 16-wide vectors: a row as short as a 14×14
/// image's costs a few instructions instead of three `memset`/`memcpy` calls, whose call
/// overhead was most of the copy's time on such rows.
///
/// # Safety
/// The CPU has AVX-512F; `first ≤ end ≤ row.len()` and `start + end − first ≤ src.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn shifted_row_avx512(row: &mut [f32], src: &[f32], cols: PhaseColumns) {
    use std::arch::x86_64::*;
    let PhaseColumns {
        first, end, start, ..
    } = cols;
    // Row column j (first <= j < end) holds from[j].
    let from = src.as_ptr().wrapping_add(start).wrapping_sub(first);
    let lanes = |lo: usize, hi: usize, j0: usize| -> __mmask16 {
        let (lo, hi) = (lo.clamp(j0, j0 + 16) - j0, hi.clamp(j0, j0 + 16) - j0);
        (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as __mmask16
    };
    for j0 in (0..row.len()).step_by(16) {
        // SAFETY: only the lanes of columns first..end are read (inside src by the
        // contract) and only columns below row.len() are written; masked-off lanes never
        // touch memory.
        unsafe {
            let v = _mm512_maskz_loadu_ps(lanes(first, end, j0), from.wrapping_add(j0));
            _mm512_mask_storeu_ps(row.as_mut_ptr().add(j0), lanes(0, row.len(), j0), v);
        }
    }
}

/// `dst[j] = src[j · N]` for every `j` of `dst` (a constant stride, which the compiler turns
/// into vector shuffles).
fn every_nth<const N: usize>(dst: &mut [f32], src: &[f32]) {
    let Some(last) = dst.len().checked_sub(1) else {
        return;
    };
    let (body, tail) = dst.split_at_mut(last);
    for (d, s) in body.iter_mut().zip(src.chunks_exact(N)) {
        *d = s[0];
    }
    tail[0] = src[last * N];
}

impl<'a> PaddedImage<'a> {
    /// True when `im` is its own padded image: unit strides and no padding (not even at the
    /// end), as a pointwise convolution's or inception's 3×3 stem layers'.
    fn is_unpadded(im: &Image2d<'_>) -> bool {
        let ([h, w], [oh, ow], [kh, kw], [dh, dw]) = (im.size, im.out, im.kernel, im.dilations);
        im.strides == [1, 1]
            && im.pads == [0, 0]
            && oh + (kh - 1) * dh == h
            && ow + (kw - 1) * dw == w
    }

    /// The image of an unpadded convolution ([`PaddedImage::is_unpadded`]), read where it is.
    fn borrowed(im: &Image2d<'a>, channels: usize, nr: usize) -> Self {
        let [h, w] = im.size;
        let plane = h * w;
        let cells = window_cells(im, w, plane);
        // How far past a row's start a window reaches: its last cell.
        let reach = cells.last().copied().unwrap_or(0);
        let offsets = im2col_offsets(&cells, channels, plane);
        PaddedImage {
            data: &im.img[..channels * plane],
            width: w,
            out: im.out,
            offsets,
            tail: (plane - reach + 1).saturating_sub(nr),
        }
    }

    /// Copies `im` into `buffer` (grown as needed): for each of the `channels`, its `sh · sw`
    /// phase planes, each `(oh + (kh−1)·dh / sh) × (ow + (kw−1)·dw / sw)`, which hold every
    /// window exactly, then one tile's width of slack so that a narrow tile's full-width loads stay inside.
    /// Phases no tap reads (a 1×1 kernel with stride 2 reads one of four) are left as they are.
    fn new(im: &Image2d<'_>, channels: usize, buffer: &'a mut Vec<f32>, nr: usize) -> Self {
        let ([h, w], [kh, kw], [dh, dw]) = (im.size, im.kernel, im.dilations);
        let ([oh, _], [sh, sw], [top, left]) = (im.out, im.strides, im.pads);
        let (height, width) = (oh + (kh - 1) * dh / sh, padded_width(im));
        let plane = height * width;
        let len = sh * sw * channels * plane + nr;
        if buffer.len() < len {
            buffer.resize(len, 0.0);
        }
        let mut read = vec![false; sh * sw];
        for u in 0..kh {
            for v in 0..kw {
                read[(u * dh % sh) * sw + v * dw % sw] = true;
            }
        }
        let data = &mut buffer[..len];
        let image = &im.img[..channels * h * w];
        let phases = sh * sw;
        let columns: Vec<PhaseColumns> = (0..sw)
            .map(|qx| PhaseColumns::new(w, width, qx, sw, left))
            .collect();
        // One task per channel and row phase (at least COPY_TASK floats per task: a small
        // image's copy is over before a second thread would join; a stem's 3 channels by
        // channel alone left one of 2 threads two thirds of the copy; googlenet's 7×7 stem
        // 0.985× the time, `conv_rate`, 2 threads): a source row is read once for all its
        // column phases.
        data[..len - nr]
            .par_chunks_mut(sw * plane)
            .with_min_len(COPY_TASK.div_ceil(sw * plane))
            .enumerate()
            .for_each(|(task, planes)| {
                let (c, qy) = (task / sh, task % sh);
                let src = &image[c * h * w..(c + 1) * h * w];
                for i in 0..height {
                    let y = (i * sh + qy) as isize - top as isize;
                    let src = (0..h as isize)
                        .contains(&y)
                        .then(|| &src[y as usize * w..(y as usize + 1) * w]);
                    for qx in (0..sw).filter(|&qx| read[qy * sw + qx]) {
                        let row = &mut planes[qx * plane + i * width..][..width];
                        match src {
                            Some(src) => columns[qx].fill(row, src),
                            None => row.fill(0.0),
                        }
                    }
                }
            });
        data[len - nr..].fill(0.0);
        let offsets = im2col_offsets(&window_cells(im, width, plane), channels, phases * plane);
        PaddedImage {
            data,
            width,
            out: im.out,
            offsets,
            tail: usize::MAX,
        }
    }

    /// Packs the `kc × nr` tile whose rows start at column `start` of the depth block
    /// `(pc, kc)` into `panel` (zeros past the image's end); returns the panel's start.
    fn pack_tail(
        &self,
        panel: &mut Vec<f32>,
        (pc, kc): (usize, usize),
        start: usize,
        nr: usize,
    ) -> *const f32 {
        panel.clear();
        panel.resize(kc * nr, 0.0);
        for (p, row) in panel.chunks_exact_mut(nr).enumerate() {
            let from = (self.offsets[pc + p] + start).min(self.data.len());
            let src = &self.data[from..(from + nr).min(self.data.len())];
            row[..src.len()].copy_from_slice(src);
        }
        panel.as_ptr()
    }
}

/// The offset of each window cell `(u, v)` within one channel's phase planes (`plane` floats
/// each, rows `width` long; one plane at unit strides).
fn window_cells(im: &Image2d<'_>, width: usize, plane: usize) -> Vec<usize> {
    let ([kh, kw], [dh, dw], [sh, sw]) = (im.kernel, im.dilations, im.strides);
    (0..kh)
        .flat_map(|u| {
            (0..kw).map(move |v| {
                let (y, x) = (u * dh, v * dw);
                let phase = (y % sh) * sw + x % sw;
                phase * plane + (y / sh) * width + x / sw
            })
        })
        .collect()
}

/// Every im2col row's offset: channel `c`'s window `cells`, `c · stride` further on. Built in
/// place at its exact size (a table grown push by push made googlenet's pointwise
/// convolutions on 7×7 measurably slower).
pub(super) fn im2col_offsets(cells: &[usize], channels: usize, stride: usize) -> Vec<usize> {
    if let [cell] = cells {
        return (0..channels).map(|c| c * stride + cell).collect();
    }
    let mut offsets = Vec::with_capacity(channels * cells.len());
    for c in 0..channels {
        offsets.extend(cells.iter().map(|&cell| c * stride + cell));
    }
    offsets
}

/// Runs `f` on `im` (`channels` of them) as a [`PaddedImage`] with `nr` floats of slack: an
/// unpadded image as it is, any other copied into the calling thread's buffer (reused across
/// calls: fresh pages would fault in).
pub(super) fn with_padded_image<R>(
    im: &Image2d<'_>,
    channels: usize,
    nr: usize,
    f: impl FnOnce(&PaddedImage<'_>) -> R,
) -> R {
    let run = |buffer: &mut Vec<f32>| {
        let img = if PaddedImage::is_unpadded(im) {
            PaddedImage::borrowed(im, channels, nr)
        } else {
            PaddedImage::new(im, channels, buffer, nr)
        };
        f(&img)
    };
    PADDED.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => run(&mut buffer),
        Err(_) => run(&mut Vec::new()),
    })
}

impl PackedA {
    /// `c = self · im2col(im) (+ bias)` for a unit-stride image ([`applies`]), reading the
    /// image in place; the rest as [`PackedA::multiply`].
    pub(super) fn multiply_in_place(
        &self,
        im: &Image2d<'_>,
        c: &mut [f32],
        ldc: usize,
        bias: Option<&[f32]>,
        epilogue: Option<&Epilogue<'_, f32>>,
    ) {
        let (mr, nr) = self.isa.tile();
        let channels = self.k / (im.kernel[0] * im.kernel[1]);
        with_padded_image(im, channels, nr, |img| {
            let (row_panels, oh) = (self.m.div_ceil(mr), img.out[0]);
            let threads = super::threads();
            let tasks = TASKS_PER_THREAD * threads;
            let c_ptr = SendPtr(c.as_mut_ptr());
            let tile_task = |rows: (usize, usize), out_rows: (usize, usize)| {
                // SAFETY: tasks cover disjoint rectangles of C, inside the caller's checked slice.
                unsafe {
                    self.block_in_place(img, bias, epilogue, c_ptr.get(), ldc, rows, out_rows)
                }
            };
            let work = self.m * self.k * oh * img.out[1];
            if work < super::PARALLEL_WORK || threads < 2 {
                tile_task((0, row_panels), (0, oh));
            } else if oh >= tasks && (oh / tasks * img.out[1] >= 4 * nr || row_panels < tasks) {
                split(oh, tasks).for_each(|out_rows| tile_task((0, row_panels), out_rows));
            } else {
                split(row_panels, tasks).for_each(|rows| tile_task(rows, (0, oh)));
            }
        })
    }

    /// Row panels `rows.0..rows.1` × output rows `out_rows.0..out_rows.1` of `C`.
    ///
    /// The tiles run over the padded image's rows, not the output's: output `(y, x)` is
    /// column `y · width + x` of the im2col matrix read in place, so every tile but the
    /// block's last is full whatever the output's width, at the price of `width − ow`
    /// columns computed per row and cropped away (no cropping when no padding widens them).
    ///
    /// # Safety
    /// As [`PackedA::block`]; `img` holds this matrix's `B`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn block_in_place(
        &self,
        img: &PaddedImage<'_>,
        bias: Option<&[f32]>,
        epilogue: Option<&Epilogue<'_, f32>>,
        c: *mut f32,
        ldc: usize,
        rows: (usize, usize),
        out_rows: (usize, usize),
    ) {
        let (mr, nr) = self.isa.tile();
        let (ow, width) = (img.out[1], img.width);
        let cropped = width != ow;
        let panels_per_block = (MC / mr).max(1);
        // Blocks of whole output rows, about as wide as the packed path's column blocks.
        let rows_per_block = (NC / width).max(1);
        let mut tail = Vec::new();
        WIDE_C.with_borrow_mut(|scratch| {
            for y0 in (out_rows.0..out_rows.1).step_by(rows_per_block) {
                let y1 = (y0 + rows_per_block).min(out_rows.1);
                // The block's columns: its rows at the padded width, the last one cut at `ow`.
                let n = (y1 - y0 - 1) * width + ow;
                let (dst, ldd) = if cropped {
                    if scratch.len() < self.m * n {
                        scratch.resize(self.m * n, 0.0);
                    }
                    (scratch.as_mut_ptr(), n)
                } else {
                    // SAFETY: output row y0 lies inside the caller's C.
                    (unsafe { c.add(y0 * ow) }, ldc)
                };
                for pc in (0..self.k).step_by(KC) {
                    let kc = KC.min(self.k - pc);
                    let offsets = Offsets(img.offsets[pc..].as_ptr());
                    // Tiles written to the scratch are finished after their crop.
                    let in_tiles = self
                        .tile_finish(epilogue, (pc, kc))
                        .filter(|_| !cropped)
                        .map(|f| f.shifted(y0 * ow));
                    for ic in (rows.0..rows.1).step_by(panels_per_block) {
                        let panels = (ic, (ic + panels_per_block).min(rows.1));
                        let next = self.next_row_block(panels, (pc, kc), rows.0, rows.1);
                        let column_tiles = n.div_ceil(nr);
                        for x0 in (0..n).step_by(nr) {
                            let (start, wide) = (y0 * width + x0, nr.min(n - x0));
                            if start >= img.tail {
                                let panel = img.pack_tail(&mut tail, (pc, kc), start, nr);
                                // SAFETY: as below, the packed panel holds kc·NR values.
                                unsafe {
                                    self.tile_column(panels, (pc, kc), panel, micro::Panel(nr))
                                        .finishing(in_tiles.map(|f| f.shifted(x0)))
                                        .write(dst.add(x0), ldd, wide, bias)
                                };
                                continue;
                            }
                            let b = img.data[start..].as_ptr();
                            if x0 + nr < n {
                                // SAFETY: the table has kc entries from pc.
                                unsafe {
                                    micro::prefetch_rows(b.wrapping_add(nr), offsets, kc, nr)
                                };
                            }
                            // SAFETY: the tile column lies in this task's rectangle of C (or
                            // in the scratch, `m × n`); every B row read, `b + offsets[p] +
                            // 0..NR`, lies in the padded image or its slack (tiles that would
                            // not are packed above).
                            unsafe {
                                self.tile_column(panels, (pc, kc), b, offsets)
                                    .prefetching(next, x0 / nr, column_tiles)
                                    .finishing(in_tiles.map(|f| f.shifted(x0)))
                                    .write(dst.add(x0), ldd, wide, bias)
                            };
                        }
                        if cropped && pc + kc == self.k {
                            // SAFETY: the scratch holds these rows; the output rows are this
                            // task's.
                            unsafe { self.crop(panels, (dst, n), img, c, ldc, (y0, y1)) };
                        }
                        if in_tiles.is_none() {
                            let cols = (y0 * ow, (y1 - y0) * ow);
                            // SAFETY: these rows × columns are this task's.
                            unsafe { self.finish_rows(epilogue, panels, (pc, kc), c, ldc, cols) };
                        }
                    }
                }
            }
        });
    }

    /// Copies output rows `y0..y1` of the rows of `panels` from `wide` (row stride `n`, image
    /// rows at the padded width) into `c`.
    ///
    /// # Safety
    /// `wide` holds `m × n` floats; `c` is valid for the whole `m × oh·ow` output at row
    /// stride `ldc`, and no other thread touches these rows × output rows.
    unsafe fn crop(
        &self,
        panels: (usize, usize),
        (wide, n): (*const f32, usize),
        img: &PaddedImage<'_>,
        c: *mut f32,
        ldc: usize,
        (y0, y1): (usize, usize),
    ) {
        let (mr, _) = self.isa.tile();
        let (ow, width) = (img.out[1], img.width);
        for i in panels.0 * mr..(panels.1 * mr).min(self.m) {
            // SAFETY: row i of the scratch and of this task's part of the output.
            let (src, dst) = unsafe {
                (
                    std::slice::from_raw_parts(wide.add(i * n), n),
                    std::slice::from_raw_parts_mut(c.add(i * ldc + y0 * ow), (y1 - y0) * ow),
                )
            };
            for (out, row) in dst.chunks_exact_mut(ow).zip(src.chunks(width)) {
                out.copy_from_slice(&row[..ow]);
            }
        }
    }
}

thread_local! {
    /// The calling thread's buffer for padded images.
    static PADDED: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Each thread's block of `C` at the padded image's width, before cropping.
    static WIDE_C: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}
