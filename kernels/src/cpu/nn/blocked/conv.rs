//! The blocked convolution: `FusedConv` (`Y = activation(conv(X, W) + B + Z)`, group 1, 2-D)
//! with `X` in channel planes `[N, C, H, W]` or blocked `[N, C / 16, H, W, 16]`, `Z` blocked
//! like `Y`, and `Y` blocked `[N, M / 16, OH, OW, 16]` — or in planes when the attribute
//! `blocked_output` is 0, for an output whose readers want planes. The product runs in
//! position tiles ([`PackedA::multiply_blocked`]), or, for 3×3 windows with unit strides where
//! [`winograd::chooses`] it, by Winograd's F(4×4, 3×3) or F(2×2, 3×3) ([`winograd::convolve`]),
//! or, for 1×r and r×1 windows of blocked images where [`line::chooses`] it, by the 1-D
//! F(4, r) ([`line::convolve`]).

use std::borrow::Cow;

use super::{BLOCK, conv_bias, conv_inputs, require_blocked, stored_channels, unblocked};
use crate::cpu::nn::common::{contiguous, output};
use crate::cpu::nn::conv::ATTRIBUTES;
use crate::cpu::nn::epilogue::{Activation, Epilogue};
use crate::cpu::nn::fused_conv::activation_attrs;
use crate::cpu::nn::packed_gemm::{BlockedInput, Image2d, PackedA};
use crate::cpu::nn::packed_weights::WeightCache;
use crate::cpu::nn::spatial::WindowAttrs;
use crate::cpu::nn::winograd::line::{self, Along};
use crate::cpu::nn::winograd::{self, WinogradImage};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, opt_input};
use crate::{Tensor, output_buffer};

/// A built blocked `Conv`.
#[derive(Debug)]
pub struct BlockedConv {
    window: WindowAttrs,
    activation: Activation,
    blocked_output: bool,
    packed: WeightCache,
    winograd: WeightCache,
}

