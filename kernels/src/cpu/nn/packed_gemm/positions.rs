//! Convolutions as position tiles: the product transposed, `Cᵀ = im2colᵀ · Aᵀ`, so that a
//! micro-tile is a few output positions (broadcast, read in place from the padded image) ×
//! a few vectors of output channels (the weights, packed transposed once): on AVX-512, 6
//! positions × 64 channels, or 7 or 8 positions × 32 or 48 channels, on AVX2 6 positions × 16
//! channels (a last panel as many vectors as it needs; see [`Panels`]).
//!
//! The other paths tile output *columns* 32 at a time (16 on AVX2): on AVX-512 a 7×7 output
//! (49 positions) fills two tiles, 64 columns, and an in-place read of a padded image also
//! computes the padding's columns (a 3×3 on 14² computes 16 columns per row of 14). Here a
//! tile's positions are any real outputs — each broadcast has its own address — so only the
//! last tile of the image and the last panel of channels are partly empty. Each tile is
//! transposed in registers on its way to the channel-major output, which costs more than a
//! column tile's plain stores: [`pays`] weighs both. The tile loop is in `position_task`.

use rayon::prelude::*;
use std::mem::MaybeUninit;

use super::blocked_image;
use super::direct::{self, PaddedImage};
use super::panels::Panels;
use super::position_task::{Output, Task, rectangles, shares};
use super::position_tile::POSITIONS;
use super::source::Image2d;
use super::{Isa, KC, PackedA};
use crate::cpu::nn::blocked::BLOCK;
use crate::cpu::nn::epilogue::Epilogue;
use crate::cpu::nn::matrix::SendPtr;

