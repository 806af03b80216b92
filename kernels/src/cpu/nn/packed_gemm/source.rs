//! Where the packed GEMM reads its right operand `B` from, and how a `KC × NC` block of it is
//! packed into `KC × NR` column panels: a dense matrix, or — for a 2-D convolution — the im2col
//! matrix of an image, gathered straight from the image so that the column matrix is never
//! written out whole.

use crate::cpu::transpose_block::transpose_block;

/// The right operand `B` (`k × n`).
#[derive(Debug, Clone, Copy)]
pub enum BSource<'a> {
    /// A dense row-major matrix with row stride `ld`.
    Dense {
        /// The values.
        data: &'a [f32],
        /// Distance between rows, ≥ `n`.
        ld: usize,
    },
    /// The transpose of a dense row-major `n × k` matrix with row stride `ld` (≥ `k`): `B`'s
    /// element `(p, j)` is `data[j · ld + p]` (a `Gemm` input `X` of shape `(M, K)`, read as `Xᵀ`).
    Transposed {
        /// The values.
        data: &'a [f32],
        /// Distance between rows of `data`, ≥ `k`.
        ld: usize,
    },
    /// The im2col matrix of a 2-D image.
    Image(&'a Image2d<'a>),
}

/// A `channels × height × width` image seen as its im2col matrix: row `(c, u, v)` (channel, then
/// kernel offsets), column `(i, j)` (output position) holds
/// `img[c, i·stride_h − pad_h + u·dilation_h, j·stride_w − pad_w + v·dilation_w]`, zero outside.
#[derive(Debug, Clone, Copy)]
pub struct Image2d<'a> {
    /// The image, `channels · height · width` values.
    pub img: &'a [f32],
    /// Image height and width.
    pub size: [usize; 2],
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Padding before (top, left).
    pub pads: [usize; 2],
    /// Output height and width.
    pub out: [usize; 2],
}

impl BSource<'_> {
    /// Panics (an internal contract) unless the source holds a `k × n` matrix.
    pub(super) fn check(&self, k: usize, n: usize) {
        match self {
            BSource::Dense { data, ld } => {
                assert!(*ld >= n, "BSource: stride {ld} below n {n}");
                assert!(
                    k == 0 || data.len() >= (k - 1) * ld + n,
                    "BSource: too short"
                );
            }
            BSource::Transposed { data, ld } => {
                assert!(*ld >= k, "BSource: stride {ld} below k {k}");
                assert!(
                    n == 0 || data.len() >= (n - 1) * ld + k,
                    "BSource: too short"
                );
            }
            BSource::Image(im) => {
                let taps = im.kernel[0] * im.kernel[1];
                assert!(
                    taps > 0 && k.is_multiple_of(taps),
                    "BSource: k {k} vs kernel"
                );
                assert_eq!(n, im.out[0] * im.out[1], "BSource: n vs output grid");
                assert!(
                    im.img.len() >= k / taps * im.size[0] * im.size[1],
                    "BSource: image"
                );
                assert!(im.strides.iter().chain(&im.dilations).all(|&s| s > 0));
            }
        }
    }

    /// Packs rows `pc..pc + kc`, columns `jc..jc + nc` into `kc × nr` column panels in `out`
    /// (zero padded on the right).
    pub(super) fn pack(
        &self,
        pc: usize,
        kc: usize,
        jc: usize,
        nc: usize,
        nr: usize,
        out: &mut [f32],
    ) {
        let panels = nc.div_ceil(nr);
        if let BSource::Transposed { data, ld } = self {
            return pack_transposed(data, *ld, (pc, kc), (jc, nc), nr, out);
        }
        // An image row is gathered once, whole, then cut into the panels.
        let mut row = match self {
            BSource::Image(_) => vec![0.0f32; nc],
            BSource::Dense { .. } | BSource::Transposed { .. } => Vec::new(),
        };
        for p in 0..kc {
            let src: &[f32] = match self {
                BSource::Dense { data, ld } => &data[(pc + p) * ld + jc..(pc + p) * ld + jc + nc],
                BSource::Image(im) => {
                    im.gather(pc + p, jc, &mut row);
                    &row
                }
                BSource::Transposed { .. } => unreachable!("packed above"),
            };
            for jp in 0..panels {
                let w = nr.min(nc - jp * nr);
                let at = (jp * kc + p) * nr;
                if w == nr {
                    copy_panel_row(&mut out[at..at + nr], &src[jp * nr..jp * nr + nr]);
                } else {
                    out[at..at + w].copy_from_slice(&src[jp * nr..jp * nr + w]);
                    out[at + w..at + nr].fill(0.0);
                }
            }
        }
    }
}