/// How a run computes the product: the weights packed for each path.
enum Path<'a> {
    /// Winograd's F(4×4, 3×3) or F(2×2, 3×3): the 36 or 16 transformed filters.
    Winograd(Cow<'a, [PackedA]>),
    /// Winograd's 1-D F(4, r) along a 1×r or r×1 window: the `r + 3` transformed filters.
    Line(Cow<'a, [PackedA]>, Along),
    /// Position tiles: the packed weights.
    Direct(Cow<'a, [PackedA]>),
}

/// Builds the blocked `Conv`: `Conv`'s attributes, `FusedConv`'s `activation` and
/// `activation_params`, and `blocked_output` (default 1); a `group` other than 1 builds the
/// depthwise kernel ([`super::depthwise::build`]).
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    require_blocked("Conv")?;
    if spec.attrs.int("group", 1)? != 1 {
        return super::depthwise::build(spec);
    }
    let mut known = ATTRIBUTES.to_vec();
    known.extend(["activation", "activation_params", "blocked_output"]);
    spec.attrs.only(&known)?;
    Ok(Box::new(BlockedConv {
        window: WindowAttrs::parse(spec.attrs)?,
        activation: activation_attrs(spec.attrs)?,
        blocked_output: spec.attrs.int("blocked_output", 1)? != 0,
        packed: WeightCache::new(spec.options),
        winograd: WeightCache::new(spec.options),
    }))
}

impl Kernel for BlockedConv {
    fn choice(&self) -> Option<String> {
        crate::cpu::nn::packed_weights::choice(&self.packed, Some(&self.winograd))
    }

    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (x, w) = conv_inputs(inputs, "Conv", &["X", "W", "B", "Z"])?;
        let blocked_input = x.shape().len() == 5;
        let [n, stored, h, wd] = match blocked_input {
            true => unblocked(x.shape(), "X")?,
            false => match *x.shape() {
                [n, c, h, w] => [n, c, h, w],
                _ => {
                    return Err(KernelError::Shape(format!(
                        "X must be [N, C, H, W] or blocked, got {:?}",
                        x.shape()
                    )));
                }
            },
        };
        let &[m, wc, kh, kw] = w.shape() else {
            return Err(KernelError::Shape(format!(
                "W must be [M, C, kH, kW], got {:?}",
                w.shape()
            )));
        };
        // A blocked image's last block may be partly filled: the weights say how many of
        // its channels are live.
        let c = wc;
        let fits = match blocked_input {
            true => stored_channels(c) == stored,
            false => c == stored,
        };
        if !fits {
            return Err(KernelError::Shape(format!(
                "W is {:?} for X of shape {:?}",
                w.shape(),
                x.shape()
            )));
        }
        let geo = self.window.resolve(&[h, wd], Some(&[kh, kw]), false)?;
        let (oh, ow) = (geo.out[0], geo.out[1]);
        // A blocked output's last block is padded when `m` is not a multiple of 16.
        let stored_m = match self.blocked_output {
            true => stored_channels(m),
            false => m,
        };
        let y_shape = match self.blocked_output {
            true => vec![n, stored_m / BLOCK, oh, ow, BLOCK],
            false => vec![n, m, oh, ow],
        };
        let bias = conv_bias(inputs, m)?;
        let z = opt_input(inputs, 3)
            .map(|z| match z.shape() == y_shape.as_slice() {
                true => contiguous::<f32>(z),
                false => Err(KernelError::Shape(format!(
                    "Z has shape {:?}, the output's is {y_shape:?}",
                    z.shape()
                ))),
            })
            .transpose()?;
        let ws = contiguous::<f32>(w)?;
        let xs = contiguous::<f32>(x)?;
        let (in_len, out_len) = (stored * h * wd, stored_m * oh * ow);
        let (strides, dilations) = (
            [geo.strides[0], geo.strides[1]],
            [geo.dilations[0], geo.dilations[1]],
        );
        let options = self.packed.options();
        let out = [oh, ow];
        let winograd_filters =
            winograd::chooses([kh, kw], strides, dilations, (c, m), out, options)
                .then(|| {
                    self.winograd.get_or_pack(w, true, || {
                        winograd::pack_filters_for(&ws, m, c, out, options)
                    })
                })
                .flatten();
        // A node's window is fixed: its cache holds one kind of transformed filters.
        let line = (blocked_input && self.blocked_output)
            .then(|| line::chooses([kh, kw], strides, dilations, (c, m), out, options))
            .flatten()
            .and_then(|along| {
                let filters = self.winograd.get_or_pack(w, true, || {
                    line::pack_filters_for(&ws, m, c, kh.max(kw), options)
                })?;
                Some((filters, along))
            });
        let path = match (winograd_filters, line) {
            (Some(filters), _) => Path::Winograd(filters),
            (None, Some((filters, along))) => Path::Line(filters, along),
            (None, None) => {
                let k = c * kh * kw;
                let packed = self.packed.get_or_pack(w, true, || {
                    PackedA::with_options(&ws, m, k, options).map(|p| vec![p])
                });
                let Some(packed) = packed else {
                    return require_blocked("Conv").and(Err(KernelError::InvalidValue(
                        "the blocked Conv's weights could not be packed".into(),
                    )));
                };
                Path::Direct(packed)
            }
        };
        // Every element is written by the product: no zeros first (a 3 MB output's memset
        // was a tenth of googlenet's first convolution).
        let y: Vec<f32> = output_buffer::build(0, n * out_len, |y| {
            if out_len == 0 {
                return;
            }
            for (b, y) in y.chunks_exact_mut(out_len).enumerate() {
                let x = &xs[b * in_len..(b + 1) * in_len];
                let add = z.as_deref().map(|z| &z[b * out_len..(b + 1) * out_len]);
                let epilogue =
                    (add.is_some() || !self.activation.is_identity()).then_some(Epilogue {
                        add,
                        activation: self.activation,
                    });
                let (bias, epilogue) = (bias.as_deref(), epilogue.as_ref());
                let image = WinogradImage {
                    x,
                    blocked: blocked_input,
                    channels: c,
                    size: [h, wd],
                    pads: [geo.pad_begin[0], geo.pad_begin[1]],
                    out: [oh, ow],
                };
                let packed = match &path {
                    Path::Winograd(filters) => {
                        winograd::convolve(filters, &image, y, self.blocked_output, bias, epilogue);
                        continue;
                    }
                    Path::Line(filters, along) => {
                        line::convolve(filters, *along, &image, y, bias, epilogue);
                        continue;
                    }
                    Path::Direct(packed) => &packed[0],
                };
                let image = Image2d {
                    img: x,
                    size: [h, wd],
                    kernel: [kh, kw],
                    strides,
                    dilations,
                    pads: [geo.pad_begin[0], geo.pad_begin[1]],
                    out: [oh, ow],
                };
                packed.multiply_blocked(
                    &BlockedInput {
                        image,
                        blocked: blocked_input,
                    },
                    y,
                    self.blocked_output,
                    bias,
                    epilogue,
                );
            }
        });
        Ok(vec![output(&y_shape, y)?])
    }
}
