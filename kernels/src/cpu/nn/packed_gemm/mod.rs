//! `C = A · B` in `f32` with `A` packed once and reused across calls: the convolution weights
//! are the same on every run, so packing them (which `matrixmultiply` redoes on every call, and
//! once more per parallel block) happens when a `Conv` first sees them.
//!
//! The loops are the classic five around a register-blocked micro-kernel (Goto & van de Geijn;
//! BLIS): `B` is packed per `KC × NC` block into `KC × NR` column panels, `A` is stored as
//! `MR × KC` row panels, and each `MR × NR` tile of `C` accumulates over the `KC` steps in
//! registers. Threads take disjoint column ranges of `C` (or row ranges when `C` is narrow),
//! each packing its own part of `B`; the packed `A` is shared read-only.

mod avx2_tile;
mod blocked_image;
mod cell_strip;
mod cell_tile;
mod direct;
mod micro;
mod panels;
mod position_task;
mod position_tile;
mod positions;
mod source;

use rayon::prelude::*;

pub use micro::Isa;
pub use positions::BlockedInput;
pub use source::{BSource, Image2d};

use position_tile::TileFinish;

use super::epilogue::Epilogue;
use super::matrix::SendPtr;
use crate::KernelOptions;
use crate::cpu::aligned::AlignedFloats;

/// Depth of one packed block (`A` panels are `MR × KC`, `B` panels `KC × NR`). Every block
/// after the first reloads and adds to the tile it wrote, so deeper blocks write less; a tile's
/// panels still stream from L2 (32 columns × 1024 deep is 128 KiB). Against 256, 1024 made
/// the zoo 1.6–3.7% faster with 2 threads and googlenet 2.6% with one, and 4096 measured the
/// same as 1024 (`benches/results/cpu-2026-11-25-depth-blocks.md`).
pub(crate) const KC: usize = 1024;
/// Rows of `A` per cache block (the `A` block stays in L2 while `B` panels stream by).
const MC: usize = 64;
/// Columns of `B` per packed block.
const NC: usize = 2048;
/// Parallel products are cut into this many tasks per thread: enough for rayon to even out
/// a thread slowed by something else on its core, few enough that each task's share of the
/// operands stays large (4 was 6% slower than 2 on resnet50 with 2 threads).
const TASKS_PER_THREAD: usize = 2;
/// The most floats of `B` packed whole for a product cut into row blocks (64 MiB); larger
/// ones are packed block by block in each task.
const SHARED_B_LIMIT: usize = 1 << 24;
/// Below this many multiply-adds one thread does the whole product.
const PARALLEL_WORK: usize = 1 << 17;

/// A row-major `m × k` matrix stored as the micro-kernel reads it: for each `KC` block of
/// columns, `ceil(m / MR)` panels of `MR × kc` values, column by column, padded with zeros.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedA {
    isa: Isa,
    /// Whether products of these weights may take panels of four vectors
    /// ([`KernelOptions::four_vector_panels`]).
    four_panels: bool,
    m: usize,
    k: usize,
    data: AlignedFloats,
    /// The same weights packed transposed, for position tiles (on first use).
    transposed: panels::TransposedA,
}

impl PackedA {
    /// Packs the dense row-major `m × k` matrix `a` for this CPU with the default
    /// [`KernelOptions`]; `None` when the CPU has none of the instruction sets the
    /// micro-kernels need (callers fall back to the generic GEMM).
    pub fn new(a: &[f32], m: usize, k: usize) -> Option<Self> {
        Self::with_options(a, m, k, &KernelOptions::default())
    }

    /// Packs `a` (as [`PackedA::new`]) for the instruction set `options` choose on this CPU
    /// ([`KernelOptions::gemm_isa`]), its products taking panels as `options` say; `None`
    /// where they leave no packed GEMM.
    pub fn with_options(a: &[f32], m: usize, k: usize, options: &KernelOptions) -> Option<Self> {
        let isa = options.gemm_isa()?;
        let mut packed = Self::with_isa(a, m, k, isa);
        packed.four_panels = options.four_vector_panels;
        Some(packed)
    }

