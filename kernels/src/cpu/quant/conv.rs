//! `ConvInteger` (opset 10) and `QLinearConv` (opset 10): N-d grouped integer convolution as
//! weights · im2col columns, the columns padded with the input's zero point (so padding adds
//! nothing); weight zero points and scales per tensor or per output channel.

use super::operand::{Requant, bytes, operand, scales, zero_points};
use super::params::int_tensor;
use super::qgemm;
use crate::cpu::nn::spatial::{Geometry, WindowAttrs};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{DType, Tensor};

/// `ConvInteger` or `QLinearConv`.
#[derive(Debug)]
pub struct QConv {
    window: WindowAttrs,
    group: usize,
    qlinear: bool,
}

/// Builds [`QConv`] for `ConvInteger` or `QLinearConv`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    crate::cpu::nn::common::min_opset(spec.opset, 10, spec.op_type)?;
    let a = spec.attrs;
    a.only(&[
        "auto_pad",
        "dilations",
        "group",
        "kernel_shape",
        "pads",
        "strides",
    ])?;
    let group = a.int("group", 1)?;
    if group < 1 {
        return Err(KernelError::BadAttribute {
            name: "group".into(),
            reason: format!("must be positive, got {group}"),
        });
    }
    Ok(Box::new(QConv {
        window: WindowAttrs::parse(a)?,
        group: group as usize,
        qlinear: spec.op_type == "QLinearConv",
    }))
}

/// The shapes of one convolution.
struct Dims {
    batch: usize,
    channels: usize,
    out_channels: usize,
    image: Vec<usize>,
    geometry: Geometry,
}

impl Dims {
    fn new(window: &WindowAttrs, x: &[usize], w: &[usize], group: usize) -> Result<Dims> {
        if x.len() < 3 || w.len() != x.len() {
            return Err(KernelError::Shape(format!(
                "input {x:?} and weights {w:?} must have the same rank, at least 3"
            )));
        }
        let (channels, out_channels) = (x[1], w[0]);
        if channels != w[1] * group || out_channels % group != 0 {
            return Err(KernelError::Shape(format!(
                "input {x:?}, weights {w:?} and group {group} do not fit"
            )));
        }
        let image = x[2..].to_vec();
        let geometry = window.resolve(&image, Some(&w[2..]), false)?;
        Ok(Dims {
            batch: x[0],
            channels,
            out_channels,
            image,
            geometry,
        })
    }
}

