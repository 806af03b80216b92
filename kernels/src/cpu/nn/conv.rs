//! `Conv` (opset 1+; implemented from 7): N-d convolution with groups, strides, dilations, pads
//! and `auto_pad`. Depthwise 1-d/2-d convolutions use a direct kernel, 1x1 unpadded unit-stride
//! convolutions a plain GEMM on the input, everything else `im2col` + GEMM.

use rayon::prelude::*;

use super::common::{Real, contiguous, min_opset, narrow, output, same_dtype, widen};
use super::im2col::{Sweep, im2col};
use super::matrix::{Layout, gemm};
use super::spatial::{Geometry, WindowAttrs};
use crate::Tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};

/// A built `Conv`.
#[derive(Debug)]
pub struct Conv {
    window: WindowAttrs,
    group: usize,
}

/// Builds `Conv`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 1, "Conv")?;
    spec.attrs.only(&[
        "auto_pad",
        "dilations",
        "group",
        "kernel_shape",
        "pads",
        "strides",
    ])?;
    let group = spec.attrs.int("group", 1)?;
    let group = usize::try_from(group)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| KernelError::BadAttribute {
            name: "group".into(),
            reason: format!("must be >= 1, got {group}"),
        })?;
    Ok(Box::new(Conv {
        window: WindowAttrs::parse(spec.attrs)?,
        group,
    }))
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
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let dtype = same_dtype(inputs)?;
        let x = widen(input(inputs, 0)?, 0)?;
        let w = widen(input(inputs, 1)?, 1)?;
        let b = opt_input(inputs, 2).map(|b| widen(b, 2)).transpose()?;
        let d = self.dims(x.shape(), w.shape(), b.as_ref().map(Tensor::shape))?;
        let y = match x {
            Tensor::F64(_) => conv_typed::<f64>(&d, &x, &w, b.as_ref())?,
            _ => conv_typed::<f32>(&d, &x, &w, b.as_ref())?,
        };
        Ok(vec![narrow(y, dtype)?])
    }
}

fn conv_typed<T: Real>(d: &Dims, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let xs = contiguous::<T>(x)?;
    let ws = contiguous::<T>(w)?;
    let geo = &d.geo;
    let ilen: usize = d.image.iter().product();
    let olen: usize = geo.out.iter().product();
    let klen: usize = geo.kernel.iter().product();
    let (cg, mg) = (d.in_ch / d.group, d.out_ch / d.group);
    let mut y = vec![T::ZERO; d.batch * d.out_ch * olen];
    let depthwise = cg == 1 && d.group == d.in_ch && d.image.len() <= 2;
    let pointwise = klen == 1
        && geo.strides.iter().all(|&s| s == 1)
        && geo.pad_begin.iter().chain(&geo.pad_end).all(|&p| p == 0);
    if y.is_empty() {
        // Nothing to compute.
    } else if depthwise {
        depthwise_conv(&xs, &ws, d, &mut y);
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
        let mut col = if pointwise {
            Vec::new()
        } else {
            vec![T::ZERO; cg * klen * olen]
        };
        for n in 0..d.batch {
            for g in 0..d.group {
                let img = &xs[(n * d.in_ch + g * cg) * ilen..(n * d.in_ch + (g + 1) * cg) * ilen];
                let cols: &[T] = if pointwise {
                    img
                } else {
                    im2col(img, cg, &sweep, &mut col);
                    &col
                };
                let wg = &ws[g * mg * cg * klen..(g + 1) * mg * cg * klen];
                let yo = (n * d.out_ch + g * mg) * olen;
                gemm(
                    T::ONE,
                    wg,
                    Layout::row_major(mg, cg * klen),
                    cols,
                    Layout::row_major(cg * klen, olen),
                    T::ZERO,
                    &mut y[yo..yo + mg * olen],
                    Layout::row_major(mg, olen),
                )?;
            }
        }
    }
    if let Some(b) = b {
        let bs = contiguous::<T>(b)?;
        y.par_chunks_mut(olen.max(1))
            .enumerate()
            .for_each(|(r, plane)| {
                let bias = bs[r % d.out_ch];
                plane.iter_mut().for_each(|v| *v += bias);
            });
    }
    let mut shape = vec![d.batch, d.out_ch];
    shape.extend_from_slice(&geo.out);
    output(&shape, y)
}

/// Direct depthwise convolution (one input channel per group) for 1-d and 2-d images; 1-d is
/// handled as a 2-d image of height 1.
fn depthwise_conv<T: Real>(xs: &[T], ws: &[T], d: &Dims, y: &mut [T]) {
    let geo = &d.geo;
    let two = |v: &[usize], one: usize| {
        if v.len() == 2 {
            [v[0], v[1]]
        } else {
            [one, v[0]]
        }
    };
    let [ih, iw] = two(&d.image, 1);
    let [oh, ow] = two(&geo.out, 1);
    let [kh, kw] = two(&geo.kernel, 1);
    let [sh, sw] = two(&geo.strides, 1);
    let [dh, dw] = two(&geo.dilations, 1);
    let [ph, pw] = two(&geo.pad_begin, 0);
    let mult = d.out_ch / d.in_ch;
    y.par_chunks_mut(oh * ow).enumerate().for_each(|(r, out)| {
        let (n, m) = (r / d.out_ch, r % d.out_ch);
        let c = m / mult;
        let plane = &xs[(n * d.in_ch + c) * ih * iw..(n * d.in_ch + c + 1) * ih * iw];
        let wk = &ws[m * kh * kw..(m + 1) * kh * kw];
        for y0 in 0..oh {
            let orow = &mut out[y0 * ow..(y0 + 1) * ow];
            for ky in 0..kh {
                let iy = (y0 * sh + ky * dh) as i64 - ph as i64;
                if iy < 0 || iy >= ih as i64 {
                    continue;
                }
                let irow = &plane[iy as usize * iw..(iy as usize + 1) * iw];
                for kx in 0..kw {
                    let wv = wk[ky * kw + kx];
                    let start = (kx * dw) as i64 - pw as i64;
                    let s = sw as i64;
                    let lo = if start >= 0 { 0 } else { (-start + s - 1) / s };
                    let hi = if start >= iw as i64 {
                        0
                    } else {
                        (iw as i64 - start + s - 1) / s
                    };
                    let (lo, hi) = (lo.min(ow as i64) as usize, hi.min(ow as i64) as usize);
                    if lo >= hi {
                        continue;
                    }
                    // The input column of output column `lo`, then every `sw`-th one.
                    let first = (start + (lo * sw) as i64) as usize;
                    if sw == 1 {
                        for (o, &v) in orow[lo..hi].iter_mut().zip(&irow[first..]) {
                            *o += wv * v;
                        }
                    } else {
                        let taps = irow[first..].iter().step_by(sw);
                        for (o, &v) in orow[lo..hi].iter_mut().zip(taps) {
                            *o += wv * v;
                        }
                    }
                }
            }
        }
    });
}