    /// The instruction set the matrix is packed for.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Packs for a given instruction set (which the CPU must support to multiply).
    ///
    /// # Panics
    /// If `a` is shorter than `m · k` (an internal contract; callers check shapes first).
    pub fn with_isa(a: &[f32], m: usize, k: usize, isa: Isa) -> Self {
        assert!(a.len() >= m * k, "PackedA: {} values for {m}x{k}", a.len());
        let (mr, _) = isa.tile();
        let panels = m.div_ceil(mr);
        let mut data = AlignedFloats::zeroed(panels * mr * k);
        let out = data.as_mut_slice();
        let mut at = 0;
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            for ip in 0..panels {
                for p in 0..kc {
                    for i in 0..mr {
                        let row = ip * mr + i;
                        if row < m {
                            out[at] = a[row * k + pc + p];
                        }
                        at += 1;
                    }
                }
            }
        }
        PackedA {
            isa,
            four_panels: true,
            m,
            k,
            data,
            transposed: Default::default(),
        }
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.k
    }

    /// The panel `ip` of the `KC` block starting at column `pc` (whose depth is `kc`).
    fn panel(&self, pc: usize, kc: usize, ip: usize) -> &[f32] {
        let (mr, _) = self.isa.tile();
        let start = pc * self.m.div_ceil(mr) * mr + ip * mr * kc;
        &self.data.as_slice()[start..start + mr * kc]
    }

    /// The panels a task's loops over row blocks of `MC` reach after the block `panels` of
    /// depth block `(pc, kc)` (the task's rows end at panel `last`): the next block of rows,
    /// else the next depth block's first rows; empty after the last. Their weights come from
    /// memory in any model larger than the caches, so they are fetched while this block runs.
    fn next_row_block(
        &self,
        panels: (usize, usize),
        (pc, kc): (usize, usize),
        first: usize,
        last: usize,
    ) -> &[f32] {
        let (mr, _) = self.isa.tile();
        let per_block = (MC / mr).max(1);
        let (pc, kc, ip) = if panels.1 < last {
            (pc, kc, panels.1)
        } else if pc + kc < self.k {
            (pc + kc, KC.min(self.k - pc - kc), first)
        } else {
            return &[];
        };
        let count = per_block.min(last - ip);
        let start = pc * self.m.div_ceil(mr) * mr + ip * mr * kc;
        &self.data.as_slice()[start..start + count * mr * kc]
    }

    /// `c = self · b (+ bias per row)` for the `k × n` operand `b`, written to the row-major
    /// `m × n` matrix `c` (row stride `ldc ≥ n`); `bias` has `m` values. An `epilogue` (its
    /// `add` laid out like `c`) finishes each cache block of rows right after its last depth
    /// block is written, while the block is still in cache.
    ///
    /// # Panics
    /// If an operand is too small for its shape (an internal contract; callers check shapes).
    pub fn multiply(
        &self,
        b: BSource<'_>,
        n: usize,
        c: &mut [f32],
        ldc: usize,
        bias: Option<&[f32]>,
        epilogue: Option<&Epilogue<'_, f32>>,
    ) {
        let (m, k) = (self.m, self.k);
        if m == 0 || n == 0 {
            return;
        }
        b.check(k, n);
        assert!(ldc >= n, "PackedA::multiply: stride below n");
        assert!(
            c.len() >= (m - 1) * ldc + n,
            "PackedA::multiply: C too short"
        );
        assert!(
            bias.is_none_or(|b| b.len() >= m),
            "PackedA::multiply: bias too short"
        );
        assert!(
            epilogue
                .and_then(|e| e.add)
                .is_none_or(|a| a.len() >= (m - 1) * ldc + n),
            "PackedA::multiply: epilogue input too short"
        );
        if k == 0 {
            for i in 0..m {
                let row = &mut c[i * ldc..i * ldc + n];
                row.fill(bias.map_or(0.0, |b| b[i]));
                if let Some(e) = epilogue {
                    e.finish(row, i * ldc);
                }
            }
            return;
        }
        match b {
            BSource::Image(im) if positions::pays(self.isa, self.four_panels, im, m, k) => {
                self.multiply_positions(im, c, ldc, bias, epilogue)
            }
            BSource::Image(im) if direct::applies(im, m) => {
                self.multiply_in_place(im, c, ldc, bias, epilogue)
            }
            _ => self.multiply_packed(b, n, c, ldc, bias, epilogue),
        }
    }

    /// [`PackedA::multiply`] with `B` packed block by block (any source), after the checks.
    fn multiply_packed(
        &self,
        b: BSource<'_>,
        n: usize,
        c: &mut [f32],
        ldc: usize,
        bias: Option<&[f32]>,
        epilogue: Option<&Epilogue<'_, f32>>,
    ) {
        let (m, k) = (self.m, self.k);
        let (mr, nr) = self.isa.tile();
        let (row_panels, col_panels) = (m.div_ceil(mr), n.div_ceil(nr));
        let threads = threads();
        let c_ptr = SendPtr(c.as_mut_ptr());
        let run = |rows: (usize, usize), cols: (usize, usize)| {
            // SAFETY: tasks cover disjoint rectangles of C, inside the checked slice.
            unsafe { self.block(b, bias, epilogue, c_ptr.get(), ldc, rows, cols) }
        };
        if m * k * n < PARALLEL_WORK || threads < 2 {
            run((0, row_panels), (0, n));
        } else if n > m && col_panels >= TASKS_PER_THREAD * threads {
            // Wide products are cut into column blocks, each packing its own columns of B and
            // reading all of the packed A; the others into row blocks sharing one packed B.
            split(col_panels, TASKS_PER_THREAD * threads)
                .for_each(|(p0, p1)| run((0, row_panels), (p0 * nr, (p1 * nr).min(n))));
        } else if k * col_panels * nr <= SHARED_B_LIMIT {
            self.multiply_by_rows(b, n, c, ldc, bias, epilogue);
        } else {
            split(row_panels, TASKS_PER_THREAD * threads).for_each(|rows| run(rows, (0, n)));
        }
    }

    /// [`PackedA::multiply_packed`] cut into blocks of rows: `B` is packed whole once, in
    /// parallel, and every row block reads that one copy. (Row blocks that each packed `B`
    /// would redo the packing once per block: with a 3×3 image's gather, a quarter of the
    /// work of a 64-row block.)
    fn multiply_by_rows(
        &self,
        b: BSource<'_>,
        n: usize,
        c: &mut [f32],
        ldc: usize,
        bias: Option<&[f32]>,
        epilogue: Option<&Epilogue<'_, f32>>,
    ) {
        let (mr, nr) = self.isa.tile();
        let (k, row_panels, col_panels) = (self.k, self.m.div_ceil(mr), n.div_ceil(nr));
        let tasks = TASKS_PER_THREAD * threads();
        let len = k * col_panels * nr;
        let mut run = |packed: &mut AlignedFloats| {
            packed.ensure(len);
            let packed = packed.as_mut_slice();
            // Depth block `pc` holds its `col_panels` panels from `pc · col_panels · nr`;
            // packing tasks take a depth block's panels a few at a time.
            let per = col_panels.div_ceil(tasks).max(1);
            let mut pieces = Vec::new();
            let mut rest = &mut packed[..len];
            for pc in (0..k).step_by(KC) {
                let kc = KC.min(k - pc);
                for jp in (0..col_panels).step_by(per) {
                    let panels = per.min(col_panels - jp);
                    let (piece, tail) = rest.split_at_mut(panels * kc * nr);
                    rest = tail;
                    pieces.push((pc, kc, jp, panels, piece));
                }
            }
            pieces
                .into_par_iter()
                .for_each(|(pc, kc, jp, panels, piece)| {
                    let (jc, nc) = (jp * nr, (panels * nr).min(n - jp * nr));
                    b.pack(pc, kc, jc, nc, nr, piece);
                });
            let packed = &packed[..len];
            let c_ptr = SendPtr(c.as_mut_ptr());
            split(row_panels, tasks).for_each(|rows| {
                for pc in (0..k).step_by(KC) {
                    let kc = KC.min(k - pc);
                    let block = &packed[pc * col_panels * nr..][..kc * col_panels * nr];
                    // SAFETY: the tasks' row panels are disjoint, inside the checked C.
                    unsafe {
                        self.depth_block(
                            block,
                            bias,
                            epilogue,
                            c_ptr.get(),
                            ldc,
                            rows,
                            (pc, kc),
                            (0, n),
                        )
                    };
                }
            });
        };
        // The calling thread's buffer, reused across calls (fresh pages would fault in).
        SHARED_B.with(|cell| match cell.try_borrow_mut() {
            Ok(mut packed) => run(&mut packed),
            Err(_) => run(&mut AlignedFloats::new()),
        });
    }

    /// Row panels `rows.0..rows.1` × columns `cols.0..cols.1` of `C`.
    ///
    /// # Safety
    /// `c` is valid for the whole `m × n` matrix at row stride `ldc`, and no other thread
    /// writes this rectangle; the epilogue's `add`, when given, covers that matrix too.
    #[allow(clippy::too_many_arguments)]
    unsafe fn block(
        &self,
        b: BSource<'_>,
        bias: Option<&[f32]>,
        epilogue: Option<&Epilogue<'_, f32>>,
        c: *mut f32,
        ldc: usize,
        rows: (usize, usize),
        cols: (usize, usize),
    ) {
        let (_, nr) = self.isa.tile();
        let width = (cols.1 - cols.0).min(NC);
        // The packed B block lives in a per-thread buffer reused by every call (a fresh
        // allocation of this size would be new pages, faulted in on every call).
        PACKED_B.with_borrow_mut(|scratch| {
            let need = KC * width.div_ceil(nr) * nr;
            scratch.ensure(need);
            let packed_b = &mut scratch.as_mut_slice()[..need];
            for jc in (cols.0..cols.1).step_by(NC) {
                let nc = NC.min(cols.1 - jc);
                for pc in (0..self.k).step_by(KC) {
                    let kc = KC.min(self.k - pc);
                    b.pack(pc, kc, jc, nc, nr, packed_b);
                    let block = &packed_b[..kc * nc.div_ceil(nr) * nr];
                    // SAFETY: forwarded from the caller's contract.
                    unsafe {
                        self.depth_block(block, bias, epilogue, c, ldc, rows, (pc, kc), (jc, nc))
                    };
                }
            }
        });
    }

    /// Row panels `rows.0..rows.1` × columns `jc..jc + nc` of `C` for the depth block
    /// `(pc, kc)`, whose `B` is `packed` (`kc × NR` panels from column `jc`); the epilogue
    /// follows the last depth block.
    ///
    /// # Safety
    /// As [`PackedA::block`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn depth_block(
        &self,
        packed: &[f32],
        bias: Option<&[f32]>,
        epilogue: Option<&Epilogue<'_, f32>>,
        c: *mut f32,
        ldc: usize,
        rows: (usize, usize),
        (pc, kc): (usize, usize),
        (jc, nc): (usize, usize),
    ) {
        let (mr, nr) = self.isa.tile();
        let in_tiles = self.tile_finish(epilogue, (pc, kc));
        for ic in (rows.0..rows.1).step_by((MC / mr).max(1)) {
            let panels = (ic, (ic + (MC / mr).max(1)).min(rows.1));
            for jp in 0..nc.div_ceil(nr) {
                let bp = &packed[jp * kc * nr..(jp + 1) * kc * nr];
                let j0 = jc + jp * nr;
                let wide = nr.min(jc + nc - j0);
                // SAFETY: the tile column lies in the caller's rectangle of C; the packed
                // panel holds kc·NR values.
                unsafe {
                    self.tile_column(panels, (pc, kc), bp.as_ptr(), micro::Panel(nr))
                        .finishing(in_tiles.map(|f| f.shifted(j0)))
                        .write(c.add(j0), ldc, wide, bias)
                };
            }
            if in_tiles.is_none() {
                // SAFETY: these rows × columns jc..jc + nc are the caller's.
                unsafe { self.finish_rows(epilogue, panels, (pc, kc), c, ldc, (jc, nc)) };
            }
        }
    }

    /// One column of micro-tiles: row panels `panels.0..panels.1` of the depth block
    /// `(pc, kc)` against one tile of `B` (`b`, rows at `rows`).
    fn tile_column<R: micro::BRows>(
        &self,
        panels: (usize, usize),
        (pc, kc): (usize, usize),
        b: *const f32,
        rows: R,
    ) -> TileColumn<'_, R> {
        TileColumn {
            a: self,
            panels,
            depth: (pc, kc),
            b,
            rows,
            ahead: &[],
            finish: None,
        }
    }

    /// The epilogue as the tiles can apply it in their registers, for `C` from its first
    /// output: a clamp (none, `Relu`, `Clip`, with or without an add) on AVX-512, after the
    /// last depth block; `None` where the caller finishes the rows itself
    /// ([`PackedA::finish_rows`]).
    fn tile_finish(
        &self,
        epilogue: Option<&Epilogue<'_, f32>>,
        (pc, kc): (usize, usize),
    ) -> Option<TileFinish> {
        let e = epilogue.filter(|_| self.isa == Isa::Avx512 && pc + kc == self.k)?;
        let (lo, hi) = e.activation.clamp_bounds()?;
        Some(TileFinish {
            z: e.add.map_or(std::ptr::null(), <[f32]>::as_ptr),
            lo,
            hi,
        })
    }

    /// After the last depth block (`pc + kc == k`), runs the epilogue over the rows of
    /// `panels` × columns `jc..jc + nc`, row by row (long contiguous runs of the output and of
    /// the epilogue's `add`), while the block is still in cache.
    ///
    /// # Safety
    /// `c` is valid for the whole `m × n` matrix at row stride `ldc`, and no other thread
    /// touches this rectangle.
    #[allow(clippy::too_many_arguments)]
    unsafe fn finish_rows(
        &self,
        epilogue: Option<&Epilogue<'_, f32>>,
        panels: (usize, usize),
        (pc, kc): (usize, usize),
        c: *mut f32,
        ldc: usize,
        (jc, nc): (usize, usize),
    ) {
        let Some(e) = epilogue.filter(|_| pc + kc == self.k) else {
            return;
        };
        let (mr, _) = self.isa.tile();
        for i in panels.0 * mr..(panels.1 * mr).min(self.m) {
            let at = i * ldc + jc;
            // SAFETY: row i, columns jc..jc + nc of the caller's rectangle.
            let row = unsafe { std::slice::from_raw_parts_mut(c.add(at), nc) };
            e.finish(row, at);
        }
    }
}

