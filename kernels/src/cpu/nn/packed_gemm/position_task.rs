//! The tile loop of a product in position tiles: a [`Task`] holds one product's packed
//! weights, image operand and output, and runs rectangles of channel panels × position tiles.

use super::cell_strip;
use super::panels::{Panels, tile_cost};
use super::position_tile::{POSITIONS, TileFinish, TilePositions};
use super::{KC, PackedA};
use crate::cpu::nn::epilogue::Epilogue;
use crate::cpu::nn::matrix::SendPtr;

/// Floats of `C` a task finishes at a time (a group of position tiles × a block of the task's
/// channels), about a quarter of L2: the block's outputs stay in cache across depth blocks and
/// for the epilogue.
const GROUP_FLOATS: usize = 64 * 1024;
/// The fewest positions in a group of position tiles (fewer when the task has fewer).
const GROUP_POSITIONS: usize = 512;

/// How a product in position tiles lays out `C`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Output {
    /// Channel rows at this stride, positions contiguous.
    Rows(usize),
    /// Blocks of 16 channels, each `[positions][16]`, back to back (NCHW16c).
    Blocks,
    /// Each position's channels contiguous, positions at this stride (tokens × features).
    Positions(usize),
}

/// The units `u0..u1` of a grid `inner` units wide, numbered row by row, as at most three
/// rectangles of (rows, columns): a tail of the first row, whole rows, a head of the last.
pub(super) fn rectangles((u0, u1): (usize, usize), inner: usize) -> [Option<Rectangle>; 3] {
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

/// `tasks` ranges of the units of `panels.count(m) × tiles`, numbered panel by panel, of
/// equal cost when a tile of a panel of `v` vectors costs [`tile_cost`]`(v)`. Equal counts of
/// units left one of 2 threads 7–9 % of NASNet's 168- and 336-channel 1×1 convolutions to
/// finish alone (`conv_rate`: 168 channels, one thread 2604 µs, two 1408 µs).
pub(super) fn shares(panels: Panels, m: usize, tiles: usize, tasks: usize) -> Vec<(usize, usize)> {
    let count = panels.count(m);
    let full = count - 1;
    let full_cost = tile_cost(panels.vectors);
    let last_cost = tile_cost(panels.width(m, full) / panels.lanes);
    let before_last = full_cost * full * tiles;
    let total = before_last + last_cost * tiles;
    // The first unit whose cost starts at or past `cost`.
    let unit = |cost: usize| match cost <= before_last {
        true => cost.div_ceil(full_cost),
        false => full * tiles + (cost - before_last).div_ceil(last_cost),
    };
    (0..tasks)
        .map(|i| (unit(i * total / tasks), unit((i + 1) * total / tasks)))
        .filter(|(u0, u1)| u0 < u1)
        .collect()
}

/// Rows × columns of a grid, each as a range `(start, end)`.
type Rectangle = ((usize, usize), (usize, usize));

/// One product in position tiles, ready to run over rectangles of channel panels × tiles.
pub(super) struct Task<'a> {
    pub(super) a: &'a PackedA,
    /// How the weights are cut into channel panels.
    pub(super) panels: Panels,
    pub(super) weights: &'a [f32],
    pub(super) data: &'a [f32],
    pub(super) offsets: &'a [usize],
    /// Positions per tile (7 or 8), `count` in all.
    pub(super) height: usize,
    /// Each tile's positions, [`POSITIONS`] entries per tile; empty when `cells`.
    pub(super) pos: &'a [usize],
    pub(super) count: usize,
    pub(super) bias: Option<&'a [f32]>,
    pub(super) epilogue: Option<&'a Epilogue<'a, f32>>,
    pub(super) c: SendPtr<f32>,
    pub(super) output: Output,
    /// Whether tiles prefetch the next tile's image cells.
    pub(super) prefetch: bool,
    /// Whether every tile's positions are adjacent cells and its depth rows in blocks of one
    /// cell's 16 floats: the tiles run as strips of adjacent cells ([`cell_strip`]).
    pub(super) cells: bool,
    /// Whether the depth rows are in blocks of one cell's 16 floats, whatever the positions:
    /// the strips then take them block by block from one pointer, else row by row.
    pub(super) grouped: bool,
}

