//! `ConvTranspose` (opset 1+; implemented from 7): GEMM (`W^T X`) followed by `col2im`, with
//! groups, strides, dilations, pads, `output_padding`, `output_shape` and `auto_pad`. In `f32`
//! on a CPU with AVX2 or AVX-512 the product is the packed GEMM's, with `W^T` packed once while
//! the weights stay the same tensor (Mask R-CNN's mask head runs one per detection).

use std::borrow::Cow;
use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::common::{Real, contiguous, min_opset, narrow, output, same_dtype, widen};
use super::gemm_op::transpose;
use super::im2col::{Sweep, col2im};
use super::matrix::{Layout, gemm};
use super::packed_gemm::{BSource, PackedA};
use super::packed_weights::WeightCache;
use super::spatial::{AutoPad, WindowAttrs};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{DType, Tensor};

/// A built `ConvTranspose`.
#[derive(Debug)]
pub struct ConvTranspose {
    window: WindowAttrs,
    group: usize,
    output_padding: Option<Vec<usize>>,
    output_shape: Option<Vec<usize>>,
    /// `W^T` of every group, packed for the `f32` product.
    packed: WeightCache,
}

fn nonneg(spec: &NodeSpec<'_>, name: &str) -> Result<Option<Vec<usize>>> {
    let Some(v) = spec.attrs.opt_ints(name)? else {
        return Ok(None);
    };
    v.iter()
        .map(|&x| usize::try_from(x))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
        .map_err(|_| KernelError::BadAttribute {
            name: name.into(),
            reason: format!("values must be >= 0, got {v:?}"),
        })
}

/// Builds `ConvTranspose`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 1, "ConvTranspose")?;
    spec.attrs.only(&[
        "auto_pad",
        "dilations",
        "group",
        "kernel_shape",
        "output_padding",
        "output_shape",
        "pads",
        "strides",
    ])?;
    Ok(Box::new(parse(spec)?))
}

fn parse(spec: &NodeSpec<'_>) -> Result<ConvTranspose> {
    Ok(ConvTranspose {
        window: WindowAttrs::parse(spec.attrs)?,
        group: super::conv::group_attr(spec.attrs)?,
        output_padding: nonneg(spec, "output_padding")?,
        output_shape: nonneg(spec, "output_shape")?,
        packed: WeightCache::new(spec.options),
    })
}

/// `col = W_gᵀ · X_g` for group `g`: `(g, X_g, col)`.
type Product<'a, T> = dyn Fn(usize, &[T], &mut [T]) -> Result<()> + Sync + 'a;

/// [`Product`] through the generic matrix core, for weights `ws` of shape `wshape`.
fn generic_product<T: Real>(
    ws: &[T],
    wshape: &[usize],
    group: usize,
    g: usize,
    xg: &[T],
    col: &mut [T],
) -> Result<()> {
    let cg = wshape[0] / group;
    let rows = wshape[1..].iter().product::<usize>();
    let positions = xg.len() / cg.max(1);
    gemm(
        T::ONE,
        &ws[g * cg * rows..(g + 1) * cg * rows],
        Layout::row_major(cg, rows).t(),
        xg,
        Layout::row_major(cg, positions),
        T::ZERO,
        col,
        Layout::row_major(rows, positions),
    )
}

/// True when every output position of `sweep` is one kernel tap of one input position: a 2-D
/// transposed convolution whose strides equal its kernel, without dilation, padding or
/// `output_padding` (Mask R-CNN's 2×2, stride-2 upsampling).
fn tiles_exactly(sweep: &Sweep<'_>) -> bool {
    sweep.kernel.len() == 2
        && sweep.strides == sweep.kernel
        && sweep.dilations.iter().all(|&d| d == 1)
        && sweep.pad_begin.iter().all(|&p| p == 0)
        && (0..2).all(|i| sweep.image[i] == sweep.grid[i] * sweep.kernel[i])
}