/// Tasks per thread of a parallel product in position tiles. Each task's first weight panel
/// comes from memory unprefetched (in a model the weights outgrow the caches): against 2
/// tasks, one made NASNet's 672 × 672 convolution at 11² with its weights from memory
/// (`conv_rate`, `COLD=1 WARM_INPUT=1`, 2 threads) 258–275 µs against 284–300, and the
/// per-node traces of googlenet, inception_v3 and NASNet 0.971×, 0.988× and 0.990×
/// (resnet50 and SSDlite the same).
const POSITION_TASKS_PER_THREAD: usize = 1;
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
pub(super) fn pays(isa: Isa, four: bool, im: &Image2d<'_>, m: usize, k: usize) -> bool {
    let (mr, nr) = isa.tile();
    let [oh, ow] = im.out;
    let writes = |per_block: usize| k + k.div_ceil(KC) * per_block;
    let panels = Panels::for_product(isa, four, (false, false), m, k);
    let (channels, height) = (panels.padded(m), panels.height(isa, oh * ow));
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

impl PackedA {
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
    /// `[⌈m / 16⌉][positions][16]`) when `blocked_output`, else in channel rows. The last block of a blocked input or output may be partly filled: the input's
    /// lanes past its `k / window` channels are never read, and the output's past `m` are
    /// written as the product of zero weights (the bias is zero there).
    ///
    /// `c` may start uninitialized: every element is written before any is read.
    ///
    /// # Panics
    /// If an operand is too short (an internal contract: the blocked convolution checks them
    /// first).
    pub fn multiply_blocked(
        &self,
        input: &BlockedInput<'_>,
        c: &mut [MaybeUninit<f32>],
        blocked_output: bool,
        bias: Option<&[f32]>,
        epilogue: Option<&Epilogue<'_, f32>>,
    ) {
        let im = &input.image;
        let count = im.out[0] * im.out[1];
        let stored = match blocked_output {
            true => crate::cpu::nn::blocked::stored_channels(self.m),
            false => self.m,
        };
        assert!(c.len() >= stored * count, "multiply_blocked: C too short");
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
            let taps = im.kernel[0] * im.kernel[1];
            let by_taps = taps > 1 && channels.is_multiple_of(BLOCK);
            return blocked_image::with_blocked_image(im, channels, by_taps, |img| {
                let operand = Operand {
                    data: img.data,
                    offsets: &img.offsets,
                    starts: &img.starts,
                    count: img.cells.unwrap_or(img.starts.len()),
                    prefetch: prefetches(self.isa, im, self.k),
                    cells: img.cells.is_some(),
                    grouped: taps == 1 || by_taps,
                    by_taps: by_taps.then_some(taps),
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
            "multiply_token_major: whole blocks of 16 features"
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
            count: tokens,
            prefetch: false,
            cells: false,
            // A token's features are consecutive floats: the tiles run as strips.
            grouped: true,
            by_taps: None,
        };
        let c = SendPtr(y.as_mut_ptr().cast::<f32>());
        self.run_positions(&operand, c, Output::Positions(m), bias, None);
    }

    /// Whether [`PackedA::multiply_token_major`] takes this packing: rows (the product's
    /// output features) in whole blocks of 16 (one AVX-512 vector or two AVX2 vectors).
    pub fn takes_token_major(&self) -> bool {
        self.m.is_multiple_of(16)
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
        let token_major = matches!(output, Output::Positions(_));
        let layout = (operand.cells, token_major);
        let panels = Panels::for_product(self.isa, self.four_panels, layout, self.m, self.k);
        let weights = match operand.by_taps {
            Some(taps) => self.transposed_by_taps(panels, taps),
            None => self.transposed(panels),
        };
        let m = self.m;
        let mut padded_bias = vec![0.0f32; panels.count(m) * panels.full()];
        if let Some(b) = bias {
            padded_bias[..m].copy_from_slice(&b[..m]);
        }
        let bias = bias.map(|_| &padded_bias[..]);
        let (starts, count) = (operand.starts, operand.count);
        // Each tile's positions as offsets from the image's start, 8 entries per tile; the
        // empty lanes repeat the last position (read, never written). Adjacent cells need
        // no table: the tiles find them from the first.
        let height = panels.height(self.isa, count);
        let tiles = count.div_ceil(height);
        let mut pos = Vec::new();
        if !operand.cells {
            pos.reserve_exact(tiles * POSITIONS);
            for tile in starts[..count].chunks(height) {
                let last = tile.len() - 1;
                pos.extend((0..POSITIONS).map(|lane| tile[lane.min(height - 1).min(last)]));
            }
        }
        let task = Task {
            a: self,
            panels,
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
            prefetch: operand.prefetch,
            cells: operand.cells,
            grouped: operand.grouped,
        };
        let count_panels = panels.count(m);
        let threads = super::threads();
        if m * self.k * count < super::PARALLEL_WORK || threads < 2 {
            task.run((0, count_panels), (0, tiles));
            return;
        }
        // Tasks take equal shares of the channel panels × position tiles, numbered panel
        // by panel: each task streams its share of the weights once, and the image once
        // per panel, as every cut does. Tiles first (each task streaming all the weights)
        // made inception_v3's 17×17 1×1 convolutions 5–10 % slower even where the image
        // is the larger operand, and whole panels or tiles per task left one of 2 threads
        // up to 4/7 of a 7×7 image's work (googlenet 0.97×, inception_v3 0.99×, 2 threads).
        // Shares of equal cost: a narrower last panel costs less (see `shares`). One per
        // thread: each task starts on a weight panel that nothing prefetched.
        shares(panels, m, tiles, POSITION_TASKS_PER_THREAD * threads)
            .into_par_iter()
            .for_each(|range| {
                for (p, t) in rectangles(range, tiles).into_iter().flatten() {
                    task.run(p, t);
                }
            });
    }
}

/// Runs `f` on `im` (`channels` planes) as the operand of position tiles: the image where it
/// is when no window reaches past its edges ([`unpadded_windows`]), else its padded phase
/// planes ([`direct::with_padded_image`]); each output's window start as a table, row by row
/// (a division per entry cost more than the table's use on googlenet's small products).
fn with_planar_operand<R>(
    im: &Image2d<'_>,
    channels: usize,
    f: impl FnOnce(&Operand<'_>) -> R,
) -> R {
    if let Some(offsets) = unpadded_windows(im, channels) {
        let [sh, sw] = im.strides;
        let starts = window_starts(im.out, sh * im.size[1], sw);
        return f(&Operand::planar(im.img, &offsets, &starts));
    }
    direct::with_padded_image(im, channels, 0, |img: &PaddedImage<'_>| {
        let starts = window_starts(img.out, img.width, 1);
        f(&Operand::planar(img.data, &img.offsets, &starts))
    })
}

/// Each output position's window start, row by row: output `(y, x)` at `y · row + x · column`.
fn window_starts([oh, ow]: [usize; 2], row: usize, column: usize) -> Vec<usize> {
    let mut starts = Vec::with_capacity(oh * ow);
    for y in 0..oh {
        starts.extend((0..ow).map(|x| y * row + x * column));
    }
    starts
}

/// The depth rows' offsets of `im` (`channels` planes) read where it is, at any stride, when
/// no window reaches past its edges (no padding: squeezenet's and inception_v3's stride-2
/// stems). The tiles broadcast single floats, so unlike the column tiles' vector loads they
/// need no phase planes; the copy into them took a tenth of squeezenet's stem (`perf`, one
/// thread, AVX-512).
fn unpadded_windows(im: &Image2d<'_>, channels: usize) -> Option<Vec<usize>> {
    let ([h, w], [oh, ow], [kh, kw]) = (im.size, im.out, im.kernel);
    let ([dh, dw], [sh, sw]) = (im.dilations, im.strides);
    let inside = |out: usize, stride: usize, window: usize, size: usize| {
        out > 0 && (out - 1) * stride + window <= size
    };
    let fits = im.pads == [0, 0]
        && inside(oh, sh, (kh - 1) * dh + 1, h)
        && inside(ow, sw, (kw - 1) * dw + 1, w)
        && im.img.len() >= channels * h * w;
    if !fits {
        return None;
    }
    let cells: Vec<usize> = (0..kh)
        .flat_map(|u| (0..kw).map(move |v| u * dh * w + v * dw))
        .collect();
    Some(direct::im2col_offsets(&cells, channels, h * w))
}

/// The image operand of a product in position tiles: `img[offsets[p] + starts[q]]` is depth
/// row `p` of output position `q`'s window.
struct Operand<'a> {
    data: &'a [f32],
    offsets: &'a [usize],
    /// Each output position's window start (empty when `cells`).
    starts: &'a [usize],
    /// How many output positions there are.
    count: usize,
    /// Whether each tile prefetches the next tile's cells ([`prefetches`]).
    prefetch: bool,
    /// Whether the image is blocked, the window 1×1 and the output positions the image's
    /// first cells in order (position `q` at `16·q`; unit strides, no padding): each block's
    /// 16 depth rows are one cell's consecutive floats, and each group's tiles of a panel run
    /// as one cell strip of adjacent cells.
    cells: bool,
    /// Whether every 16 depth rows from the start are one cell's consecutive floats (a 1×1
    /// window on a blocked image, or `by_taps`), the rows past the last such block excepted:
    /// each group's tiles of a panel run as one cell strip.
    grouped: bool,
    /// The window's taps when the depth rows are in blocks of 16 channels tap by tap
    /// (`(c / 16, u, v, c % 16)`), not channel by channel (`(c, u, v)`, the weights' own
    /// order): the tiles then read [`PackedA::transposed_by_taps`].
    by_taps: Option<usize>,
}

impl<'a> Operand<'a> {
    /// A planar image's operand: depth rows anywhere, positions from `starts`, no prefetch.
    fn planar(data: &'a [f32], offsets: &'a [usize], starts: &'a [usize]) -> Self {
        Operand {
            data,
            offsets,
            starts,
            count: starts.len(),
            prefetch: false,
            cells: false,
            grouped: false,
            by_taps: None,
        }
    }
}

/// Whether the tiles of a product over a blocked image prefetch the next tile's cells: for 1×1
/// windows at least [`PREFETCH_DEPTH`] channels deep, and on AVX2 for every 1×1 window (the
/// cell strips of 64 and 128 channels at 28² and 56², weights from memory, ran 7–15 % faster
/// with it: `conv_rate`, `COLD=1 WARM_INPUT=1`, one thread). Such an image (NASNet's 1008 channels at
/// 42², 7 MB) is read 512 bytes per block per tile, dozens of blocks apart, which the hardware
/// prefetchers do not follow once it has left the caches: NASNet's 1×1 convolutions of a
/// cell's output two cells on ran at half speed. Shallower or wider windows reuse each cell
/// across taps, and there the prefetch instructions cost more than they save (squeezenet's 3×3
/// convolutions, 2 threads, 16 % slower with them).
fn prefetches(isa: Isa, im: &Image2d<'_>, k: usize) -> bool {
    im.kernel == [1, 1] && (isa == Isa::Avx2 || k >= PREFETCH_DEPTH)
}

/// See [`prefetches`].
const PREFETCH_DEPTH: usize = 256;

/// The image of a blocked product: `image.img` holds channel planes (`blocked` false) or
/// blocks of 16 channels (`[channels / 16][height][width][16]`), with `image`'s geometry.
#[derive(Debug, Clone, Copy)]
pub struct BlockedInput<'a> {
    /// The image and its window geometry.
    pub image: Image2d<'a>,
    /// True when `image.img` is in 16-channel blocks.
    pub blocked: bool,
}