/// A column of micro-tiles ready to run ([`PackedA::tile_column`]).
struct TileColumn<'a, R> {
    a: &'a PackedA,
    panels: (usize, usize),
    depth: (usize, usize),
    b: *const f32,
    rows: R,
    /// Weights to bring into L2 meanwhile, a share before each tile.
    ahead: &'a [f32],
    /// The epilogue the tiles apply as they store, at the column's first output.
    finish: Option<TileFinish>,
}

impl<'a, R: micro::BRows> TileColumn<'a, R> {
    /// Applies `finish` (at the column's first output, when given) as the tiles store.
    fn finishing(mut self, finish: Option<TileFinish>) -> Self {
        self.finish = finish;
        self
    }

    /// Fetches `share` of `ahead` (`count` shares in all) into L2 while the tiles run.
    fn prefetching(mut self, ahead: &'a [f32], share: usize, count: usize) -> Self {
        let per = ahead.len().div_ceil(count.max(1)).next_multiple_of(16);
        let from = (share * per).min(ahead.len());
        self.ahead = &ahead[from..(from + per).min(ahead.len())];
        self
    }

    /// Runs the tiles into `c` (this column's first element of row 0, row stride `ldc`),
    /// `wide` columns; the bias starts the accumulators in the first depth block.
    ///
    /// # Safety
    /// Rows of the panels × `wide` columns from `c` lie in the caller's rectangle of C;
    /// `b + rows.at(p)` holds `NR` floats for every `p < kc`.
    unsafe fn write(&self, c: *mut f32, ldc: usize, wide: usize, bias: Option<&[f32]>) {
        let (a, (pc, kc)) = (self.a, self.depth);
        let (mr, _) = a.isa.tile();
        let mut init = [0.0f32; 16];
        let tiles = self.panels.1 - self.panels.0;
        let per = self.ahead.len().div_ceil(tiles.max(1)).next_multiple_of(16);
        let mut ahead = self.ahead.chunks(per.max(16));
        for ip in self.panels.0..self.panels.1 {
            if let Some(part) = ahead.next() {
                micro::prefetch_lines(part);
            }
            let i0 = ip * mr;
            let live = mr.min(a.m - i0);
            let row_init = match bias {
                Some(bv) if pc == 0 => {
                    init[..live].copy_from_slice(&bv[i0..i0 + live]);
                    init[live..].fill(0.0);
                    Some(&init[..])
                }
                _ => None,
            };
            // SAFETY: forwarded from the caller's contract; the A panel holds kc·MR values.
            unsafe {
                micro::tile(
                    a.isa,
                    kc,
                    a.panel(pc, kc, ip).as_ptr(),
                    self.b,
                    self.rows,
                    c.add(i0 * ldc),
                    ldc,
                    live,
                    wide,
                    pc > 0,
                    row_init,
                    self.finish.map(|f| f.shifted(i0 * ldc)),
                )
            };
        }
    }
}