/// Writes `col` (`channels · kh · kw` rows of `ih · iw` columns) into the `channels` output
/// planes of `y` for a sweep that [`tiles_exactly`]: output `(y·kh + u, x·kw + v)` of channel
/// `c` is row `(c, u, v)`, column `(y, x)`, plus `bias[c]`.
fn place_tiles<T: Real>(col: &[T], sweep: &Sweep<'_>, bias: Option<&[T]>, y: &mut [T]) {
    let ([ih, iw], [kh, kw]) = (
        [sweep.grid[0], sweep.grid[1]],
        [sweep.kernel[0], sweep.kernel[1]],
    );
    let (glen, ow) = (ih * iw, iw * kw);
    if glen == 0 {
        return;
    }
    y.par_chunks_mut(glen * kh * kw)
        .enumerate()
        .with_min_len(8)
        .for_each(|(c, plane)| {
            let b = bias.map_or(T::ZERO, |bs| bs[c]);
            for (row, out) in plane.chunks_exact_mut(ow).enumerate() {
                let (gy, u) = (row / kh, row % kh);
                let src = |v: usize| &col[((c * kh + u) * kw + v) * glen + gy * iw..][..iw];
                if kw == 2 {
                    // Two taps interleaved, in one pass that vectorizes.
                    let pairs = out.chunks_exact_mut(2).zip(src(0).iter().zip(src(1)));
                    for (pair, (&left, &right)) in pairs {
                        pair[0] = left + b;
                        pair[1] = right + b;
                    }
                    continue;
                }
                for v in 0..kw {
                    for (x, &value) in src(v).iter().enumerate() {
                        out[x * kw + v] = value + b;
                    }
                }
            }
        });
}

/// Output extent, and the padding cut from the begin and the end of the full result, per
/// spatial dim.
fn geometry(
    ct: &ConvTranspose,
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
) -> Result<(Vec<usize>, Vec<i64>, Vec<i64>)> {
    let n = input.len();
    let out_pad = ct.output_padding.clone().unwrap_or_else(|| vec![0; n]);
    if out_pad.len() != n {
        return Err(KernelError::BadAttribute {
            name: "output_padding".into(),
            reason: format!("has {} values, expected {n}", out_pad.len()),
        });
    }
    // Size of the full (unpadded) result along each dim (an empty kernel or a size past
    // `i64` is an error, not an overflow).
    let full: Vec<i64> = (0..n)
        .map(|i| {
            let k = kernel[i].checked_sub(1)?;
            strides[i]
                .checked_mul(input[i].max(1) - 1)?
                .checked_add(out_pad[i])?
                .checked_add(k.checked_mul(dilations[i])?)?
                .checked_add(1)
                .and_then(|v| i64::try_from(v).ok())
        })
        .collect::<Option<_>>()
        .ok_or_else(|| {
            KernelError::Shape(format!(
                "ConvTranspose: kernel {kernel:?} (strides {strides:?}, dilations \
                 {dilations:?}) on {input:?} has no output size"
            ))
        })?;
    let target: Option<Vec<usize>> = match (&ct.output_shape, ct.window.auto_pad) {
        (Some(s), _) if s.len() == n => Some(s.clone()),
        (Some(s), _) if s.len() == n + 2 => Some(s[2..].to_vec()),
        (Some(s), _) => {
            return Err(KernelError::BadAttribute {
                name: "output_shape".into(),
                reason: format!("has {} values, expected {n}", s.len()),
            });
        }
        (None, AutoPad::SameUpper | AutoPad::SameLower) => Some(
            (0..n)
                .map(|i| input[i].checked_mul(strides[i]))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    KernelError::Shape(format!(
                        "ConvTranspose: {input:?} times strides {strides:?} overflows"
                    ))
                })?,
        ),
        (None, _) => None,
    };
    if let Some(target) = target {
        let upper = ct.window.auto_pad == AutoPad::SameUpper;
        // The padding that trims (or, negative, extends) the full result to the target.
        let totals: Vec<i64> = (0..n)
            .map(|i| {
                i64::try_from(target[i])
                    .ok()
                    .and_then(|t| full[i].checked_sub(t))
            })
            .collect::<Option<_>>()
            .ok_or_else(|| {
                KernelError::Shape(format!("ConvTranspose output size {target:?} is too large"))
            })?;
        let begin: Vec<i64> = totals
            .iter()
            .map(|&total| {
                let half = total.div_euclid(2);
                if upper { half } else { total - half }
            })
            .collect();
        let end = (0..n).map(|i| totals[i] - begin[i]).collect();
        return Ok((target, begin, end));
    }
    let pads = match (&ct.window.pads, ct.window.auto_pad) {
        (Some(p), AutoPad::NotSet) if p.len() == 2 * n => p.clone(),
        (Some(p), AutoPad::NotSet) => {
            return Err(KernelError::BadAttribute {
                name: "pads".into(),
                reason: format!("has {} values, expected {}", p.len(), 2 * n),
            });
        }
        _ => vec![0; 2 * n],
    };
    let pads: Vec<i64> = pads
        .iter()
        .map(|&p| i64::try_from(p).ok())
        .collect::<Option<_>>()
        .ok_or_else(|| KernelError::BadAttribute {
            name: "pads".into(),
            reason: format!("{pads:?} has a value past i64"),
        })?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let o = pads[i]
            .checked_add(pads[i + n])
            .and_then(|p| full[i].checked_sub(p))
            .filter(|&o| o > 0)
            .ok_or_else(|| {
                KernelError::Shape(format!(
                    "ConvTranspose output dim {i} would be {} - {} - {} (pads too large)",
                    full[i],
                    pads[i],
                    pads[i + n]
                ))
            })?;
        out.push(o as usize);
    }
    Ok((out, pads[..n].to_vec(), pads[n..].to_vec()))
}

