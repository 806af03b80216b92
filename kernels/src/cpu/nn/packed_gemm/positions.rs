//! Convolutions as position tiles: the product transposed, `Cᵀ = im2colᵀ · Aᵀ`, so that a
//! micro-tile is a few output positions (broadcast, read in place from the padded image) ×
//! two vectors of output channels (the weights, packed transposed once): on AVX-512, 7 or 8
//! positions × 32 channels, on AVX2 6 positions × 16 channels (a last panel half as wide).
//!
//! The other paths tile output *columns* 32 at a time (16 on AVX2): on AVX-512 a 7×7 output
//! (49 positions) fills two tiles, 64 columns, and an in-place read of a padded image also
//! computes the padding's columns (a 3×3 on 14² computes 16 columns per row of 14). Here a tile's positions are any
//! real outputs — each broadcast has its own address — so only the last tile of the image
//! and the last panel of channels are partly empty. Each tile is transposed in registers on
//! its way to the channel-major output, which costs more than a column tile's plain stores:
//! [`pays`] weighs both.

use std::mem::MaybeUninit;
use std::sync::OnceLock;

use rayon::prelude::*;

use super::blocked_image;
use super::direct::{self, PaddedImage};
use super::position_tile::{self, AVX2_HEIGHT, POSITIONS, TileFinish};
use super::source::Image2d;
use super::{Isa, KC, PackedA, TASKS_PER_THREAD, split};
use crate::cpu::aligned::AlignedFloats;
use crate::cpu::nn::epilogue::Epilogue;
use crate::cpu::nn::matrix::SendPtr;

/// Output channels per full panel of the transposed weights: two vectors.
fn full_panel(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 32,
        Isa::Avx2 => 16,
    }
}

/// Floats of `C` a task finishes at a time (a group of position tiles × a block of the task's
/// channels), about a quarter of L2: the block's outputs stay in cache across depth blocks and
/// for the epilogue.
const GROUP_FLOATS: usize = 64 * 1024;
/// The fewest positions in a group of position tiles (fewer when the task has fewer).
const GROUP_POSITIONS: usize = 512;

/// The weights `A` (`m × k`) transposed into panels for [`position_tile::position_tile`]: for each `KC`
/// block of depth, full panels of channels ([`full_panel`]; the last one half as wide when
/// that suffices), `kc` rows of the panel's width each.
#[derive(Debug, Clone, Default)]
pub(super) struct TransposedA(OnceLock<AlignedFloats>);

