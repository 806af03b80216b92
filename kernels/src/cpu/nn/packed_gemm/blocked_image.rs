//! An image in blocks of 16 channels (NCHW16c: `[channels / 16][height][width][16]`) as the
//! operand of a product in position tiles: its borders padded with zeros when the windows
//! reach past the image (a copy), read where it is otherwise, and the tables that find any
//! window cell of any output position in it. Each broadcast has its own address, so strides
//! and dilations need no phase planes here.

use std::cell::RefCell;

use rayon::prelude::*;

use super::source::Image2d;

/// Channels per block.
const BLOCK: usize = 16;

/// A blocked image ready for position tiles.
pub(super) struct BlockedImage<'a> {
    pub(super) data: &'a [f32],
    /// Offset of each depth row `(c, u, v)` from a window's start, in the order asked for.
    pub(super) offsets: Vec<usize>,
    /// Each output position's window start, row by row; empty when `cells`.
    pub(super) starts: Vec<usize>,
    /// `Some(count)` when the window is 1×1 and the `count` output positions are the image's
    /// first cells in order (position `q`'s window at `16·q`): then `starts` is not listed
    /// (on squeezenet's 1×1 convolutions of 16 channels at 55², listing, checking and tiling
    /// the starts took a tenth of the product).
    pub(super) cells: Option<usize>,
}

thread_local! {
    /// The padded or gathered copy, reused across calls (fresh pages would fault in).
    static PADDED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on `im` (`channels` of them, `im.img` blocked, its last block padded when
/// `channels` is not a multiple of 16) as a [`BlockedImage`] whose depth rows are in the
/// weights' order `(c, u, v)`, or, `by_taps` (`channels` a multiple of 16), tap by tap within
/// each block (`(c / 16, u, v, c % 16)`): as it is when no window reaches
/// past it, else copied with zero borders into the calling thread's buffer. A strided 1×1
/// window without padding (resnet50's downsampling) reads only every `stride`-th cell: those
/// are gathered side by side into the buffer instead, so that its output positions are
/// adjacent cells, which the cell tiles take (on AVX2 the general tile ran resnet50's three
/// at 1.45–1.53× ORT's time, one thread). The depth rows are the live channels' only.
pub(super) fn with_blocked_image<R>(
    im: &Image2d<'_>,
    channels: usize,
    by_taps: bool,
    f: impl FnOnce(&BlockedImage<'_>) -> R,
) -> R {
    let ([h, w], [oh, ow], [kh, kw]) = (im.size, im.out, im.kernel);
    let ([sh, sw], [dh, dw], [top, left]) = (im.strides, im.dilations, im.pads);
    // The padded extent the windows reach, at least the image's.
    let height = ((oh - 1) * sh + (kh - 1) * dh + 1).max(h + top);
    let width = ((ow - 1) * sw + (kw - 1) * dw + 1).max(w + left);
    let blocks = channels.div_ceil(BLOCK);
    let run = |data: &[f32], [height, width]: [usize; 2], [sh, sw]: [usize; 2]| {
        let plane = height * width * BLOCK;
        let taps: Vec<usize> = (0..kh * kw)
            .map(|t| ((t / kw) * dh * width + (t % kw) * dw) * BLOCK)
            .collect();
        let offsets: Vec<usize> = match by_taps {
            true => (0..blocks)
                .flat_map(|b| {
                    let taps = &taps;
                    taps.iter()
                        .flat_map(move |&t| (0..BLOCK).map(move |j| b * plane + t + j))
                })
                .collect(),
            false => (0..channels)
                .flat_map(|c| {
                    let base = (c / BLOCK) * plane + c % BLOCK;
                    taps.iter().map(move |&t| base + t)
                })
                .collect(),
        };
        // Position (y, x)'s window at `(y·sh·width + x·sw)·16`: the `y·ow + x`-th cell when
        // `sw` is 1 and each output row follows the last (`sh·width == ow`, or one row).
        let adjacent = kh * kw == 1 && sw == 1 && (oh == 1 || sh * width == ow);
        let mut starts = Vec::with_capacity(if adjacent { 0 } else { oh * ow });
        if !adjacent {
            for y in 0..oh {
                starts.extend((0..ow).map(|x| (y * sh * width + x * sw) * BLOCK));
            }
        }
        f(&BlockedImage {
            data,
            offsets,
            starts,
            cells: adjacent.then_some(oh * ow),
        })
    };
    let img = &im.img[..blocks * h * w * BLOCK];
    let strided_cells = [kh, kw] == [1, 1] && [sh, sw] != [1, 1] && [top, left] == [0, 0];
    let block = h * w * BLOCK;
    if strided_cells {
        let gather = |src: &[f32], out: &mut [f32]| gather_cells(src, out, w, [ow, sh, sw]);
        return with_copy(img, block, oh * ow * BLOCK, gather, |data| {
            run(data, [oh, ow], [1, 1])
        });
    }
    if height == h && width == w {
        return run(img, [height, width], [sh, sw]);
    }
    let pad = |src: &[f32], out: &mut [f32]| pad_block(src, out, [h, w], [width, top, left]);
    with_copy(img, block, height * width * BLOCK, pad, |data| {
        run(data, [height, width], [sh, sw])
    })
}

/// Runs `f` on a copy of `img` made in the calling thread's buffer, `block` floats of `img` at
/// a time, by `copy` into `plane` floats each.
fn with_copy<R>(
    img: &[f32],
    block: usize,
    plane: usize,
    copy: impl Fn(&[f32], &mut [f32]) + Sync,
    f: impl FnOnce(&[f32]) -> R,
) -> R {
    let fill = |buffer: &mut Vec<f32>| {
        let blocks = img.len() / block;
        buffer.resize(blocks * plane, 0.0);
        let out = &mut buffer[..blocks * plane];
        out.par_chunks_mut(plane)
            .zip(img.par_chunks(block))
            .with_min_len(4)
            .for_each(|(out, src)| copy(src, out));
        f(out)
    };
    PADDED.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => fill(&mut buffer),
        Err(_) => fill(&mut Vec::new()),
    })
}

/// Copies one block of channels (`h × w` positions of 16) into `out`, rows `width` positions
/// long, at row `top` and column `left`; every other cell of `out` becomes zero.
fn pad_block(src: &[f32], out: &mut [f32], [h, w]: [usize; 2], [width, top, left]: [usize; 3]) {
    let row = width * BLOCK;
    for (y, dst) in out.chunks_exact_mut(row).enumerate() {
        if y < top || y >= top + h {
            dst.fill(0.0);
            continue;
        }
        let line = &src[(y - top) * w * BLOCK..][..w * BLOCK];
        dst[..left * BLOCK].fill(0.0);
        dst[left * BLOCK..(left + w) * BLOCK].copy_from_slice(line);
        dst[(left + w) * BLOCK..].fill(0.0);
    }
}

/// Copies every `sh`-th row's every `sw`-th cell of one block of channels (rows `w` cells
/// long) into `out`, rows `ow` cells long, as many rows as `out` holds.
fn gather_cells(src: &[f32], out: &mut [f32], w: usize, [ow, sh, sw]: [usize; 3]) {
    for (y, dst) in out.chunks_exact_mut(ow * BLOCK).enumerate() {
        let row = &src[y * sh * w * BLOCK..];
        for (x, cell) in dst.chunks_exact_mut(BLOCK).enumerate() {
            cell.copy_from_slice(&row[x * sw * BLOCK..][..BLOCK]);
        }
    }
}
