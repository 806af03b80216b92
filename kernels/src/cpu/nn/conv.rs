//! `Conv` (opset 1+; implemented from 7): N-d convolution with groups, strides, dilations, pads
//! and `auto_pad`. Depthwise 1-d/2-d convolutions use a direct kernel, 1x1 unpadded unit-stride
//! convolutions a plain GEMM on the input, everything else `im2col` + GEMM. In `f32` the GEMM
//! is the packed one ([`PackedA`]) where the CPU has AVX2 or AVX-512: the weights are packed
//! the first time the kernel sees them and kept with the kernel while they stay the same
//! tensor (a model's constant weights: once per session).
//!
//! The same kernel computes `FusedConv` ([`super::fused_conv`]): an [`Epilogue`] (`+ Z`, then an
//! activation) finishes each output tile inside the packed GEMM, or each output plane right
//! after the product on the other paths.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::common::{Real, contiguous, min_opset, narrow, output, same_dtype, widen};
use super::depthwise::Depthwise;
use super::epilogue::{Activation, Epilogue};
use super::im2col::{Sweep, im2col};
use super::matrix::{Layout, gemm};
use super::packed_gemm::{self, BSource, Image2d, PackedA};
use super::packed_weights::WeightCache;
use super::spatial::{Geometry, WindowAttrs};
use super::winograd::{self, WinogradImage};
use crate::cpu::binary::arith::{ArithOp, arith_tensors};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{KernelOptions, Tensor, output_buffer};

/// A built `Conv`.
#[derive(Debug)]
pub struct Conv {
    window: WindowAttrs,
    group: usize,
    packed: WeightCache,
    /// The filters transformed for Winograd, for the 3×3 convolutions it takes.
    winograd: WeightCache,
}

/// `Conv`'s attributes (the same on every device).
pub const ATTRIBUTES: &[&str] = &[
    "auto_pad",
    "dilations",
    "group",
    "kernel_shape",
    "pads",
    "strides",
];

/// Builds `Conv`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 1, "Conv")?;
    spec.attrs.only(ATTRIBUTES)?;
    Ok(Box::new(Conv::parse(spec.attrs, spec.options)?))
}

/// The `group` attribute of a convolution (default 1), which must be positive.
pub(super) fn group_attr(attrs: &crate::Attributes) -> Result<usize> {
    let group = attrs.int("group", 1)?;
    usize::try_from(group)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| KernelError::BadAttribute {
            name: "group".into(),
            reason: format!("must be >= 1, got {group}"),
        })
}

impl Conv {
    /// A convolution with the [`ATTRIBUTES`] in `attrs` (others are the caller's to check),
    /// computed as `options` say.
    pub(super) fn parse(attrs: &crate::Attributes, options: KernelOptions) -> Result<Conv> {
        let group = group_attr(attrs)?;
        Ok(Conv {
            window: WindowAttrs::parse(attrs)?,
            group,
            packed: WeightCache::new(options),
            winograd: WeightCache::new(options),
        })
    }
}

/// Checked shapes of one convolution call.
struct Dims {
    batch: usize,
    in_ch: usize,
    out_ch: usize,
    group: usize,
    image: Vec<usize>,
    geo: Geometry,
}

