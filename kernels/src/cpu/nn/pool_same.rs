//! `f32` unit-stride "same" pooling (the output plane as large as the input: the 3×3 branches
//! of Inception, GoogLeNet and NASNet) over all planes at once, on AVX-512.
//!
//! The planes are one flat array of rows. Each pass (down the rows, then across the columns)
//! steps through it 16 cells at a time, whatever plane or row they fall in. A vector's lanes
//! follow from the position of its first cell in its plane (and in its row), which steps by 16
//! modulo the plane (row) size; window cells outside a lane's plane or row are masked off
//! (down the rows a masked load, never read, so the input needs no padding; across the
//! columns a blend, from a table of masks per column position). Vectors away from a plane's
//! top and bottom rows load without masks. Planes of 7×7 cost little more per cell than
//! large ones, where the per-plane path spent most of its time on per-plane and per-row
//! overhead (googlenet's 7×7 and 14×14 pools were 2–3.5× ONNX Runtime's NCHWc pools;
//! `examples/pool_rate.rs` times this path).
//!
//! Work is split in blocks of whole rows, small enough that a block's vertical result stays in
//! L1 for the pass across.

use rayon::prelude::*;

/// Cells per block (a block holds at least one row).
const BLOCK: usize = 2048;

/// Cells of slack on each side of a block's vertical result, so that the pass across reads
/// whole vectors (windows up to `PAD + 1` columns wide).
const PAD: usize = 16;

/// What a window computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    /// The largest cell; a NaN never wins a window.
    Max,
    /// The mean of the cells, counting the padding's cells or not.
    Average {
        /// Whether the padding's cells count in the mean (`count_include_pad`).
        include_pad: bool,
    },
}

/// A "same" window: `kernel` cells per axis (rows, columns), `pad_begin` of them before the
/// output's own cell.
#[derive(Debug, Clone, Copy)]
pub struct SameWindow {
    /// The window's cells per axis (rows, columns).
    pub kernel: [usize; 2],
    /// The cells before the output's own one, per axis.
    pub pad_begin: [usize; 2],
}

/// Pools the `h`×`w` planes of `x` (back to back) into `y` (same length) with `window`.
/// Returns false, having written nothing, unless the CPU has AVX-512F.
pub fn pool_same_f32(
    x: &[f32],
    (h, w): (usize, usize),
    window: SameWindow,
    reduce: Reduce,
    y: &mut [f32],
) -> bool {
    assert_eq!(
        x.len(),
        y.len(),
        "a same pool's output is as large as its input"
    );
    let fits = h * w > 0 && window.kernel[1] <= PAD + 1 && !x.is_empty();
    #[cfg(target_arch = "x86_64")]
    if fits && is_x86_feature_detected!("avx512f") {
        let block = (BLOCK / w).max(1) * w;
        let plan = Plan::new(h, w, window, reduce);
        y.par_chunks_mut(block).enumerate().for_each_init(
            || vec![0.0f32; PAD + block.next_multiple_of(16) + PAD],
            // SAFETY: the CPU has AVX-512F; each chunk starts at a row's first cell.
            |vertical, (b, out)| unsafe { plan.block(x, b * block, out, vertical) },
        );
        return true;
    }
    let _ = (x, y, window, reduce, fits);
    false
}

/// One axis of the window: for each window cell, the offset it adds to the flat index and the
/// range of a cell's position (in its plane for rows, in its row for columns) where that
/// offset stays inside the image.
#[derive(Debug)]
struct Taps {
    /// (flat offset, lowest valid position, one past the highest).
    cells: Vec<(isize, usize, usize)>,
    /// Positions run from 0 to `modulus` (exclusive), then start again in the next plane or row.
    modulus: usize,
    /// The positions where every cell is valid.
    inner: (usize, usize),
    /// `16 % modulus`: how far 16 cells move a position.
    advance: usize,
}

impl Taps {
    /// `kernel` cells, `pad_begin` before the output's own, `step` flat cells apart, over an
    /// axis `extent` cells long (positions count in flat cells: `step` per axis cell).
    fn new(kernel: usize, pad_begin: usize, step: usize, extent: usize) -> Taps {
        let modulus = extent * step;
        let span = modulus as i64;
        let cells: Vec<_> = (0..kernel)
            .map(|d| {
                let shift = (d as i64 - pad_begin as i64) * step as i64;
                let lo = (-shift).clamp(0, span) as usize;
                let hi = (span - shift).clamp(0, span) as usize;
                (shift as isize, lo, hi)
            })
            .collect();
        let inner = cells
            .iter()
            .fold((0, modulus), |(lo, hi), &(_, l, h)| (lo.max(l), hi.min(h)));
        Taps {
            cells,
            modulus,
            inner,
            advance: 16 % modulus,
        }
    }