/// Derived from the weights; two packings of the same weights are equal whatever was cached.
impl PartialEq for TransposedA {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// The width of channel panel `jp` of `m` channels in panels of `full`: `full`, or half of it
/// for a last panel that half holds.
fn panel_width(full: usize, m: usize, jp: usize) -> usize {
    let rest = m - jp * full;
    if rest <= full / 2 { full / 2 } else { full }
}

/// Channels of `m` once padded to whole panels of `full`.
fn padded_channels(full: usize, m: usize) -> usize {
    (0..m.div_ceil(full))
        .map(|jp| panel_width(full, m, jp))
        .sum()
}

/// What writing one column tile costs, in depth steps of its multiply-adds (each tile is
/// written once per depth block): its rows are stored as they are.
const COLUMN_WRITE: usize = 2;
/// What writing one position tile costs, likewise: it is transposed first (4 blocks of 24
/// shuffles for 8 × 32). Fitted on squeezenet's `k` = 16 and 27 convolutions, which position
/// tiles made up to 40 % slower, and googlenet's (`k` ≥ 64), which they made faster.
const POSITION_WRITE: usize = 8;
/// Position tiles are taken only when predicted this much cheaper (in percent of the column
/// tiles' cost): the column paths are the better tuned, and near-ties measured as losses.
const MARGIN_PERCENT: usize = 97;
/// What the in-place column path's multiply-adds cost (in percent of a position tile's) when
/// the window is wider than one column: its rows of `B` then start at shifted columns, and
/// most of its 64-byte loads straddle two cache lines (the position tiles broadcast single
/// values and load aligned weights). On 3×3 and 5×5 convolutions of 16 to 192 channels
/// (1 thread, Zen 5) the column path ran at 212–232 GFLOP/s where position tiles ran at
/// 218–244 (`benches/results/cpu-position-choice-2026-11-27.md`).
const SHIFTED_ROWS_PERCENT: usize = 106;

/// True when position tiles cost clearly less for `im` times an `m × k` matrix than the column
/// tiles of the path [`PackedA::multiply`] would otherwise take: the multiply-adds each
/// computes (empty lanes included; for the packed path, what packing costs too) plus its tile
/// writes.
pub(super) fn pays(isa: Isa, im: &Image2d<'_>, m: usize, k: usize) -> bool {
    let (mr, nr) = isa.tile();
    let [oh, ow] = im.out;
    let height = tile_height(isa, oh * ow);
    let writes = |per_block: usize| k + k.div_ceil(KC) * per_block;
    let channels = padded_channels(full_panel(isa), m);
    let ours = channels * (oh * ow).div_ceil(height) * height * writes(POSITION_WRITE);
    let columns = if direct::applies(im, m) {
        let width = direct::padded_width(im);
        let rows = (super::NC / width).max(1);
        let computed = (0..oh)
            .step_by(rows)
            .map(|y0| ((oh.min(y0 + rows) - y0 - 1) * width + ow).div_ceil(nr) * nr)
            .sum::<usize>();
        if im.kernel[1] > 1 {
            computed * SHIFTED_ROWS_PERCENT / 100
        } else {
            computed
        }
    } else {
        (oh * ow).div_ceil(nr) * nr * (m + direct::PACKING_WEIGHT) / m.max(1)
    };
    100 * ours < MARGIN_PERCENT * m.div_ceil(mr) * mr * columns * writes(COLUMN_WRITE)
}

/// Positions per tile for `count` outputs. AVX2: 6 (twelve accumulators). AVX-512: 7 where
/// that leaves clearly fewer lanes empty than 8 (a 7×7 output is seven tiles of 7, against 49
/// of 56 lanes in tiles of 8), else 8.
fn tile_height(isa: Isa, count: usize) -> usize {
    let lanes = |height: usize| count.div_ceil(height) * height;
    if isa == Isa::Avx2 {
        AVX2_HEIGHT
    } else if 100 * lanes(7) < 97 * lanes(8) {
        7
    } else {
        POSITIONS
    }
}

impl PackedA {
    /// The transposed panels, packed on first use.
    fn transposed(&self) -> &[f32] {
        let panels = self.transposed.0.get_or_init(|| {
            let (m, k) = (self.m, self.k);
            let (mr, _) = self.isa.tile();
            let full = full_panel(self.isa);
            let mut out = Vec::with_capacity(padded_channels(full, m) * k);
            for pc in (0..k).step_by(KC) {
                let kc = KC.min(k - pc);
                for jp in 0..m.div_ceil(full) {
                    let width = panel_width(full, m, jp);
                    for p in 0..kc {
                        out.extend((0..width).map(|j| {
                            let row = jp * full + j;
                            if row < m {
                                self.panel(pc, kc, row / mr)[p * mr + row % mr]
                            } else {
                                0.0
                            }
                        }));
                    }
                }
            }
            AlignedFloats::from_slice(&out)
        });
        panels.as_slice()
    }

    /// `c = self · im2col(im) (+ bias)` in position tiles; the rest as [`PackedA::multiply`].
    pub(super) fn multiply_positions(
        &self,
        im: &Image2d<'_>,
        c: &mut [f32],
        ldc: usize,
        bias: Option<&[f32]>,
        epilogue: Option<&Epilogue<'_, f32>>,
    ) {
        let channels = self.k / (im.kernel[0] * im.kernel[1]);
        let c = SendPtr(c.as_mut_ptr());
        with_planar_operand(im, channels, |operand| {
            self.run_positions(operand, c, Output::Rows(ldc), bias, epilogue)
        })
    }

