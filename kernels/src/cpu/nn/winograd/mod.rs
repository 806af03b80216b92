//! 3×3 convolutions with unit strides by Winograd's F(4×4, 3×3): each 4×4 block of outputs
//! takes 36 multiply-adds per input and output channel pair where the direct convolution
//! takes 144 (Lavin & Gray 2016; `transform.rs` has the matrices). On smaller images, by
//! F(2×2, 3×3): 16 per 2×2 block against 36 (`wide` chooses). Windows of one row or column
//! (1×r, r×1) run by the 1-D F(4, r) of [`mod@line`].
//!
//! The output is cut into tiles (4×4 or 2×2), and the tiles into blocks of whole tile rows.
//! For each block:
//! 1. every input tile (6×6 or 4×4, the tile's windows) is transformed, 16 channels at a time,
//!    into 36 or 16 matrices `V_ξ` of tiles × input channels;
//! 2. as many independent products `M_ξ = V_ξ · U_ξᵀ` (tiles × output channels) run on the
//!    packed GEMM's token-major position tiles, against the filters transformed once into `U_ξ`
//!    (output × input channels, packed like any weight matrix);
//! 3. every tile's products are transformed back into its outputs, 16 output channels at a
//!    time, with the bias, then the epilogue (a residual and the activation).
//!
//! Needs AVX2 + FMA or AVX-512 (the token-major product and the transforms' 16-channel
//! vectors: two ymm or one zmm), and channel counts in whole blocks of 16. The transformed
//! filters are 4× (F(4×4)) or 16/9 (F(2×2)) the size of the original ones, so a block holds
//! enough tiles that the filters are streamed a few times per image at most.

mod inputs;
pub mod line;
mod outputs;
mod toom_cook;
mod transform;

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::epilogue::Epilogue;
use super::matrix::SendPtr;
use super::packed_gemm::{self, Isa, PackedA};
use crate::options::{KernelOptions, Winograd};
use inputs::transform_inputs;
use outputs::Outputs;
use transform::Tiling;

/// Whether F(4×4, 3×3) rather than F(2×2, 3×3) runs a convolution with outputs `out`: where
/// its products take at most 2/3 of F(2×2)'s multiply-adds (the last tiles counted whole).
/// Elsewhere F(2×2)'s filters, 16/9 the original ones against 4×, stream faster over the few
/// tiles. (`winograd_rate`, 2 threads, weights from memory: F(2×2) took 0.82–0.90× F(4×4)'s
/// time at 14² and 17² and 0.68–0.77× at 10²; F(4×4) 0.72× F(2×2)'s at 19², 0.66–0.69× at
/// 28², 0.69× at 35².)
fn wide(out: [usize; 2]) -> bool {
    use transform::{F2x2, F4x4};
    3 * tiles(out, F4x4::OUTPUT) * F4x4::PRODUCTS <= 2 * tiles(out, F2x2::OUTPUT) * F2x2::PRODUCTS
}

/// Tiles of `output`×`output` cells over outputs `out`.
fn tiles(out: [usize; 2], output: usize) -> usize {
    out[0].div_ceil(output) * out[1].div_ceil(output)
}

/// Channels per vector.
const LANES: usize = 16;
/// Floats of transformed inputs and products a block aims at (4 MiB): past the L2 caches but
/// reused from the L3 by every block of a convolution (a tile row of a wide image or many
/// channels can need more). The image is cut into blocks of equal rows. Against 16 MiB and
/// blocks cut by that size alone (2 threads, Zen 5, traces of whole runs), inception_v3's
/// 147² and 71² convolutions, 13–19 MB of scratch in one or two uneven blocks, ran 0.66×,
/// 0.66× and 0.81× the time, and googlenet's 56² one (7 MB, now two blocks) about 0.75× its
/// share of the run (`benches/results/winograd-blocks-2026-12-03.md`). A block holds at least
/// as much as the filters, which it streams once: 512 → 512 at 38² (38 MB of filters, 15 MB of
/// scratch) ran 1.13–1.14× the time in two blocks (`winograd_rate`, `COLD=1`, 2 threads).
const BLOCK_FLOATS: usize = 1 << 20;
/// The fewest tiles per block (when the image has them): each block streams all 36
/// transformed filters once.
const BLOCK_TILES: usize = 64;