    /// True when 16 lanes from position `phase` on all lie in one plane (or row) and every
    /// cell is valid for each.
    fn all_valid(&self, phase: usize) -> bool {
        phase >= self.inner.0 && phase + 16 <= self.inner.1
    }

    /// The lanes, from position `phase` on, for which `cell` is valid.
    fn lane_mask(&self, cell: usize, phase: usize) -> u16 {
        let (_, lo, hi) = self.cells[cell];
        let (mut mask, mut lane, mut pos) = (0u32, 0, phase);
        while lane < 16 {
            // Lanes lane.. hold positions pos.. up to the end of this plane (or row).
            let run = (16 - lane).min(self.modulus - pos);
            let (a, b) = (lo.max(pos), hi.min(pos + run));
            if a < b {
                mask |= ((1u32 << (b - pos)) - (1u32 << (a - pos))) << lane;
            }
            lane += run;
            pos = 0;
        }
        mask as u16
    }

    /// The position 16 cells after `phase`.
    #[inline(always)]
    fn step16(&self, phase: usize) -> usize {
        let next = phase + self.advance;
        if next >= self.modulus {
            next - self.modulus
        } else {
            next
        }
    }

    /// For each position of the axis (`step` cells apart), how many of the window's cells
    /// are valid.
    fn valid_counts(&self, step: usize) -> Vec<u32> {
        (0..self.modulus)
            .step_by(step)
            .map(|pos| {
                let valid = |&&(_, lo, hi): &&(isize, usize, usize)| lo <= pos && pos < hi;
                self.cells.iter().filter(valid).count() as u32
            })
            .collect()
    }

    /// [`Taps::lane_mask`] for every phase and cell, `cells.len()` per phase.
    fn mask_table(&self) -> Vec<u16> {
        (0..self.modulus)
            .flat_map(|phase| (0..self.cells.len()).map(move |c| self.lane_mask(c, phase)))
            .collect()
    }
}

/// The geometry shared by every block.
#[derive(Debug)]
struct Plan {
    rows: Taps,
    cols: Taps,
    /// `cols`' lane masks per column phase.
    col_masks: Vec<u16>,
    reduce: Reduce,
    /// `1 / (kernel cells)`, the padding-counting divisor.
    inverse_area: f32,
    /// For an average without the padding's cells, each plane cell's divisor: how many of its
    /// window's cells lie inside the image (else empty).
    counts: Vec<f32>,
}

impl Plan {
    fn new(h: usize, w: usize, window: SameWindow, reduce: Reduce) -> Plan {
        let cols = Taps::new(window.kernel[1], window.pad_begin[1], 1, w);
        let rows = Taps::new(window.kernel[0], window.pad_begin[0], w, h);
        let counts = match reduce {
            Reduce::Average { include_pad: false } => {
                let across = cols.valid_counts(1);
                let down = rows.valid_counts(w);
                down.iter()
                    .flat_map(|d| across.iter().map(move |a| (d * a) as f32))
                    .collect()
            }
            _ => Vec::new(),
        };
        Plan {
            rows,
            counts,
            col_masks: cols.mask_table(),
            cols,
            reduce,
            inverse_area: 1.0 / (window.kernel[0] * window.kernel[1]) as f32,
        }
    }