impl Dims {
    /// The 2-D im2col geometry (image left empty) when the convolution is 2-D: the packed GEMM
    /// then reads its operand straight from the image (a pointwise one without any copy).
    fn image2d(&self) -> Option<Image2d<'static>> {
        let g = &self.geo;
        (self.image.len() == 2).then(|| Image2d {
            img: &[],
            size: [self.image[0], self.image[1]],
            kernel: [g.kernel[0], g.kernel[1]],
            strides: [g.strides[0], g.strides[1]],
            dilations: [g.dilations[0], g.dilations[1]],
            pads: [g.pad_begin[0], g.pad_begin[1]],
            out: [g.out[0], g.out[1]],
        })
    }

    /// The output's shape: `[batch, out_ch, out...]`.
    fn output_shape(&self) -> Vec<usize> {
        let mut shape = vec![self.batch, self.out_ch];
        shape.extend_from_slice(&self.geo.out);
        shape
    }

    /// `FusedConv`'s `Z`, widened, after checking that it has the output's shape and the
    /// inputs' element type (`dtype`).
    fn check_sum(&self, z: &Tensor, dtype: crate::DType) -> Result<Tensor> {
        if z.dtype() != dtype {
            return Err(KernelError::DTypeMismatch(format!(
                "Z is {:?}, X is {dtype:?}",
                z.dtype()
            )));
        }
        let want = self.output_shape();
        if z.shape() != want.as_slice() {
            return Err(KernelError::Shape(format!(
                "Z has shape {:?}, the convolution's output is {want:?}",
                z.shape()
            )));
        }
        widen(z, 3)
    }

    /// One input channel per group, 1-d or 2-d: the direct depthwise kernel. A convolution of
    /// a single input channel (`group` 1) takes it only for small filters: a long one (an STFT
    /// written as a 1-d convolution: 512 taps, 257 filters) is a GEMM of the filters with the
    /// im2col matrix, which the packed product runs tens of times faster than direct loops.
    fn is_depthwise(&self) -> bool {
        let taps: usize = self.geo.kernel.iter().product();
        self.in_ch / self.group == 1
            && self.group == self.in_ch
            && self.image.len() <= 2
            && (self.group > 1 || taps <= DIRECT_SINGLE_CHANNEL_TAPS)
    }
}

impl Conv {
    fn dims(&self, x: &[usize], w: &[usize], b: Option<&[usize]>) -> Result<Dims> {
        if x.len() < 3 || w.len() != x.len() {
            return Err(KernelError::Shape(format!(
                "Conv needs X of rank >= 3 and W of the same rank, got X {x:?}, W {w:?}"
            )));
        }
        let (batch, in_ch, out_ch, g) = (x[0], x[1], w[0], self.group);
        if in_ch != w[1] * g || out_ch % g != 0 {
            return Err(KernelError::Shape(format!(
                "Conv channels: X has {in_ch}, W is {w:?}, group {g}"
            )));
        }
        if let Some(b) = b
            && b != [out_ch]
        {
            return Err(KernelError::Shape(format!(
                "Conv bias shape {b:?}, expected [{out_ch}]"
            )));
        }
        let geo = self.window.resolve(&x[2..], Some(&w[2..]), false)?;
        Ok(Dims {
            batch,
            in_ch,
            out_ch,
            group: g,
            image: x[2..].to_vec(),
            geo,
        })
    }
}

impl Kernel for Conv {
    fn choice(&self) -> Option<String> {
        super::packed_weights::choice(&self.packed, Some(&self.winograd))
    }

    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        self.run_fused(inputs, None, Activation::Identity)
    }
}

impl Conv {
    /// `activation(conv(X, W) + B + Z)` for `inputs` = `[X, W, B?]` (B and Z optional, Z of
    /// the inputs' element type). A `Z` of the output's shape is added in the product's
    /// epilogue; one that broadcasts against the output (a residual `Add` whose shapes the
    /// graph could not prove equal) is added as `Add` does, after the convolution.
    pub(super) fn run_fused(
        &self,
        inputs: &[Option<&Tensor>],
        z: Option<&Tensor>,
        activation: Activation,
    ) -> Result<Vec<Tensor>> {
        let (x, w) = (input(inputs, 0)?, input(inputs, 1)?);
        let y_shape = self
            .dims(
                x.shape(),
                w.shape(),
                opt_input(inputs, 2).map(Tensor::shape),
            )?
            .output_shape();
        let Some(z) = z.filter(|z| z.shape() != y_shape) else {
            return Ok(vec![self.fused(inputs, z, activation)?]);
        };
        // Z broadcasts: the convolution, then the sum as `Add` computes it, then the activation.
        let sum = arith_tensors(
            ArithOp::Add,
            &self.fused(inputs, None, Activation::Identity)?,
            z,
        )?;
        let dtype = sum.dtype();
        let mut wide = widen(&sum, 3)?;
        drop(sum);
        match &mut wide {
            Tensor::F32(a) => activation.apply(output_slice(a)),
            Tensor::F64(a) => activation.apply(output_slice(a)),
            other => {
                return Err(KernelError::UnsupportedDType {
                    index: 3,
                    dtype: other.dtype(),
                });
            }
        }
        Ok(vec![narrow(wide, dtype)?])
    }