    /// `c = self · im2col(input) (+ bias)`, then `epilogue`, from an image in channel planes or
    /// in blocks of 16 channels ([`BlockedInput`]), with `c` in such blocks (NCHW16c:
    /// `[m / 16][positions][16]`) when `blocked_output`, else in channel rows. Needs AVX-512,
    /// and `m` a multiple of 16 for a blocked output.
    ///
    /// `c` may start uninitialized: every element is written before any is read.
    ///
    /// # Panics
    /// If the packing is not for AVX-512, a blocked output's `m` is not a multiple of 16, or an
    /// operand is too short (internal contracts: the blocked convolution checks them first).
    pub fn multiply_blocked(
        &self,
        input: &BlockedInput<'_>,
        c: &mut [MaybeUninit<f32>],
        blocked_output: bool,
        bias: Option<&[f32]>,
        epilogue: Option<&Epilogue<'_, f32>>,
    ) {
        assert!(
            self.isa == Isa::Avx512 && (!blocked_output || self.m.is_multiple_of(16)),
            "multiply_blocked: AVX-512 and whole blocks of channels"
        );
        let im = &input.image;
        let count = im.out[0] * im.out[1];
        assert!(c.len() >= self.m * count, "multiply_blocked: C too short");
        assert!(
            epilogue
                .and_then(|e| e.add)
                .is_none_or(|z| z.len() >= c.len()),
            "multiply_blocked: epilogue input too short"
        );
        if count == 0 {
            return;
        }
        let channels = self.k / (im.kernel[0] * im.kernel[1]);
        // Only written through (and read after writing), never viewed as floats before.
        let c = SendPtr(c.as_mut_ptr().cast::<f32>());
        let output = match blocked_output {
            true => Output::Blocks,
            false => Output::Rows(count),
        };
        if input.blocked {
            return blocked_image::with_blocked_image(im, channels, |img| {
                let operand = Operand {
                    data: img.data,
                    offsets: &img.offsets,
                    starts: &img.starts,
                };
                self.run_positions(&operand, c, output, bias, epilogue)
            });
        }
        with_planar_operand(im, channels, |operand| {
            self.run_positions(operand, c, output, bias, epilogue)
        })
    }

    /// `y = x · selfᵀ` for the row-major `tokens × k` matrix `x`: `y[t][j] = Σ_p x[t][p] ·
    /// self[j][p]`, row-major `tokens × m` (a transformer's projection, `self` the weights
    /// transposed), in position tiles that store each token's outputs as they are, so that
    /// neither operand nor the result is transposed. Needs [`PackedA::takes_token_major`].
    ///
    /// `y` may start uninitialized: every element is written.
    ///
    /// # Panics
    /// If the packing does not take it, or `x` or `y` is too short.
    pub fn multiply_token_major(
        &self,
        x: &[f32],
        tokens: usize,
        y: &mut [MaybeUninit<f32>],
        bias: Option<&[f32]>,
    ) {
        assert!(
            self.takes_token_major(),
            "multiply_token_major: AVX-512 and whole vectors"
        );
        let (m, k) = (self.m, self.k);
        assert!(
            x.len() >= tokens * k && y.len() >= tokens * m && bias.is_none_or(|b| b.len() >= m),
            "multiply_token_major: operands too short"
        );
        if tokens == 0 {
            return;
        }
        let offsets: Vec<usize> = (0..k).collect();
        let starts: Vec<usize> = (0..tokens).map(|t| t * k).collect();
        let operand = Operand {
            data: x,
            offsets: &offsets,
            starts: &starts,
        };
        let c = SendPtr(y.as_mut_ptr().cast::<f32>());
        self.run_positions(&operand, c, Output::Positions(m), bias, None);
    }

    /// Whether [`PackedA::multiply_token_major`] takes this packing: AVX-512, and rows (the
    /// product's output features) in whole vectors of 16.
    pub fn takes_token_major(&self) -> bool {
        self.isa == Isa::Avx512 && self.m.is_multiple_of(16)
    }