    /// Pools cells `start..start + out.len()` of the flat planes into `out`, through
    /// `vertical` (`PAD`, `out.len()` rounded up to 16, `PAD` long).
    ///
    /// # Safety
    /// The CPU has AVX-512F; `start` is a multiple of the row length and `out` a whole number
    /// of rows.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn block(&self, x: &[f32], start: usize, out: &mut [f32], vertical: &mut [f32]) {
        let max = self.reduce == Reduce::Max;
        // SAFETY: as this function's.
        unsafe {
            match (self.rows.cells.len(), self.cols.cells.len(), max) {
                (3, 3, true) => self.combine::<3, 3, true>(x, start, out, vertical),
                (3, 3, false) => self.combine::<3, 3, false>(x, start, out, vertical),
                (_, _, true) => self.combine::<0, 0, true>(x, start, out, vertical),
                (_, _, false) => self.combine::<0, 0, false>(x, start, out, vertical),
            }
        }
        match self.reduce {
            Reduce::Max => {}
            Reduce::Average { include_pad: true } => {
                out.iter_mut().for_each(|s| *s *= self.inverse_area);
            }
            Reduce::Average { include_pad: false } => self.divide_by_counts(start, out),
        }
    }

    /// Combines (the largest, or the sum: `MAX`) each window's cells into `out`, through
    /// `vertical`: [`Plan::block`] without the divisor. `KH`×`KW` is the window's size when
    /// known at compile time (the loops over its cells unroll), 0×0 otherwise.
    ///
    /// # Safety
    /// As [`Plan::block`]'s.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn combine<const KH: usize, const KW: usize, const MAX: bool>(
        &self,
        x: &[f32],
        start: usize,
        out: &mut [f32],
        vertical: &mut [f32],
    ) {
        use std::arch::x86_64::*;
        let n = out.len();
        let rows = &self.rows.cells[..if KH == 0 { self.rows.cells.len() } else { KH }];
        let cols = &self.cols.cells[..if KW == 0 { self.cols.cells.len() } else { KW }];
        let identity = _mm512_set1_ps(if MAX { f32::NEG_INFINITY } else { 0.0 });
        let combine = |v: __m512, acc: __m512| {
            if MAX {
                // Keeps `acc` where `v` is NaN.
                _mm512_max_ps(v, acc)
            } else {
                _mm512_add_ps(v, acc)
            }
        };
        let live = |i: usize| -> __mmask16 { if n - i >= 16 { !0 } else { (1 << (n - i)) - 1 } };
        let hw = self.rows.modulus;

        let store = |out: &mut [f32], i: usize, acc: __m512| {
            if live(i) == !0 {
                // SAFETY: cells i..i + 16 lie in `out`.
                unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(i), acc) };
            } else {
                // SAFETY: cells i.. under `live` lie in `out`.
                unsafe { _mm512_mask_storeu_ps(out.as_mut_ptr().add(i), live(i), acc) };
            }
        };
        // Across the columns in registers when the window is 3 wide and centred: a vector's
        // left and right neighbours are its column results shifted by one lane, the lane
        // shifted in taken from the vector before or after (a block's first and last cells
        // end rows: masked anyway). On googlenet's 3×3 pools (`examples/pool_rate.rs`) this
        // took 21–25 % less time than a second pass through `vertical`, whose unaligned loads
        // split cache lines.
        let in_registers = cols.iter().map(|c| c.0).eq([-1, 0, 1]);
        let bits = _mm512_castps_si512;
        // Lane j: `here`'s lane j − 1 (lane 0: `before`'s lane 15), or lane j + 1.
        let left =
            |here, before| _mm512_castsi512_ps(_mm512_alignr_epi32::<15>(bits(here), bits(before)));
        let right =
            |after, here| _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(bits(after), bits(here)));
        let (mut before, mut here, mut col) = (identity, identity, 0);

        // Down the rows: the column of cells above and below each cell that lie in its plane,
        // one vector ahead of the results across when those are in registers.
        let mut phase = start % hw;
        for i in (0..n + 16).step_by(16) {
            let mut acc = identity;
            if i < n {
                let live = live(i);
                let at = x.as_ptr().wrapping_add(start + i);
                if live == !0 && self.rows.all_valid(phase) {
                    for &(shift, _, _) in rows {
                        // SAFETY: every lane's cell lies in its plane, in `x`.
                        acc = combine(unsafe { _mm512_loadu_ps(at.offset(shift)) }, acc);
                    }
                } else {
                    for (c, &(shift, _, _)) in rows.iter().enumerate() {
                        let mask = live & self.rows.lane_mask(c, phase);
                        // SAFETY: lanes under `mask` lie in their plane, in `x`; the others
                        // are not read (the pointer may lie outside `x` only for them).
                        let v = unsafe {
                            _mm512_mask_loadu_ps(identity, mask, at.wrapping_offset(shift))
                        };
                        acc = combine(v, acc);
                    }
                }
                phase = self.rows.step16(phase);
            }
            if !in_registers {
                if i < n {
                    // SAFETY: `vertical` holds `PAD`, `n` rounded up to 16, `PAD`.
                    unsafe { _mm512_storeu_ps(vertical.as_mut_ptr().add(PAD + i), acc) };
                }
                continue;
            }
            if i > 0 {
                let done = i - 16;
                let masks = &self.col_masks[col * 3..][..3];
                let cells = [left(here, before), here, right(acc, here)];
                let mut sum = identity;
                for (v, &mask) in cells.into_iter().zip(masks) {
                    sum = combine(_mm512_mask_blend_ps(mask, identity, v), sum);
                }
                store(out, done, sum);
                col = self.cols.step16(col);
            }
            (before, here) = (here, acc);
        }
        if in_registers {
            return;
        }

        // Across the columns.
        let mut col = 0;
        for i in (0..n).step_by(16) {
            let masks = &self.col_masks[col * cols.len()..][..cols.len()];
            let at = vertical.as_ptr().wrapping_add(PAD + i);
            let mut acc = identity;
            for (&(shift, _, _), &mask) in cols.iter().zip(masks) {
                // SAFETY: `|shift| < PAD`: the 16 cells lie in `vertical`; lanes outside `mask`
                // (outside their row) are blended away.
                let v = unsafe { _mm512_loadu_ps(at.wrapping_offset(shift)) };
                acc = combine(_mm512_mask_blend_ps(mask, identity, v), acc);
            }
            store(out, i, acc);
            col = self.cols.step16(col);
        }
    }

    /// Divides each window's sum in `out` (cells `start..`) by the number of its cells inside
    /// the image, a plane's stretch at a time (the compiler vectorizes the division).
    fn divide_by_counts(&self, start: usize, out: &mut [f32]) {
        let hw = self.counts.len();
        let (mut phase, mut rest) = (start % hw, out);
        while !rest.is_empty() {
            let run = rest.len().min(hw - phase);
            let (here, after) = rest.split_at_mut(run);
            for (s, d) in here.iter_mut().zip(&self.counts[phase..]) {
                *s /= d;
            }
            (phase, rest) = (0, after);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window's result at every cell, computed cell by cell.
    fn reference(
        x: &[f32],
        (h, w): (usize, usize),
        window: SameWindow,
        reduce: Reduce,
    ) -> Vec<f32> {
        let mut y = vec![0.0; x.len()];
        let [kh, kw] = window.kernel;
        let [top, left] = window.pad_begin;
        for (p, plane) in x.chunks(h * w).enumerate() {
            for r in 0..h {
                for c in 0..w {
                    let mut best = f32::NEG_INFINITY;
                    let (mut sum, mut count) = (0.0f32, 0);
                    for dy in 0..kh {
                        for dx in 0..kw {
                            let (rr, cc) = (r + dy, c + dx);
                            if rr < top || cc < left || rr - top >= h || cc - left >= w {
                                continue;
                            }
                            let v = plane[(rr - top) * w + cc - left];
                            if v > best {
                                best = v;
                            }
                            sum += v;
                            count += 1;
                        }
                    }
                    y[p * h * w + r * w + c] = match reduce {
                        Reduce::Max => best,
                        Reduce::Average { include_pad: true } => sum / (kh * kw) as f32,
                        Reduce::Average { include_pad: false } => sum / count as f32,
                    };
                }
            }
        }
        y
    }

    #[test]
    fn every_cell_matches_the_window_computed_cell_by_cell() {
        if !is_x86_feature_detected!("avx512f") {
            crate::testing::skipped("no AVX-512F: the same-pool path is never taken here");
            return;
        }
        // (planes, h, w, kernel, pad_begin): planes smaller than a vector and than the
        // window, rows longer than a block, blocks ending mid-plane, asymmetric windows.
        type Case = (usize, usize, usize, [usize; 2], [usize; 2]);
        let cases: &[Case] = &[
            (832, 7, 7, [3, 3], [1, 1]),
            (5, 14, 14, [3, 3], [1, 1]),
            (3, 1, 1, [3, 3], [1, 1]),
            (7, 2, 3, [3, 3], [1, 1]),
            (4, 5, 9, [5, 5], [2, 2]),
            (2, 6, 7, [4, 4], [1, 2]),
            (3, 9, 20, [3, 3], [0, 2]),
            (2, 4, 33, [1, 3], [0, 1]),
            (2, 40, 100, [3, 3], [1, 1]),
            (1, 3, 2100, [3, 3], [1, 1]),
            (9, 8, 8, [1, 1], [0, 0]),
            (6, 5, 5, [2, 2], [1, 0]),
        ];
        for &(planes, h, w, kernel, pad_begin) in cases {
            let window = SameWindow { kernel, pad_begin };
            let len = planes * h * w;
            let mut x: Vec<f32> = (0..len)
                .map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 97.0)
                .collect();
            x[len / 3] = f32::NAN;
            for reduce in [
                Reduce::Max,
                Reduce::Average { include_pad: true },
                Reduce::Average { include_pad: false },
            ] {
                let mut y = vec![f32::MAX; len];
                assert!(pool_same_f32(&x, (h, w), window, reduce, &mut y));
                let want = reference(&x, (h, w), window, reduce);
                for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                    let close = a == b
                        || (a.is_nan() && b.is_nan())
                        || (a - b).abs() <= 1e-5 * b.abs().max(1.0);
                    assert!(
                        close,
                        "{planes}x{h}x{w} {kernel:?} {pad_begin:?} {reduce:?}: cell {i} {a} vs {b}"
                    );
                }
            }
        }
    }
}