    /// [`Conv::run_fused`] with `Z` (when given) of the output's shape.
    fn fused(
        &self,
        inputs: &[Option<&Tensor>],
        z: Option<&Tensor>,
        activation: Activation,
    ) -> Result<Tensor> {
        let dtype = same_dtype(inputs)?;
        let x = widen(input(inputs, 0)?, 0)?;
        let w = widen(input(inputs, 1)?, 1)?;
        let b = opt_input(inputs, 2).map(|b| widen(b, 2)).transpose()?;
        let d = self.dims(x.shape(), w.shape(), b.as_ref().map(Tensor::shape))?;
        let b = b.as_ref();
        let z = match z {
            Some(z) => Some(d.check_sum(z, dtype)?),
            None => None,
        };
        let fused = z.is_some() || !activation.is_identity();
        let y = if let Tensor::F64(_) = x {
            let ws = contiguous::<f64>(&w)?;
            let zs = z.as_ref().map(contiguous::<f64>).transpose()?;
            let epilogue = fused.then_some(Epilogue {
                add: zs.as_deref(),
                activation,
            });
            let run = |g: usize, cols: &[f64], y: &mut [f64], _: Option<&Epilogue<'_, f64>>| {
                generic_product(&d, &ws, g, cols, y)
            };
            conv_typed::<f64>(&d, &x, &ws, b, epilogue, &Product::generic(&run))?
        } else {
            let zs = z.as_ref().map(contiguous::<f32>).transpose()?;
            let epilogue = fused.then_some(Epilogue {
                add: zs.as_deref(),
                activation,
            });
            let ws = contiguous::<f32>(&w)?;
            let cacheable = input(inputs, 1)?.dtype() == crate::DType::F32;
            if let Some(filters) = self.winograd_filters(&d, &w, &ws, cacheable) {
                let bias = b.map(contiguous::<f32>).transpose()?;
                let image = WinogradImage {
                    x: &[],
                    blocked: false,
                    channels: d.in_ch,
                    size: [d.image[0], d.image[1]],
                    pads: [d.geo.pad_begin[0], d.geo.pad_begin[1]],
                    out: [d.geo.out[0], d.geo.out[1]],
                };
                let run = |_: usize,
                           operand: &[f32],
                           y: &mut [f32],
                           finish: Option<&Epilogue<'_, f32>>| {
                    // SAFETY: `MaybeUninit<f32>` has `f32`'s layout, and `convolve` only
                    // writes floats.
                    let y = unsafe { &mut *(y as *mut [f32] as *mut [MaybeUninit<f32>]) };
                    let image = WinogradImage {
                        x: operand,
                        ..image
                    };
                    winograd::convolve(&filters, &image, y, false, bias.as_deref(), finish);
                    Ok(())
                };
                let product = Product {
                    run: &run,
                    reads_images: true,
                    adds_bias: true,
                    finishes: true,
                };
                let y = conv_typed::<f32>(&d, &x, &ws, b, epilogue, &product)?;
                return narrow(y, dtype);
            }
            match self.packed_weights(&d, &w, &ws, cacheable) {
                Some(p) => {
                    let bias = b.map(contiguous::<f32>).transpose()?;
                    let image = d.image2d();
                    let olen = d.geo.out.iter().product::<usize>();
                    let run = |g: usize,
                               operand: &[f32],
                               y: &mut [f32],
                               finish: Option<&Epilogue<'_, f32>>| {
                        let mg = d.out_ch / d.group;
                        let bias = bias.as_deref().map(|bs| &bs[g * mg..(g + 1) * mg]);
                        let src = match &image {
                            Some(geometry) => BSource::Image(&Image2d {
                                img: operand,
                                ..*geometry
                            }),
                            None => BSource::Dense {
                                data: operand,
                                ld: olen,
                            },
                        };
                        p[g].multiply(src, olen, y, olen, bias, finish);
                        Ok(())
                    };
                    conv_typed::<f32>(
                        &d,
                        &x,
                        &ws,
                        b,
                        epilogue,
                        &Product {
                            run: &run,
                            reads_images: image.is_some(),
                            adds_bias: true,
                            finishes: true,
                        },
                    )?
                }
                None => {
                    let run =
                        |g: usize, cols: &[f32], y: &mut [f32], _: Option<&Epilogue<'_, f32>>| {
                            generic_product(&d, &ws, g, cols, y)
                        };
                    conv_typed::<f32>(&d, &x, &ws, b, epilogue, &Product::generic(&run))?
                }
            }
        };
        narrow(y, dtype)
    }
}