/// One image of a Winograd convolution: `channels` planes `[C][H][W]`, or blocks of 16
/// channels `[C / 16][H][W][16]` when `blocked`; `pads` are the top and left padding,
/// `out` the output's height and width (a 3×3 window, unit strides and dilations).
#[derive(Debug, Clone, Copy)]
pub struct WinogradImage<'a> {
    /// The image.
    pub x: &'a [f32],
    /// True when `x` is in blocks of 16 channels.
    pub blocked: bool,
    /// Input channels.
    pub channels: usize,
    /// Input height and width.
    pub size: [usize; 2],
    /// Padding before the first row and the first column.
    pub pads: [usize; 2],
    /// Output height and width.
    pub out: [usize; 2],
}

/// Whether a convolution can run here: a 3×3 window with unit strides and dilations, group 1,
/// input and output channels in whole blocks of 16, on a CPU with AVX2 + FMA or AVX-512.
pub fn applies(
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    c: usize,
    m: usize,
) -> bool {
    fits(kernel, strides, dilations, c, m) && isa().is_some()
}

/// [`applies`] but for the instruction set.
fn fits(
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    c: usize,
    m: usize,
) -> bool {
    kernel == [3, 3]
        && strides == [1, 1]
        && dilations == [1, 1]
        && c.is_multiple_of(LANES)
        && m.is_multiple_of(LANES)
        && c > 0
        && m > 0
}

/// The packed GEMM's instruction set by default ([`Isa::detect`]), which the transforms'
/// vectors follow (never off x86-64, where the transforms do not exist).
fn isa() -> Option<Isa> {
    isa_for(&KernelOptions::default())
}

/// The instruction set of the transforms with `options` ([`KernelOptions::gemm_isa`]), never
/// off x86-64.
pub(super) fn isa_for(options: &KernelOptions) -> Option<Isa> {
    options.gemm_isa().filter(|_| cfg!(target_arch = "x86_64"))
}

/// Whether Winograd beats the position tiles on a convolution that [`applies`]: enough
/// tiles of its tiling (see `wide`) to stream the larger filters over. (F(4×4, 3×3) on 7×7 outputs,
/// 4 tiles, took 1.1–1.9× the position tiles' time with 512 channels; from 14×14, 16 tiles,
/// 0.34–0.76×. F(2×2, 3×3) on 7×7, 16 tiles, 1.01×; on 10×10, 25 tiles, 0.42–0.72×.) On
/// AVX2, F(2×2) pays from 16 tiles on with inputs 256 channels deep and more (`AVX2_DEEP`).
pub fn pays(c: usize, m: usize, out: [usize; 2]) -> bool {
    pays_on(isa(), c, m, out)
}

/// [`pays`] on `isa`.
fn pays_on(isa: Option<Isa>, c: usize, m: usize, out: [usize; 2]) -> bool {
    let (tiles, least) = match wide(out) {
        true => (tiles(out, transform::F4x4::OUTPUT), 16),
        false if c >= AVX2_DEEP && isa == Some(Isa::Avx2) => {
            (tiles(out, transform::F2x2::OUTPUT), 16)
        }
        false => (tiles(out, transform::F2x2::OUTPUT), 25),
    };
    tiles >= least && c >= 32 && m >= 32
}

/// The fewest input channels with which F(2×2, 3×3) pays on AVX2 from 16 tiles on (7×7 and
/// 8×8 outputs; `winograd_rate`, weights from memory, Zen 3, against the cell strips): 512 →
/// 512 at 7² took 0.73–0.96× their time on one thread and 0.70–0.82× on two, 448 → 384 at 8²
/// 0.64–0.75×; but 192 → 384 at 7² 0.84–1.15×, 160 → 320 0.82–1.41×, 64 → 64 1.03–1.12×.
const AVX2_DEEP: usize = 256;

/// Whether a 2-D convolution (group 1) runs by Winograd with `options`: where it [`applies`]
/// on their instruction set and, as [`KernelOptions::winograd`] says, where it [`pays`]
/// (`Auto`), always (`Always`) or never (`Never`).
pub fn chooses(
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    (c, m): (usize, usize),
    out: [usize; 2],
    options: &KernelOptions,
) -> bool {
    let isa = isa_for(options);
    isa.is_some()
        && fits(kernel, strides, dilations, c, m)
        && match options.winograd {
            Winograd::Never => false,
            Winograd::Always => true,
            _ => pays_on(isa, c, m, out),
        }
}