/// Runs `f` with every product started on this thread computed by this thread alone: for
/// callers that run several products in parallel themselves (a batch's images), where each
/// product splitting its own work again would only add synchronisation and shared copies.
pub fn serially<R>(f: impl FnOnce() -> R) -> R {
    /// Clears the flag again, also when `f` unwinds.
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            SERIAL.set(self.0);
        }
    }
    let _reset = Reset(SERIAL.replace(true));
    f()
}

/// The threads a product started on this thread may use.
fn threads() -> usize {
    if SERIAL.get() {
        1
    } else {
        rayon::current_num_threads()
    }
}

/// `0..count` cut into at most `tasks` ranges, run as parallel tasks: `(start, end)` each.
/// Their lengths differ by at most one and the longer ones are spread out, so that each half
/// of the tasks (rayon hands halves to different threads) holds half the work: 10 channel
/// panels in 4 tasks are 2, 3, 2, 3, where equal lengths with a short last one (3, 3, 3, 1)
/// gave one of 2 threads 6 panels and the other 4.
fn split(count: usize, tasks: usize) -> impl ParallelIterator<Item = (usize, usize)> {
    let tasks = tasks.min(count);
    (0..tasks)
        .into_par_iter()
        .map(move |i| (i * count / tasks, (i + 1) * count / tasks))
}

thread_local! {
    /// Whether products started on this thread stay on it ([`serially`]).
    static SERIAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The calling thread's buffer for a `B` packed whole (see `multiply_by_rows`).
    static SHARED_B: std::cell::RefCell<AlignedFloats> = const { std::cell::RefCell::new(AlignedFloats::new()) };
    /// Per-thread scratch for packed `B` blocks.
    static PACKED_B: std::cell::RefCell<AlignedFloats> = const { std::cell::RefCell::new(AlignedFloats::new()) };
}

#[cfg(test)]
mod tests;