impl Conv {
    /// The filters transformed for [`winograd::convolve`] (cached like the packed weights),
    /// when [`winograd::chooses`] this convolution; else `None`.
    fn winograd_filters<'a>(
        &'a self,
        d: &Dims,
        w: &Tensor,
        ws: &[f32],
        cacheable: bool,
    ) -> Option<Cow<'a, [PackedA]>> {
        let g = &d.geo;
        let two = |v: &[usize]| <[usize; 2]>::try_from(v).ok();
        let (kernel, strides, dilations, out) = (
            two(&g.kernel)?,
            two(&g.strides)?,
            two(&g.dilations)?,
            two(&g.out)?,
        );
        let options = self.winograd.options();
        let (c, m) = (d.in_ch, d.out_ch);
        if d.group != 1 || !winograd::chooses(kernel, strides, dilations, (c, m), out, options) {
            return None;
        }
        self.winograd.get_or_pack(w, cacheable, || {
            winograd::pack_filters_for(ws, m, c, out, options)
        })
    }

    /// The weights of every group packed for [`PackedA`] (cached while `w` stays the same
    /// tensor, when `cacheable`). `None` where the packed GEMM does not apply (no AVX2/AVX-512,
    /// depthwise).
    fn packed_weights<'a>(
        &'a self,
        d: &Dims,
        w: &Tensor,
        ws: &[f32],
        cacheable: bool,
    ) -> Option<Cow<'a, [PackedA]>> {
        let (cg, mg) = (d.in_ch / d.group, d.out_ch / d.group);
        if d.is_depthwise() {
            return None;
        }
        let k = cg * d.geo.kernel.iter().product::<usize>();
        self.packed.get_or_pack(w, cacheable, || {
            (0..d.group)
                .map(|g| {
                    let wg = &ws[g * mg * k..(g + 1) * mg * k];
                    PackedA::with_options(wg, mg, k, self.packed.options())
                })
                .collect()
        })
    }
}

/// `y = W_g · cols` for group `g` through the generic matrix core.
fn generic_product<T: Real>(d: &Dims, ws: &[T], g: usize, cols: &[T], y: &mut [T]) -> Result<()> {
    let (cg, mg) = (d.in_ch / d.group, d.out_ch / d.group);
    let k = cg * d.geo.kernel.iter().product::<usize>();
    let n = y.len() / mg.max(1);
    gemm(
        T::ONE,
        &ws[g * mg * k..(g + 1) * mg * k],
        Layout::row_major(mg, k),
        cols,
        Layout::row_major(k, n),
        T::ZERO,
        y,
        Layout::row_major(mg, n),
    )
}

/// `(group, operand, y, epilogue)`: see [`Product`].
type GroupProduct<'a, T> =
    dyn Fn(usize, &[T], &mut [T], Option<&Epilogue<'_, T>>) -> Result<()> + Sync + 'a;

/// How one group's product is computed: `run(g, operand, y, epilogue)` writes `y = W_g · B`
/// for group `g`, where `operand` is the group's channels of the image when `reads_images` (it
/// gathers the im2col matrix itself), else the im2col matrix (or, for a pointwise convolution,
/// the image, which is that matrix); it also adds the bias when `adds_bias`, and applies the
/// epilogue (positioned at `y`) when `finishes`.
struct Product<'a, T> {
    run: &'a GroupProduct<'a, T>,
    reads_images: bool,
    adds_bias: bool,
    finishes: bool,
}

impl<'a, T> Product<'a, T> {
    /// A product on the im2col matrix that leaves the bias and the epilogue to the caller.
    fn generic(run: &'a GroupProduct<'a, T>) -> Self {
        Product {
            run,
            reads_images: false,
            adds_bias: false,
            finishes: false,
        }
    }
}

/// The largest filter (in taps) that a convolution of one input channel runs with the direct
/// depthwise kernel rather than as a GEMM (a 7×7 stem is 49).
const DIRECT_SINGLE_CHANNEL_TAPS: usize = 49;

/// Batches of at least this many images per thread run image by image in parallel (fewer
/// would leave threads idle at the end: 3 images on 2 threads take as long as 4).
const IMAGES_PER_THREAD: usize = 4;