    /// The product in position tiles over `operand`, written as `output` says.
    /// `c` is valid for the whole product in `output`'s layout; each element is written before
    /// it is read.
    fn run_positions(
        &self,
        operand: &Operand<'_>,
        c: SendPtr<f32>,
        output: Output,
        bias: Option<&[f32]>,
        epilogue: Option<&Epilogue<'_, f32>>,
    ) {
        let weights = self.transposed();
        let (m, full) = (self.m, full_panel(self.isa));
        let mut padded_bias = vec![0.0f32; m.div_ceil(full) * full];
        if let Some(b) = bias {
            padded_bias[..m].copy_from_slice(&b[..m]);
        }
        let bias = bias.map(|_| &padded_bias[..]);
        let starts = operand.starts;
        let count = starts.len();
        // Each tile's positions as offsets from the image's start, 8 entries per tile; the
        // empty lanes repeat the last position (read, never written).
        let height = tile_height(self.isa, count);
        let tiles = count.div_ceil(height);
        let pos: Vec<usize> = (0..tiles * POSITIONS)
            .map(|e| {
                let lane = (e % POSITIONS).min(height - 1);
                starts[(e / POSITIONS * height + lane).min(count - 1)]
            })
            .collect();
        let task = Task {
            a: self,
            full,
            weights,
            data: operand.data,
            offsets: operand.offsets,
            pos: &pos,
            height,
            count,
            bias,
            epilogue,
            c,
            output,
        };
        let panels = m.div_ceil(full);
        let threads = super::threads();
        if m * self.k * count < super::PARALLEL_WORK || threads < 2 {
            task.run((0, panels), (0, tiles));
            return;
        }
        // Tasks take equal shares of the channel panels × position tiles, numbered panel
        // by panel: each task streams its share of the weights once, and the image once
        // per panel, as every cut does. Tiles first (each task streaming all the weights)
        // made inception_v3's 17×17 1×1 convolutions 5–10 % slower even where the image
        // is the larger operand, and whole panels or tiles per task left one of 2 threads
        // up to 4/7 of a 7×7 image's work (googlenet 0.97×, inception_v3 0.99×, 2 threads).
        split(panels * tiles, TASKS_PER_THREAD * threads).for_each(|range| {
            for (p, t) in rectangles(range, tiles).into_iter().flatten() {
                task.run(p, t);
            }
        });
    }
}

/// Runs `f` on `im` (`channels` planes) as the operand of position tiles: its padded phase
/// planes ([`direct::with_padded_image`]) and each output's window start in them, row by row
/// (a division per entry cost more than the table's use on googlenet's small products).
fn with_planar_operand<R>(
    im: &Image2d<'_>,
    channels: usize,
    f: impl FnOnce(&Operand<'_>) -> R,
) -> R {
    direct::with_padded_image(im, channels, 0, |img: &PaddedImage<'_>| {
        let [oh, ow] = img.out;
        let mut starts = Vec::with_capacity(oh * ow);
        for y in 0..oh {
            starts.extend(y * img.width..y * img.width + ow);
        }
        f(&Operand {
            data: img.data,
            offsets: &img.offsets,
            starts: &starts,
        })
    })
}

/// The image operand of a product in position tiles: `img[offsets[p] + starts[q]]` is depth
/// row `p` of output position `q`'s window.
struct Operand<'a> {
    data: &'a [f32],
    offsets: &'a [usize],
    starts: &'a [usize],
}

/// How a product in position tiles lays out `C`.
#[derive(Debug, Clone, Copy)]
enum Output {
    /// Channel rows at this stride, positions contiguous.
    Rows(usize),
    /// Blocks of 16 channels, each `[positions][16]`, back to back (NCHW16c).
    Blocks,
    /// Each position's channels contiguous, positions at this stride (tokens × features).
    Positions(usize),
}

/// The image of a blocked product: `image.img` holds channel planes (`blocked` false) or
/// blocks of 16 channels (`[channels / 16][height][width][16]`), with `image`'s geometry.
#[derive(Debug, Clone, Copy)]
pub struct BlockedInput<'a> {
    /// The image and its window geometry.
    pub image: Image2d<'a>,
    /// True when `image.img` is in 16-channel blocks.
    pub blocked: bool,
}

/// The units `u0..u1` of a grid `inner` units wide, numbered row by row, as at most three
/// rectangles of (rows, columns): a tail of the first row, whole rows, a head of the last.
fn rectangles((u0, u1): (usize, usize), inner: usize) -> [Option<Rectangle>; 3] {
    let (first, from) = (u0 / inner, u0 % inner);
    let (last, to) = (u1 / inner, u1 % inner);
    if first == last {
        return [
            (from < to).then_some(((first, first + 1), (from, to))),
            None,
            None,
        ];
    }
    let whole = first + usize::from(from > 0);
    [
        (from > 0).then_some(((first, first + 1), (from, inner))),
        (whole < last).then_some(((whole, last), (0, inner))),
        (to > 0).then_some(((last, last + 1), (0, to))),
    ]
}