/// The im2col matrix of one group's image (`channels` planes): one row per (channel, kernel
/// offset), one column per output position; positions in the padding hold `pad`.
fn columns(image: &[u8], channels: usize, d: &Dims, pad: u8) -> Vec<u8> {
    let g = &d.geometry;
    let rank = d.image.len();
    let out_len: usize = g.out.iter().product();
    let kernel_len: usize = g.kernel.iter().product();
    let plane: usize = d.image.iter().product();
    // source[dim][k][o]: the image coordinate of output `o` at kernel offset `k`, if inside.
    let source: Vec<Vec<Vec<Option<usize>>>> = (0..rank)
        .map(|i| {
            (0..g.kernel[i])
                .map(|k| {
                    (0..g.out[i])
                        .map(|o| {
                            let pos = (o * g.strides[i] + k * g.dilations[i]) as i64
                                - g.pad_begin[i] as i64;
                            usize::try_from(pos).ok().filter(|&p| p < d.image[i])
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut cols = vec![pad; channels * kernel_len * out_len];
    let mut koff = vec![0usize; rank];
    for kf in 0..kernel_len {
        let mut rem = kf;
        for i in (0..rank).rev() {
            koff[i] = rem % g.kernel[i];
            rem /= g.kernel[i];
        }
        let mut opos = vec![0usize; rank];
        for of in 0..out_len {
            let mut src = Some(0usize);
            for i in 0..rank {
                src = match (src, source[i][koff[i]][opos[i]]) {
                    (Some(s), Some(p)) => Some(s * d.image[i] + p),
                    _ => None,
                };
            }
            if let Some(s) = src {
                for c in 0..channels {
                    cols[(c * kernel_len + kf) * out_len + of] = image[c * plane + s];
                }
            }
            for i in (0..rank).rev() {
                opos[i] += 1;
                if opos[i] < g.out[i] {
                    break;
                }
                opos[i] = 0;
            }
        }
    }
    cols
}

impl Kernel for QConv {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (x, w, xz, wz) = if self.qlinear {
            (
                input(inputs, 0)?,
                input(inputs, 3)?,
                opt_input(inputs, 2),
                opt_input(inputs, 5),
            )
        } else {
            (
                input(inputs, 0)?,
                input(inputs, 1)?,
                opt_input(inputs, 2),
                opt_input(inputs, 3),
            )
        };
        let d = Dims::new(&self.window, x.shape(), w.shape(), self.group)?;
        let (xb, wb) = (bytes(x, 0)?, bytes(w, 1)?);
        let x_zp = zero_points(xz, x.dtype(), 1, "x")?;
        let w_zp = zero_points(wz, w.dtype(), d.out_channels, "w")?;
        if x_zp.len() != 1 {
            return Err(KernelError::Shape("x zero point must be one value".into()));
        }
        let pad = if xb.1 {
            x_zp[0] as i8 as u8
        } else {
            x_zp[0] as u8
        };
        let g = self.group;
        let (cg, mg) = (d.channels / g, d.out_channels / g);
        let plane: usize = d.image.iter().product();
        let out_len: usize = d.geometry.out.iter().product();
        let k = cg * d.geometry.kernel.iter().product::<usize>();
        let mut acc = vec![0i32; d.batch * d.out_channels * out_len];
        for n in 0..d.batch {
            for gi in 0..g {
                let image = &xb.0[(n * d.channels + gi * cg) * plane..][..cg * plane];
                let cols = columns(image, cg, &d, pad);
                let wq = operand(&wb);
                let a = qgemm::Operand {
                    data: &wq.data[gi * mg * k..(gi + 1) * mg * k],
                    ..wq
                };
                let b = qgemm::Operand {
                    data: &cols,
                    signed: xb.1,
                };
                let za = if w_zp.len() == 1 {
                    &w_zp[..]
                } else {
                    &w_zp[gi * mg..(gi + 1) * mg]
                };
                let c = &mut acc[(n * d.out_channels + gi * mg) * out_len..][..mg * out_len];
                qgemm::gemm((mg, k, out_len), a, za, b, &x_zp, c);
            }
        }
        let mut shape = vec![d.batch, d.out_channels];
        shape.extend(&d.geometry.out);
        if !self.qlinear {
            return Ok(vec![int_tensor(DType::I32, &shape, acc)?]);
        }
        let channel = |i: usize| (i / out_len.max(1)) % d.out_channels;
        if let Some(bias) = opt_input(inputs, 8) {
            let bias = bias.view::<i32>()?;
            if bias.len() != d.out_channels {
                return Err(KernelError::Shape(format!(
                    "bias has {} values for {} output channels",
                    bias.len(),
                    d.out_channels
                )));
            }
            let bias: Vec<i32> = bias.iter().copied().collect();
            for (i, v) in acc.iter_mut().enumerate() {
                *v = v.wrapping_add(bias[channel(i)]);
            }
        }
        let x_scale = scales(input(inputs, 1)?, 1, 1, "x")?;
        let w_scale = scales(input(inputs, 4)?, 4, d.out_channels, "w")?;
        let rq = Requant::new(
            x_scale[0],
            &w_scale,
            input(inputs, 6)?,
            opt_input(inputs, 7),
            x.dtype(),
        )?;
        let y = rq.apply(&acc, channel);
        Ok(vec![int_tensor(rq.dtype, &shape, y)?])
    }
}