impl Task<'_> {
    /// Channel panels `panels.0..panels.1` × position tiles `tiles.0..tiles.1` of `C`.
    pub(super) fn run(&self, panels: (usize, usize), tiles: (usize, usize)) {
        let (m, k, full) = (self.a.m, self.a.k, self.panels.full());
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
        let in_tiles = self.epilogue.and_then(Epilogue::clamp);
        let mut pos = TilePositions::default();
        let all_tiles = self.count.div_ceil(self.height);
        for g0 in (tiles.0..tiles.1).step_by(per_group) {
            let g1 = (g0 + per_group).min(tiles.1);
            for b0 in (panels.0..panels.1).step_by(panels_per_block) {
                let b1 = (b0 + panels_per_block).min(panels.1);
                for pc in (0..k).step_by(KC) {
                    let kc = KC.min(k - pc);
                    for jp in b0..b1 {
                        let width = self.panels.width(m, jp);
                        let panel = self.panel(pc, jp);
                        let bias = self.bias.filter(|_| pc == 0).map(|b| &b[jp * full..]);
                        // The panel the loops take next, streamed in while this one is used
                        // (from memory, where the weights outgrow the caches): the next
                        // channels', else the next depth block's, else the next block's or
                        // group's first.
                        let next = if jp + 1 < b1 {
                            self.panel(pc, jp + 1)
                        } else if pc + KC < k {
                            self.panel(pc + KC, b0)
                        } else if b1 < panels.1 {
                            self.panel(0, b1)
                        } else if g1 < tiles.1 {
                            self.panel(0, panels.0)
                        } else {
                            &[]
                        };
                        let finish_at = |at: usize| {
                            in_tiles
                                .filter(|_| pc + kc == k)
                                .map(|((lo, hi), z)| TileFinish {
                                    // In bounds: `multiply` checked that Z covers C.
                                    z: z.map_or(std::ptr::null(), |z| z[at..].as_ptr()),
                                    lo,
                                    hi,
                                })
                        };
                        // One strip for the group's tiles, which prefetches `next` itself.
                        let after = g1.min(all_tiles - 1);
                        pos.now = [self.positions(g0)[0]; POSITIONS];
                        pos.next = self.positions(after);
                        pos.table = self
                            .pos
                            .get(g0 * POSITIONS..)
                            .map_or(std::ptr::null(), <[usize]>::as_ptr);
                        (pos.ahead, pos.ahead_lines) = (next.as_ptr(), next.len().div_ceil(16));
                        let live = (
                            width.min(m - jp * full),
                            (g1 * self.height).min(self.count) - g0 * self.height,
                        );
                        let at = self.tile_at(jp, g0);
                        // SAFETY: these channels × positions of C are this task's.
                        unsafe {
                            let c = self.c.get().add(at);
                            self.tile(panel, (pc, kc), &pos, c, live, bias, finish_at(at))
                        };
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
                            (channels.0 / 16, channels.1.div_ceil(16)),
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

    /// Tile `t`'s positions: from the table, or for adjacent cells from the tile's first (the
    /// empty lanes of a last tile repeat its last position, as in the table).
    fn positions(&self, t: usize) -> [usize; POSITIONS] {
        match self.cells {
            true => std::array::from_fn(|i| {
                let q = (t * self.height + i.min(self.height - 1)).min(self.count - 1);
                16 * q
            }),
            false => std::array::from_fn(|i| self.pos[t * POSITIONS + i]),
        }
    }

    /// The weights of channel panel `jp` in the depth block that starts at `pc`.
    fn panel(&self, pc: usize, jp: usize) -> &[f32] {
        let (m, panels) = (self.a.m, self.panels);
        let kc = KC.min(self.a.k - pc);
        let block = &self.weights[pc * panels.padded(m)..];
        &block[jp * kc * panels.full()..][..kc * panels.width(m, jp)]
    }

    /// Where tile `t` of channel panel `jp` starts in `C`.
    fn tile_at(&self, jp: usize, t: usize) -> usize {
        let first = jp * self.panels.full();
        match self.output {
            Output::Rows(ldc) => first * ldc + t * self.height,
            Output::Blocks => first * self.count + t * self.height * 16,
            Output::Positions(ld) => t * self.height * ld + first,
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
        pos: &TilePositions,
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
        let vectors = panel.len() / (kc * self.panels.lanes);
        let (isa, height, layout) = (self.a.isa, self.height, (self.cells, self.grouped));
        let kernel = cell_strip::kernel_for(isa, vectors, height, blocked, self.prefetch, layout);
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
    use super::{Panels, rectangles, shares, tile_cost};

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

    #[test]
    fn shares_cover_every_unit_once_at_equal_cost() {
        let (two, three) = (
            Panels {
                vectors: 2,
                lanes: 16,
            },
            Panels {
                vectors: 3,
                lanes: 16,
            },
        );
        for (panels, m, tiles) in [
            (two, 168, 221),
            (two, 336, 56),
            (two, 160, 3),
            (two, 10, 9),
            (three, 168, 221),
            (three, 144, 56),
            (three, 20, 9),
            (three, 1000, 2),
        ] {
            let count = panels.count(m);
            let cost = |u: usize| tile_cost(panels.width(m, u / tiles) / panels.lanes);
            let total: usize = (0..count * tiles).map(cost).sum();
            for tasks in 1..=8 {
                let ranges = shares(panels, m, tiles, tasks);
                assert_eq!(ranges.first().map(|r| r.0), Some(0));
                assert_eq!(ranges.last().map(|r| r.1), Some(count * tiles));
                assert!(
                    ranges
                        .windows(2)
                        .all(|w| w[0].1 == w[1].0 && w[0].0 < w[0].1)
                );
                for &(u0, u1) in &ranges {
                    let share: usize = (u0..u1).map(cost).sum();
                    assert!(
                        share.abs_diff(total / tasks) <= 2 * tile_cost(panels.vectors),
                        "{m} in {panels:?} x {tiles} in {tasks}: {u0}..{u1} costs {share} of {total}"
                    );
                }
            }
        }
    }
}