/// Rows × columns of a grid, each as a range `(start, end)`.
type Rectangle = ((usize, usize), (usize, usize));

/// One product in position tiles, ready to run over rectangles of channel panels × tiles.
struct Task<'a> {
    a: &'a PackedA,
    /// Channels per full weight panel.
    full: usize,
    weights: &'a [f32],
    data: &'a [f32],
    offsets: &'a [usize],
    /// Positions per tile (7 or 8), `count` in all.
    height: usize,
    pos: &'a [usize],
    count: usize,
    bias: Option<&'a [f32]>,
    epilogue: Option<&'a Epilogue<'a, f32>>,
    c: SendPtr<f32>,
    output: Output,
}

impl Task<'_> {
    /// Channel panels `panels.0..panels.1` × position tiles `tiles.0..tiles.1` of `C`.
    fn run(&self, panels: (usize, usize), tiles: (usize, usize)) {
        let (m, k, full) = (self.a.m, self.a.k, self.full);
        let padded = padded_channels(full, m);
        let ch = (panels.0 * full, (panels.1 * full).min(m));
        // Groups of at least GROUP_POSITIONS positions, their channels in blocks that keep a
        // block's outputs within GROUP_FLOATS: each weight panel, streamed once per group,
        // then serves many tiles (with all 1024 channels of ssd300's dilated convolution in
        // one block, a group held 64 positions and the 19 MB of weights streamed 6 times).
        let per_group = (GROUP_FLOATS / ((ch.1 - ch.0) * self.height))
            .max(GROUP_POSITIONS / self.height)
            .min(tiles.1 - tiles.0)
            .max(1);
        let panels_per_block = (GROUP_FLOATS / (per_group * self.height * full)).max(1);
        // The clamp epilogues finish in the tiles' registers; the others in a pass per group.
        let in_tiles = self
            .epilogue
            .and_then(|e| Some((e.activation.clamp_bounds()?, e.add)));
        let mut pos = [0usize; POSITIONS];
        for g0 in (tiles.0..tiles.1).step_by(per_group) {
            let g1 = (g0 + per_group).min(tiles.1);
            for b0 in (panels.0..panels.1).step_by(panels_per_block) {
                let b1 = (b0 + panels_per_block).min(panels.1);
                for pc in (0..k).step_by(KC) {
                    let kc = KC.min(k - pc);
                    let block = &self.weights[pc * padded..];
                    for jp in b0..b1 {
                        let width = panel_width(full, m, jp);
                        let panel = &block[jp * kc * full..][..kc * width];
                        let bias = self.bias.filter(|_| pc == 0).map(|b| &b[jp * full..]);
                        let next = match jp + 1 < b1 {
                            true => {
                                &block[(jp + 1) * kc * full..][..kc * panel_width(full, m, jp + 1)]
                            }
                            false => &[],
                        };
                        let share = next.len().div_ceil(g1 - g0).next_multiple_of(16);
                        for t in g0..g1 {
                            let from = ((t - g0) * share).min(next.len());
                            super::micro::prefetch_lines(
                                &next[from..(from + share).min(next.len())],
                            );
                            pos.copy_from_slice(&self.pos[t * POSITIONS..(t + 1) * POSITIONS]);
                            let live = (
                                width.min(m - jp * full),
                                self.height.min(self.count - t * self.height),
                            );
                            let at = self.tile_at(jp, t);
                            let finish = in_tiles.filter(|_| pc + kc == k).map(|((lo, hi), z)| {
                                TileFinish {
                                    // In bounds: `multiply` checked that Z covers C.
                                    z: z.map_or(std::ptr::null(), |z| z[at..].as_ptr()),
                                    lo,
                                    hi,
                                }
                            });
                            // SAFETY: this tile's channels × positions of C are this task's.
                            unsafe {
                                let c = self.c.get().add(at);
                                self.tile(panel, (pc, kc), &pos, c, live, bias, finish)
                            };
                        }
                    }
                }
                if let Some(e) = self.epilogue.filter(|_| in_tiles.is_none()) {
                    let cols = (g0 * self.height, (g1 * self.height).min(self.count));
                    let channels = (b0 * full, (b1 * full).min(m));
                    // Channel rows, or blocks of 16 channels (a block's positions are
                    // contiguous too).
                    // Runs of `len` contiguous outputs: `at(i)` for `i` in `runs`.
                    let (runs, at, len): (_, &dyn Fn(usize) -> usize, _) = match self.output {
                        Output::Rows(ldc) => (
                            (channels.0, channels.1),
                            &move |i| i * ldc + cols.0,
                            cols.1 - cols.0,
                        ),
                        Output::Blocks => (
                            (channels.0 / 16, channels.1 / 16),
                            &|i| i * 16 * self.count + cols.0 * 16,
                            (cols.1 - cols.0) * 16,
                        ),
                        Output::Positions(ld) => (
                            (cols.0, cols.1),
                            &move |q| q * ld + channels.0,
                            channels.1 - channels.0,
                        ),
                    };
                    for i in runs.0..runs.1 {
                        let at = at(i);
                        // SAFETY: a run of this group's outputs: this task's rectangle.
                        let row =
                            unsafe { std::slice::from_raw_parts_mut(self.c.get().add(at), len) };
                        e.finish(row, at);
                    }
                }
            }
        }
    }

    /// Where tile `t` of channel panel `jp` starts in `C`.
    fn tile_at(&self, jp: usize, t: usize) -> usize {
        match self.output {
            Output::Rows(ldc) => jp * self.full * ldc + t * self.height,
            Output::Blocks => jp * self.full * self.count + t * self.height * 16,
            Output::Positions(ld) => t * self.height * ld + jp * self.full,
        }
    }

    /// One position tile against the weights `panel` (`kc` rows of a full or half panel's
    /// channels) of the
    /// depth block `(pc, kc)`, written to `c` (`live` channels × positions).
    ///
    /// # Safety
    /// `c` is valid for the `live` channels (rows at stride `ldc`) × positions, and no other
    /// thread touches them; so is `finish.z`, when given and not null.
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile(
        &self,
        panel: &[f32],
        (pc, kc): (usize, usize),
        pos: &[usize; POSITIONS],
        c: *mut f32,
        live: (usize, usize),
        bias: Option<&[f32]>,
        finish: Option<TileFinish>,
    ) {
        let (w, data) = (panel.as_ptr(), self.data.as_ptr());
        let (strides, blocked) = match self.output {
            Output::Rows(ldc) => ((ldc, 1), false),
            Output::Blocks => ((16 * self.count, 16), true),
            Output::Positions(ld) => ((16, ld), true),
        };
        let offsets = self.offsets[pc..pc + kc].as_ptr();
        let wide = panel.len() == kc * self.full;
        let kernel = position_tile::kernel_for(self.a.isa, wide, self.height, blocked);
        // SAFETY: the panel holds kc rows of its width and the table kc offsets; every
        // position of the tile is a real output's window start, so img + offsets[p] + pos[i]
        // lies inside the padded image; `c` holds the live channels × positions (the caller's
        // rectangle); the kernel's instruction set is the packing's, which the CPU has.
        unsafe {
            kernel(
                kc,
                w,
                data,
                offsets,
                pos,
                c,
                strides,
                live,
                pc > 0,
                bias,
                finish,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::rectangles;

    #[test]
    fn tasks_rectangles_cover_every_unit_once() {
        for (outer, inner) in [(1, 1), (5, 7), (7, 5), (9, 28), (3, 1), (1, 9)] {
            let units = outer * inner;
            for tasks in 1..=units.min(12) {
                let mut seen = vec![0u32; units];
                for i in 0..tasks {
                    let range = (i * units / tasks, (i + 1) * units / tasks);
                    let mut count = 0;
                    for ((o0, o1), (i0, i1)) in rectangles(range, inner).into_iter().flatten() {
                        assert!(o0 < o1 && o1 <= outer && i0 < i1 && i1 <= inner);
                        for o in o0..o1 {
                            for n in i0..i1 {
                                seen[o * inner + n] += 1;
                                count += 1;
                            }
                        }
                    }
                    assert_eq!(
                        count,
                        range.1 - range.0,
                        "{outer}x{inner}, task {i} of {tasks}"
                    );
                }
                assert!(
                    seen.iter().all(|&s| s == 1),
                    "{outer}x{inner} in {tasks} tasks"
                );
            }
        }
    }
}