impl Kernel for ConvTranspose {
    fn choice(&self) -> Option<String> {
        super::packed_weights::choice(&self.packed, None)
    }

    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let dtype = same_dtype(inputs)?;
        let x = widen(input(inputs, 0)?, 0)?;
        let w = widen(input(inputs, 1)?, 1)?;
        let b = opt_input(inputs, 2).map(|b| widen(b, 2)).transpose()?;
        let y = match x {
            Tensor::F64(_) => {
                let ws = contiguous::<f64>(&w)?;
                self.typed::<f64>(&x, &w, b.as_ref(), &|gi, xg, col| {
                    generic_product(&ws, w.shape(), self.group, gi, xg, col)
                })?
            }
            _ => {
                let ws = contiguous::<f32>(&w)?;
                let cacheable = input(inputs, 1)?.dtype() == DType::F32;
                let packed = self.packed_weights(&w, &ws, cacheable);
                self.typed::<f32>(&x, &w, b.as_ref(), &|gi, xg, col| match &packed {
                    Some(p) => {
                        let n = xg.len() / p[gi].cols().max(1);
                        p[gi].multiply(BSource::Dense { data: xg, ld: n }, n, col, n, None, None);
                        Ok(())
                    }
                    None => generic_product(&ws, w.shape(), self.group, gi, xg, col),
                })?
            }
        };
        Ok(vec![narrow(y, dtype)?])
    }
}

/// Where a `ConvTranspose`'s windows fall for one input size: what another device's kernel
/// needs to compute the same operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransposedWindows {
    /// Stride per spatial dim.
    pub strides: Vec<usize>,
    /// Dilation per spatial dim.
    pub dilations: Vec<usize>,
    /// Output extent per spatial dim.
    pub out: Vec<usize>,
    /// Padding cut from the start of the full (unpadded) result per spatial dim.
    pub pad_begin: Vec<i64>,
    /// Padding cut from its end (with `output_padding` or `output_shape`, not `pad_begin`).
    pub pad_end: Vec<i64>,
}

/// The windows of `ConvTranspose` node `spec` for input spatial dims `image` and weights of
/// spatial shape `kernel`, and its `group`.
pub fn transposed_windows(
    spec: &NodeSpec<'_>,
    image: &[usize],
    kernel: &[usize],
) -> Result<(TransposedWindows, usize)> {
    let built = parse(spec)?;
    Ok((built.windows(image, kernel)?, built.group))
}

impl ConvTranspose {
    /// Checks the window attributes against `kernel` and resolves them for `image`.
    fn windows(&self, image: &[usize], kernel: &[usize]) -> Result<TransposedWindows> {
        let n = kernel.len();
        if let Some(k) = &self.window.kernel_shape
            && k.as_slice() != kernel
        {
            return Err(KernelError::Shape(format!(
                "kernel_shape {k:?} differs from the weights' spatial shape {kernel:?}"
            )));
        }
        let strides = self.window.strides.clone().unwrap_or_else(|| vec![1; n]);
        let dilations = self.window.dilations.clone().unwrap_or_else(|| vec![1; n]);
        if strides.len() != n || dilations.len() != n {
            return Err(KernelError::BadAttribute {
                name: "strides/dilations".into(),
                reason: format!("expected {n} values"),
            });
        }
        let (out, pad_begin, pad_end) = geometry(self, image, kernel, &strides, &dilations)?;
        Ok(TransposedWindows {
            strides,
            dilations,
            out,
            pad_begin,
            pad_end,
        })
    }