/// [`BSource::pack`] for [`BSource::Transposed`]: panel column `jj` is row `jc + jj` of `data`,
/// read along `pc..pc + kc`, so each panel is the transpose of a `nr × kc` block of `data`.
fn pack_transposed(
    data: &[f32],
    ld: usize,
    (pc, kc): (usize, usize),
    (jc, nc): (usize, usize),
    nr: usize,
    out: &mut [f32],
) {
    for (jp, panel) in out
        .chunks_exact_mut(kc * nr)
        .take(nc.div_ceil(nr))
        .enumerate()
    {
        let j0 = jc + jp * nr;
        let w = nr.min(jc + nc - j0);
        let block = &data[j0 * ld + pc..(j0 + w - 1) * ld + pc + kc];
        // SAFETY: the block's w rows of kc values (stride ld) lie in `block`, and the panel
        // holds kc rows of nr ≥ w values.
        unsafe {
            transpose_block(
                block.as_ptr().cast(),
                ld,
                w,
                kc,
                panel.as_mut_ptr().cast(),
                nr,
            )
        };
        if w < nr {
            for row in panel.chunks_exact_mut(nr) {
                row[w..].fill(0.0);
            }
        }
    }
}

/// `dst ← src` for one full panel row: a fixed-length copy for the micro-kernels' widths, which
/// the compiler turns into a few vector moves instead of a `memcpy` call per panel.
#[inline(always)]
fn copy_panel_row(dst: &mut [f32], src: &[f32]) {
    fn fixed<const N: usize>(dst: &mut [f32], src: &[f32]) {
        let (Ok(d), Ok(s)) = (<&mut [f32; N]>::try_from(dst), <&[f32; N]>::try_from(src)) else {
            unreachable!("copy_panel_row: both sides hold N values");
        };
        *d = *s;
    }
    match dst.len() {
        32 => fixed::<32>(dst, src),
        16 => fixed::<16>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

impl Image2d<'_> {
    /// Row `r` of the im2col matrix, columns `j0..j0 + dst.len()`.
    pub(super) fn gather(&self, r: usize, j0: usize, dst: &mut [f32]) {
        let [kh, kw] = self.kernel;
        let [h, w] = self.size;
        let (c, u, v) = (r / (kh * kw), (r / kw) % kh, r % kw);
        let plane = &self.img[c * h * w..(c + 1) * h * w];
        let ow = self.out[1];
        let mut t = 0;
        while t < dst.len() {
            let (i, j) = ((j0 + t) / ow, (j0 + t) % ow);
            let seg = (dst.len() - t).min(ow - j);
            let out = &mut dst[t..t + seg];
            t += seg;
            let y = (i * self.strides[0] + u * self.dilations[0]) as isize - self.pads[0] as isize;
            if y < 0 || y >= h as isize {
                out.fill(0.0);
                continue;
            }
            let row = &plane[y as usize * w..(y as usize + 1) * w];
            let x0 = (j * self.strides[1] + v * self.dilations[1]) as isize - self.pads[1] as isize;
            // Columns q with 0 ≤ x0 + q·step < w come from the row (every step-th value), the
            // rest is padding.
            let step = self.strides[1];
            let stride = step as isize;
            let lo = ((-x0).max(0) + stride - 1) / stride;
            let lo = lo.clamp(0, seg as isize) as usize;
            let hi = ((w as isize - x0 + stride - 1) / stride).clamp(lo as isize, seg as isize);
            let hi = hi as usize;
            out[..lo].fill(0.0);
            if hi > lo {
                let from = (x0 + lo as isize * stride) as usize;
                if step == 1 {
                    out[lo..hi].copy_from_slice(&row[from..from + hi - lo]);
                } else {
                    let taken = row[from..].iter().step_by(step);
                    out[lo..hi].iter_mut().zip(taken).for_each(|(o, &v)| *o = v);
                }
            }
            out[hi..].fill(0.0);
        }
    }
}