/// The filters `w` (`m × c × 3 × 3`) transformed and packed for the tiling of outputs `out`
/// (see `wide`): `U_ξ` for each of its products (36 or 16). `None` without AVX2 or AVX-512.
/// (Filters packed for one size serve any other: [`convolve`] takes the tiling they were
/// packed for.)
pub fn pack_filters(w: &[f32], m: usize, c: usize, out: [usize; 2]) -> Option<Vec<PackedA>> {
    pack_filters_for(w, m, c, out, &KernelOptions::default())
}

/// [`pack_filters`] for the instruction set `options` choose (`None` where they leave none).
pub fn pack_filters_for(
    w: &[f32],
    m: usize,
    c: usize,
    out: [usize; 2],
    options: &KernelOptions,
) -> Option<Vec<PackedA>> {
    let isa = isa_for(options)?;
    match wide(out) {
        true => pack::<transform::F4x4>(w, m, c, isa),
        false => pack::<transform::F2x2>(w, m, c, isa),
    }
}

/// [`pack_filters`] for tiling `T` on `isa`.
fn pack<T: Tiling>(w: &[f32], m: usize, c: usize, isa: Isa) -> Option<Vec<PackedA>> {
    if w.len() < m * c * 9 {
        return None;
    }
    let mut u = vec![0f32; T::PRODUCTS * m * c];
    let mut tile = vec![0f32; T::PRODUCTS];
    for (pair, g) in w.chunks_exact(9).take(m * c).enumerate() {
        T::filter(g, &mut tile);
        for (xi, &v) in tile.iter().enumerate() {
            u[xi * m * c + pair] = v;
        }
    }
    Some(
        u.chunks_exact(m * c)
            .map(|u| PackedA::with_isa(u, m, c, isa))
            .collect(),
    )
}

/// `y = conv(x, w) + bias`, then `epilogue`, for one image, with `filters` from
/// [`pack_filters`]: `y` in blocks of 16 channels `[M / 16][OH][OW][16]` when
/// `blocked_output`, else in planes. `y` may start uninitialized; every element is written.
///
/// # Panics
/// If the filters are not 36 or 16 packings for this CPU, the channels are not whole blocks of
/// 16, or an operand is too short (internal contracts: callers check [`applies`] and the shapes).
pub fn convolve(
    filters: &[PackedA],
    image: &WinogradImage<'_>,
    y: &mut [MaybeUninit<f32>],
    blocked_output: bool,
    bias: Option<&[f32]>,
    epilogue: Option<&Epilogue<'_, f32>>,
) {
    match filters.len() {
        16 => convolve_in::<transform::F2x2>(filters, image, y, blocked_output, bias, epilogue),
        _ => convolve_in::<transform::F4x4>(filters, image, y, blocked_output, bias, epilogue),
    }
}

/// [`convolve`] in tiling `T`.
fn convolve_in<T: Tiling>(
    filters: &[PackedA],
    image: &WinogradImage<'_>,
    y: &mut [MaybeUninit<f32>],
    blocked_output: bool,
    bias: Option<&[f32]>,
    epilogue: Option<&Epilogue<'_, f32>>,
) {
    let (c, m) = (image.channels, filters[0].rows());
    let [oh, ow] = image.out;
    assert_eq!(
        filters.len(),
        T::PRODUCTS,
        "winograd::convolve: 36 or 16 filters"
    );
    check_operands(
        "winograd::convolve",
        filters,
        image,
        y.len(),
        bias,
        epilogue,
    );
    if oh * ow == 0 {
        return;
    }
    let (th, tw) = (oh.div_ceil(T::OUTPUT), ow.div_ceil(T::OUTPUT));
    let per_row = T::PRODUCTS * tw * (c + m);
    // Each block streams all the transformed filters once: no block smaller than they are.
    let filters_floats = T::PRODUCTS * c * m;
    let blocks = (th * per_row)
        .div_ceil(BLOCK_FLOATS.max(filters_floats))
        .max(1);
    let rows_per_block = th
        .div_ceil(blocks)
        .max(BLOCK_TILES.div_ceil(tw))
        .clamp(1, th);
    let mut zero_bias = Vec::new();
    let bias = bias.unwrap_or_else(|| {
        zero_bias.resize(m, 0.0);
        &zero_bias
    });
    let y = SendPtr(y.as_mut_ptr().cast::<f32>());
    let most = rows_per_block * tw * T::PRODUCTS;
    with_scratch(most * c, most * m, |v, products| {
        for r0 in (0..th).step_by(rows_per_block) {
            let rows = (r0, (r0 + rows_per_block).min(th));
            let tiles = (rows.1 - rows.0) * tw;
            let (v, products) = (
                &mut v[..tiles * T::PRODUCTS * c],
                &mut products[..tiles * T::PRODUCTS * m],
            );
            transform_inputs::<T>(image, rows, tw, v, filters[0].isa());
            multiply(filters, v, products, tiles);
            let out = Outputs {
                isa: filters[0].isa(),
                y,
                m,
                out: image.out,
                blocked: blocked_output,
                bias,
                epilogue,
            };
            out.transform::<T>(products, rows, tw);
        }
    });
}