    /// The transposed convolution in `T`, with `product(g, X_g, col)` writing
    /// `col = W_gᵀ · X_g` for group `g` (`X_g`: `cg × positions`, `col`: `mg·klen × positions`).
    fn typed<T: Real>(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        product: &Product<'_, T>,
    ) -> Result<Tensor> {
        let (xd, wd) = (x.shape(), w.shape());
        if xd.len() < 3 || wd.len() != xd.len() {
            return Err(KernelError::Shape(format!(
                "ConvTranspose needs X of rank >= 3 and W of the same rank, got {xd:?}, {wd:?}"
            )));
        }
        let g = self.group;
        let (batch, in_ch) = (xd[0], xd[1]);
        if wd[0] != in_ch || in_ch % g != 0 {
            return Err(KernelError::Shape(format!(
                "ConvTranspose channels: X has {in_ch}, W is {wd:?}, group {g}"
            )));
        }
        let (cg, mg) = (in_ch / g, wd[1]);
        let out_ch = mg * g;
        if let Some(b) = b
            && b.shape() != [out_ch]
        {
            return Err(KernelError::Shape(format!(
                "ConvTranspose bias shape {:?}, expected [{out_ch}]",
                b.shape()
            )));
        }
        let kernel = &wd[2..];
        let image = &xd[2..];
        let TransposedWindows {
            strides,
            dilations,
            out,
            pad_begin,
            ..
        } = self.windows(image, kernel)?;
        let mut shape = vec![batch, out_ch];
        shape.extend_from_slice(&out);
        let element = std::mem::size_of::<T>();
        let len = crate::limits::checked_elements(&shape, element)?;
        let ilen: usize = image.iter().product();
        let olen: usize = out.iter().product();
        let klen: usize = kernel.iter().product();
        // Each task's column buffer holds one group's products for one image.
        crate::limits::checked_elements(&[mg, klen, ilen], element)?;
        let xs = contiguous::<T>(x)?;
        let bias = b.map(contiguous::<T>).transpose()?;
        let sweep = Sweep {
            image: &out,
            grid: image,
            kernel,
            strides: &strides,
            dilations: &dilations,
            pad_begin: &pad_begin,
        };
        let tiled = tiles_exactly(&sweep);
        let mut y = if tiled {
            // Every output is written once, from one column value.
            crate::output_buffer::overwritable(0, len)
        } else {
            // The output starts as the bias (or zeros), and col2im adds each product into it.
            crate::output_buffer::build(0, len, |y| {
                y.par_chunks_mut(olen.max(1))
                    .enumerate()
                    .for_each(|(r, plane)| {
                        let start = bias.as_ref().map_or(T::ZERO, |bs| bs[r % out_ch]);
                        plane.iter_mut().for_each(|v| *v = MaybeUninit::new(start));
                    })
            })
        };
        // Images in parallel (Mask R-CNN's mask head has one per detection), each through a
        // column buffer of its task's own.
        y.par_chunks_mut((out_ch * olen).max(1))
            .zip(xs.par_chunks((in_ch * ilen).max(1)))
            .try_for_each_init(
                || vec![T::ZERO; mg * klen * ilen],
                |col, (yn, xn)| {
                    for gi in 0..g {
                        product(gi, &xn[gi * cg * ilen..(gi + 1) * cg * ilen], col)?;
                        let yg = &mut yn[gi * mg * olen..(gi + 1) * mg * olen];
                        if tiled {
                            let bias = bias.as_ref().map(|bs| &bs[gi * mg..(gi + 1) * mg]);
                            place_tiles(col, &sweep, bias, yg);
                        } else {
                            col2im(col, mg, &sweep, yg);
                        }
                    }
                    Ok::<(), KernelError>(())
                },
            )?;
        output(&shape, y)
    }

    /// `W_gᵀ` (`mg·klen × cg`, from `W_g` of `cg × mg·klen`) of every group packed for
    /// [`PackedA`] (`ws`: `w`'s values); cached while `w` stays the same tensor, when
    /// `cacheable`. `None` without the packed GEMM (no AVX2/AVX-512).
    fn packed_weights(
        &self,
        w: &Tensor,
        ws: &[f32],
        cacheable: bool,
    ) -> Option<Cow<'_, [PackedA]>> {
        let g = self.group;
        let wd = w.shape();
        if wd.len() < 3 || wd[0] == 0 || !wd[0].is_multiple_of(g) {
            return None; // `typed` reports the bad shape
        }
        let (cg, rows) = (wd[0] / g, ws.len() / wd[0]);
        self.packed.get_or_pack(w, cacheable, || {
            (0..g)
                .map(|gi| {
                    let wg = &ws[gi * cg * rows..(gi + 1) * cg * rows];
                    PackedA::with_options(&transpose(wg, cg, rows), rows, cg, self.packed.options())
                })
                .collect()
        })
    }
}