fn conv_typed<T: Real>(
    d: &Dims,
    x: &Tensor,
    ws: &[T],
    b: Option<&Tensor>,
    epilogue: Option<Epilogue<'_, T>>,
    product: &Product<'_, T>,
) -> Result<Tensor> {
    let xs = contiguous::<T>(x)?;
    let geo = &d.geo;
    let ilen: usize = d.image.iter().product();
    let olen: usize = geo.out.iter().product();
    let klen: usize = geo.kernel.iter().product();
    let (cg, mg) = (d.in_ch / d.group, d.out_ch / d.group);
    let len = d.batch * d.out_ch * olen;
    let depthwise = d.is_depthwise();
    let bias = b.map(contiguous::<T>).transpose()?;
    // Every kernel below overwrites every element.
    let mut y = output_buffer::overwritable(0, len);
    let pointwise = klen == 1
        && geo.strides.iter().all(|&s| s == 1)
        && geo.pad_begin.iter().chain(&geo.pad_end).all(|&p| p == 0);
    if y.is_empty() {
        // Nothing to compute.
    } else if depthwise {
        let kernel = Depthwise::new(d.in_ch, d.out_ch, &d.image, geo);
        kernel.run(&xs, ws, bias.as_deref(), epilogue.as_ref(), &mut y);
        return output(&d.output_shape(), y);
    } else {
        let pad_begin: Vec<i64> = geo.pad_begin.iter().map(|&p| p as i64).collect();
        let sweep = Sweep {
            image: &d.image,
            grid: &geo.out,
            kernel: &geo.kernel,
            strides: &geo.strides,
            dilations: &geo.dilations,
            pad_begin: &pad_begin,
        };
        let in_place = pointwise || product.reads_images;
        let mut col = if in_place {
            Vec::new()
        } else {
            vec![T::ZERO; cg * klen * olen]
        };
        // Image `n`'s groups into `yn`, its part of the output.
        let image = |n: usize, yn: &mut [T], col: &mut Vec<T>| {
            for g in 0..d.group {
                let img = &xs[(n * d.in_ch + g * cg) * ilen..(n * d.in_ch + (g + 1) * cg) * ilen];
                let cols: &[T] = if in_place {
                    img
                } else {
                    im2col(img, cg, &sweep, col);
                    &col[..]
                };
                let yo = g * mg * olen;
                let finish = epilogue.as_ref().map(|e| e.at(n * d.out_ch * olen + yo));
                (product.run)(g, cols, &mut yn[yo..yo + mg * olen], finish.as_ref())?;
            }
            Ok(())
        };
        let per_image = d.out_ch * olen;
        if in_place && d.batch >= IMAGES_PER_THREAD * rayon::current_num_threads() {
            // Many images (Mask R-CNN's mask head runs its convolutions on one per detection):
            // whole images in parallel, each product on one thread, which keeps its operands
            // in that core's cache instead of sharing every image's packed copies.
            y.par_chunks_mut(per_image)
                .enumerate()
                .try_for_each(|(n, yn)| packed_gemm::serially(|| image(n, yn, &mut Vec::new())))?;
        } else {
            for (n, yn) in y.chunks_mut(per_image).enumerate() {
                image(n, yn, &mut col)?;
            }
        }
    }
    // What the product left undone, one output plane at a time: the bias, then the epilogue.
    let bias = bias.filter(|_| !product.adds_bias);
    let finish = epilogue.filter(|_| !product.finishes);
    if bias.is_some() || finish.is_some() {
        y.par_chunks_mut(olen.max(1))
            .enumerate()
            .for_each(|(r, plane)| {
                if let Some(bs) = &bias {
                    let bias = bs[r % d.out_ch];
                    plane.iter_mut().for_each(|v| *v += bias);
                }
                if let Some(e) = &finish {
                    e.finish(plane, r * olen);
                }
            });
    }
    output(&d.output_shape(), y)
}

/// The elements of an array, in standard layout (copied into it if it was not), to finish in
/// place.
fn output_slice<T: Clone>(a: &mut ndarray::ArcArray<T, ndarray::IxDyn>) -> &mut [T] {
    if a.as_slice_mut().is_none() {
        *a = a.as_standard_layout().into_owned().into_shared();
    }
    a.as_slice_mut().unwrap_or_default()
}