/// Asserts what a Winograd convolution's caller promises (`what` names it): filters packed
/// for one instruction set this CPU has, all `m × c` with `c` the image's channels, whole
/// blocks of 16 channels in and out, and the image, `y_len` outputs, the bias and the
/// epilogue's residual long enough.
fn check_operands(
    what: &str,
    filters: &[PackedA],
    image: &WinogradImage<'_>,
    y_len: usize,
    bias: Option<&[f32]>,
    epilogue: Option<&Epilogue<'_, f32>>,
) {
    let (c, m) = (image.channels, filters[0].rows());
    let ([h, w], [oh, ow]) = (image.size, image.out);
    let isa = filters[0].isa();
    assert!(
        cfg!(target_arch = "x86_64")
            && Isa::supported().contains(&isa)
            && filters
                .iter()
                .all(|f| f.isa() == isa && f.rows() == m && f.cols() == c)
            && c.is_multiple_of(LANES)
            && m.is_multiple_of(LANES),
        "{what}: filters packed for this CPU, whole blocks of channels"
    );
    assert!(
        image.x.len() >= c * h * w
            && y_len >= m * oh * ow
            && bias.is_none_or(|b| b.len() >= m)
            && epilogue
                .and_then(|e| e.add)
                .is_none_or(|z| z.len() >= m * oh * ow),
        "{what}: operands too short"
    );
}

/// The products `M_ξ = V_ξ · U_ξᵀ` of `tiles` transformed input tiles (`v[ξ][t][c]`) into
/// `products[ξ][t][m]`, each product a task of its own.
fn multiply(filters: &[PackedA], v: &[f32], products: &mut [f32], tiles: usize) {
    let (c, m) = (filters[0].cols(), filters[0].rows());
    products
        .par_chunks_mut(tiles * m)
        .zip(v.par_chunks(tiles * c))
        .zip(filters)
        .for_each(|((p, v), f)| {
            // SAFETY: `MaybeUninit<f32>` has `f32`'s layout.
            let p = unsafe { &mut *(p as *mut [f32] as *mut [MaybeUninit<f32>]) };
            packed_gemm::serially(|| f.multiply_token_major(v, tiles, p, None));
        });
}

thread_local! {
    /// The calling thread's transformed inputs and products, reused across calls (fresh
    /// pages would fault in on every run).
    static SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<f32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Runs `f` on the calling thread's buffers for transformed inputs and products, at least
/// `inputs` and `products` floats long (fresh ones when a convolution on this thread already
/// holds them).
fn with_scratch<R>(
    inputs: usize,
    products: usize,
    f: impl FnOnce(&mut [f32], &mut [f32]) -> R,
) -> R {
    SCRATCH.with(|cell| {
        let mut fresh = (Vec::new(), Vec::new());
        let mut kept = cell.try_borrow_mut();
        let (v, p) = match kept.as_deref_mut() {
            Ok(kept) => kept,
            Err(_) => &mut fresh,
        };
        // Grown, never shrunk: `resize` down and back up would zero the regrown part on
        // every call that follows a smaller convolution.
        for (buffer, len) in [(&mut *v, inputs), (&mut *p, products)] {
            if buffer.len() < len {
                buffer.resize(len, 0.0);
            }
        }
        f(v, p)
    })
}

/// Every (tile row, channel block) of tile rows `rows.0..rows.1` and `blocks` channel
/// blocks, as parallel tasks.
fn row_blocks(
    rows: (usize, usize),
    blocks: usize,
) -> impl IndexedParallelIterator<Item = (usize, usize)> {
    (0..(rows.1 - rows.0) * blocks)
        .into_par_iter()
        .map(move |u| (rows.0 + u / blocks, u % blocks))
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests;
