//! `MaxPool` (opsets 1, 8, 10, 11, 12; implemented from 7) and `AveragePool` (1, 7, 10, 11, 19,
//! 22): N-d windows with pads, `auto_pad`, strides, dilations, `ceil_mode`, `count_include_pad`,
//! `storage_order` and the optional `Indices` output of MaxPool; `LpPool` (2, 11, 18, 22): the
//! `p`-norm of each window (padding cells count as zeros).

use rayon::prelude::*;

use super::common::{Real, contiguous, min_opset, narrow, output, widen};
use super::pool_same::{self, Reduce};
use super::spatial::{Geometry, WindowAttrs, strides_of};
use super::{pool_stride2, pool2d};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{DType, Element, Tensor};

/// Which pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Max { storage_order: usize, indices: bool },
    Average { count_include_pad: bool },
    Lp { p: i64 },
}

/// A built `MaxPool` or `AveragePool`.
#[derive(Debug)]
pub struct Pool {
    kind: Kind,
    window: WindowAttrs,
    ceil_mode: bool,
}

/// A 0/1 attribute (absent: 0).
pub(super) fn flag(spec: &NodeSpec<'_>, name: &str) -> Result<bool> {
    match spec.attrs.int(name, 0)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(KernelError::BadAttribute {
            name: name.into(),
            reason: format!("must be 0 or 1, got {v}"),
        }),
    }
}

/// Builds `LpPool` (opset 2+: `p` is an integer attribute).
pub fn build_lp(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 2, spec.op_type)?;
    let mut known = vec!["auto_pad", "kernel_shape", "pads", "strides", "p"];
    if spec.opset >= 18 {
        known.extend(["ceil_mode", "dilations"]);
    }
    spec.attrs.only(&known)?;
    let p = spec.attrs.int("p", 2)?;
    if p < 1 {
        return Err(KernelError::BadAttribute {
            name: "p".into(),
            reason: format!("must be at least 1, got {p}"),
        });
    }
    let window = WindowAttrs::parse(spec.attrs)?;
    if window.kernel_shape.is_none() {
        return Err(KernelError::BadAttribute {
            name: "kernel_shape".into(),
            reason: "required but absent".into(),
        });
    }
    Ok(Box::new(Pool {
        kind: Kind::Lp { p },
        window,
        ceil_mode: flag(spec, "ceil_mode")?,
    }))
}

/// Builds `MaxPool` or `AveragePool`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 7, spec.op_type)?;
    let mut known = vec!["auto_pad", "kernel_shape", "pads", "strides"];
    let max = spec.op_type == "MaxPool";
    if max && spec.opset >= 8 {
        known.push("storage_order");
    }
    if !max {
        known.push("count_include_pad");
    }
    if spec.opset >= 10 {
        known.push("ceil_mode");
        if max || spec.opset >= 19 {
            known.push("dilations");
        }
    }
    spec.attrs.only(&known)?;
    let kind = if max {
        if spec.num_outputs > 2 || (spec.num_outputs == 2 && spec.opset < 8) {
            return Err(KernelError::Arity(format!(
                "MaxPool with {} outputs",
                spec.num_outputs
            )));
        }
        Kind::Max {
            storage_order: usize::from(flag(spec, "storage_order")?),
            indices: spec.num_outputs == 2,
        }
    } else {
        Kind::Average {
            count_include_pad: flag(spec, "count_include_pad")?,
        }
    };
    let window = WindowAttrs::parse(spec.attrs)?;
    if window.kernel_shape.is_none() {
        return Err(KernelError::BadAttribute {
            name: "kernel_shape".into(),
            reason: "required but absent".into(),
        });
    }
    Ok(Box::new(Pool {
        kind,
        window,
        ceil_mode: flag(spec, "ceil_mode")?,
    }))
}

/// Per spatial dim and output coordinate: the in-image input positions of the window and the
/// number of window cells inside image-plus-padding (the `count_include_pad` divisor factor).
fn taps(geo: &Geometry, image: &[usize]) -> Vec<Vec<(Vec<usize>, usize)>> {
    (0..image.len())
        .map(|i| {
            (0..geo.out[i])
                .map(|o| {
                    let mut valid = Vec::new();
                    let mut padded = 0;
                    for k in 0..geo.kernel[i] {
                        let p = (o * geo.strides[i] + k * geo.dilations[i]) as i64
                            - geo.pad_begin[i] as i64;
                        if p < (image[i] + geo.pad_end[i]) as i64 {
                            padded += 1;
                        }
                        if p >= 0 && p < image[i] as i64 {
                            valid.push(p as usize);
                        }
                    }
                    (valid, padded)
                })
                .collect()
        })
        .collect()
}

/// Visits the cartesian product of per-dim position lists, calling `f(flat_row_major_index,
/// flat_column_major_index)`.
fn for_window(lists: &[&[usize]], rm: &[usize], cm: &[usize], f: &mut impl FnMut(usize, usize)) {
    fn rec(
        d: usize,
        lists: &[&[usize]],
        rm: &[usize],
        cm: &[usize],
        a: usize,
        b: usize,
        f: &mut impl FnMut(usize, usize),
    ) {
        if d == lists.len() {
            f(a, b);
            return;
        }
        for &p in lists[d] {
            rec(d + 1, lists, rm, cm, a + p * rm[d], b + p * cm[d], f);
        }
    }
    rec(0, lists, rm, cm, 0, 0, f);
}

/// An element MaxPool compares.
trait MaxElem: Element + Copy + PartialOrd {
    const LOWEST: Self;

    /// Pools with [`pool_same::pool_same_f32`] or [`pool_stride2::max_pool_stride2_f32`] when
    /// `Self` is `f32` and one applies; false otherwise.
    fn max_pool_fast(
        _x: &[Self],
        _image: (usize, usize),
        _windows: (&pool2d::AxisWindows, &pool2d::AxisWindows),
        _y: &mut [Self],
    ) -> bool {
        false
    }
}
impl MaxElem for f32 {
    const LOWEST: Self = f32::NEG_INFINITY;

    fn max_pool_fast(
        x: &[f32],
        image: (usize, usize),
        (rows, cols): (&pool2d::AxisWindows, &pool2d::AxisWindows),
        y: &mut [f32],
    ) -> bool {
        match pool2d::same_window(rows, cols, image) {
            Some(window) => pool_same::pool_same_f32(x, image, window, Reduce::Max, y),
            None => pool_stride2::max_pool_stride2_f32(x, image, rows, cols, y),
        }
    }
}
impl MaxElem for f64 {
    const LOWEST: Self = f64::NEG_INFINITY;
}
impl MaxElem for u8 {
    const LOWEST: Self = u8::MIN;
}
impl MaxElem for i8 {
    const LOWEST: Self = i8::MIN;
}

/// An element AveragePool averages.
trait AverageElem: Real {
    /// Pools with [`pool_same::pool_same_f32`] when `Self` is `f32` and the geometry is "same";
    /// false otherwise.
    fn average_fast(
        _x: &[Self],
        _image: (usize, usize),
        _windows: (&pool2d::AxisWindows, &pool2d::AxisWindows),
        _include_pad: bool,
        _y: &mut [Self],
    ) -> bool {
        false
    }
}
impl AverageElem for f32 {
    fn average_fast(
        x: &[f32],
        image: (usize, usize),
        (rows, cols): (&pool2d::AxisWindows, &pool2d::AxisWindows),
        include_pad: bool,
        y: &mut [f32],
    ) -> bool {
        pool2d::same_window(rows, cols, image).is_some_and(|window| {
            pool_same::pool_same_f32(x, image, window, Reduce::Average { include_pad }, y)
        })
    }
}
impl AverageElem for f64 {}

impl Pool {
    fn geometry(&self, shape: &[usize]) -> Result<Geometry> {
        if shape.len() < 3 {
            return Err(KernelError::Shape(format!(
                "pooling needs rank >= 3, got {shape:?}"
            )));
        }
        self.window.resolve(&shape[2..], None, self.ceil_mode)
    }

    fn max<T: MaxElem>(
        &self,
        x: &Tensor,
        storage_order: usize,
        indices: bool,
    ) -> Result<Vec<Tensor>> {
        let shape = x.shape();
        let geo = self.geometry(shape)?;
        let image = &shape[2..];
        let taps = taps(&geo, image);
        let xs = contiguous::<T>(x)?;
        let (ilen, olen) = (
            image.iter().product::<usize>(),
            geo.out.iter().product::<usize>(),
        );
        let planes = shape[0] * shape[1];
        let rm = strides_of(image);
        let cm = {
            let rev: Vec<usize> = image.iter().rev().copied().collect();
            let mut s = strides_of(&rev);
            s.reverse();
            s
        };
        // Every output is written below (both paths).
        let mut y = crate::output_buffer::overwritable(0, planes * olen);
        let mut idx = vec![0i64; if indices { planes * olen } else { 0 }];
        let work = |p: usize, yp: &mut [T], ip: Option<&mut [i64]>| {
            let plane = &xs[p * ilen..(p + 1) * ilen];
            let mut ip = ip;
            let mut o = vec![0usize; image.len()];
            let mut lists: Vec<&[usize]> = vec![&[]; image.len()];
            for (flat, out) in yp.iter_mut().enumerate() {
                for (d, l) in lists.iter_mut().enumerate() {
                    *l = taps[d][o[d]].0.as_slice();
                }
                let mut best = T::LOWEST;
                let mut arg = None;
                for_window(&lists, &rm, &cm, &mut |a, b| {
                    let v = plane[a];
                    if arg.is_none() || v > best {
                        best = v;
                        arg = Some(if storage_order == 1 { b } else { a });
                    }
                });
                *out = best;
                if let Some(ip) = ip.as_deref_mut() {
                    ip[flat] = (p * ilen + arg.unwrap_or(0)) as i64;
                }
                for d in (0..o.len()).rev() {
                    o[d] += 1;
                    if o[d] < geo.out[d] {
                        break;
                    }
                    o[d] = 0;
                }
            }
        };
        if !indices && pool2d::applies(&geo) {
            let (rows, cols) = pool2d::plane_windows(&geo, image);
            let fast = T::max_pool_fast(&xs, (image[0], image[1]), (&rows, &cols), &mut y);
            // Like ONNX Runtime, a NaN never wins a window.
            if !fast {
                pool2d::pool_planes(
                    &xs,
                    (image[0], image[1]),
                    &rows,
                    &cols,
                    &mut y,
                    T::LOWEST,
                    |a, v| if v > a { v } else { a },
                    |_| {},
                );
            }
        } else if olen > 0 {
            if indices {
                y.par_chunks_mut(olen)
                    .zip(idx.par_chunks_mut(olen))
                    .enumerate()
                    .for_each(|(p, (yp, ip))| work(p, yp, Some(ip)));
            } else {
                y.par_chunks_mut(olen)
                    .enumerate()
                    .for_each(|(p, yp)| work(p, yp, None));
            }
        }
        let mut oshape = shape[..2].to_vec();
        oshape.extend_from_slice(&geo.out);
        let mut outs = vec![output(&oshape, y)?];
        if indices {
            outs.push(output(&oshape, idx)?);
        }
        Ok(outs)
    }

    fn average<T: AverageElem>(&self, x: &Tensor, include_pad: bool) -> Result<Tensor> {
        let shape = x.shape();
        let geo = self.geometry(shape)?;
        let mut oshape = shape[..2].to_vec();
        oshape.extend_from_slice(&geo.out);
        let image = &shape[2..];
        let taps = taps(&geo, image);
        let xs = contiguous::<T>(x)?;
        let (ilen, olen) = (
            image.iter().product::<usize>(),
            geo.out.iter().product::<usize>(),
        );
        let rm = strides_of(image);
        // Every output is written below (both paths).
        let mut y = crate::output_buffer::overwritable(0, shape[0] * shape[1] * olen);
        if pool2d::applies(&geo) {
            let (rows, cols) = pool2d::plane_windows(&geo, image);
            let hw = (image[0], image[1]);
            if T::average_fast(&xs, hw, (&rows, &cols), include_pad, &mut y)
                || pool2d::one_cell_windows(&xs, hw, (&rows, &cols), include_pad, &mut y)
            {
                return output(&oshape, y);
            }
            // A window with no cell to count divides 0 by 0: NaN.
            let counts: Vec<T> = pool2d::window_counts(&rows, &cols, include_pad)
                .into_iter()
                .map(|c| T::of(c as f64))
                .collect();
            pool2d::pool_planes(
                &xs,
                (image[0], image[1]),
                &rows,
                &cols,
                &mut y,
                T::ZERO,
                |a, v| a + v,
                |sums| sums.iter_mut().zip(&counts).for_each(|(s, &c)| *s = *s / c),
            );
        } else if olen > 0 {
            y.par_chunks_mut(olen).enumerate().for_each(|(p, yp)| {
                let plane = &xs[p * ilen..(p + 1) * ilen];
                let mut o = vec![0usize; image.len()];
                let mut lists: Vec<&[usize]> = vec![&[]; image.len()];
                for out in yp.iter_mut() {
                    for (d, l) in lists.iter_mut().enumerate() {
                        *l = taps[d][o[d]].0.as_slice();
                    }
                    let mut sum = T::ZERO;
                    let mut count = 0usize;
                    for_window(&lists, &rm, &rm, &mut |a, _| {
                        sum += plane[a];
                        count += 1;
                    });
                    if include_pad {
                        count = (0..image.len()).map(|d| taps[d][o[d]].1).product();
                    }
                    *out = if count == 0 {
                        T::nan()
                    } else {
                        sum / T::of(count as f64)
                    };
                    for d in (0..o.len()).rev() {
                        o[d] += 1;
                        if o[d] < geo.out[d] {
                            break;
                        }
                        o[d] = 0;
                    }
                }
            });
        }
        output(&oshape, y)
    }

    /// `(Σ |x|^p)^(1/p)` over each window's in-image cells.
    fn lp<T: AverageElem>(&self, x: &Tensor, p: i64) -> Result<Tensor> {
        let shape = x.shape();
        let geo = self.geometry(shape)?;
        let mut oshape = shape[..2].to_vec();
        oshape.extend_from_slice(&geo.out);
        let image = &shape[2..];
        let taps = taps(&geo, image);
        let xs = contiguous::<T>(x)?;
        let (ilen, olen) = (
            image.iter().product::<usize>(),
            geo.out.iter().product::<usize>(),
        );
        let rm = strides_of(image);
        let total = crate::limits::checked_elements(&oshape, std::mem::size_of::<T>())?;
        let mut y = vec![T::ZERO; total];
        let (pi, inv) = (p as i32, T::of(1.0 / p as f64));
        if olen > 0 {
            y.par_chunks_mut(olen).enumerate().for_each(|(n, yp)| {
                let plane = &xs[n * ilen..(n + 1) * ilen];
                let mut o = vec![0usize; image.len()];
                let mut lists: Vec<&[usize]> = vec![&[]; image.len()];
                for out in yp.iter_mut() {
                    for (d, l) in lists.iter_mut().enumerate() {
                        *l = taps[d][o[d]].0.as_slice();
                    }
                    let mut sum = T::ZERO;
                    for_window(&lists, &rm, &rm, &mut |a, _| {
                        sum += plane[a].abs().powi(pi);
                    });
                    *out = match p {
                        1 => sum,
                        2 => sum.sqrt(),
                        _ => sum.powf(inv),
                    };
                    for d in (0..o.len()).rev() {
                        o[d] += 1;
                        if o[d] < geo.out[d] {
                            break;
                        }
                        o[d] = 0;
                    }
                }
            });
        }
        output(&oshape, y)
    }
}

impl Kernel for Pool {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let dtype = x.dtype();
        match self.kind {
            Kind::Max {
                storage_order,
                indices,
            } => match dtype {
                DType::F32 => self.max::<f32>(x, storage_order, indices),
                DType::F64 => self.max::<f64>(x, storage_order, indices),
                DType::U8 => self.max::<u8>(x, storage_order, indices),
                DType::I8 => self.max::<i8>(x, storage_order, indices),
                DType::F16 | DType::BF16 => {
                    let mut outs = self.max::<f32>(&widen(x, 0)?, storage_order, indices)?;
                    outs[0] = narrow(outs[0].clone(), dtype)?;
                    Ok(outs)
                }
                other => Err(KernelError::UnsupportedDType {
                    index: 0,
                    dtype: other,
                }),
            },
            Kind::Average { count_include_pad } => {
                let w = widen(x, 0)?;
                let y = match w {
                    Tensor::F64(_) => self.average::<f64>(&w, count_include_pad)?,
                    _ => self.average::<f32>(&w, count_include_pad)?,
                };
                Ok(vec![narrow(y, dtype)?])
            }
            Kind::Lp { p } => {
                let w = widen(x, 0)?;
                let y = match w {
                    Tensor::F64(_) => self.lp::<f64>(&w, p)?,
                    _ => self.lp::<f32>(&w, p)?,
                };
                Ok(vec![narrow(y, dtype)?])
            }
        }
    }
}

/// A built `GlobalAveragePool` or `GlobalMaxPool`.
#[derive(Debug)]
pub struct GlobalPool {
    max: bool,
}

/// Builds `GlobalAveragePool` or `GlobalMaxPool`.
pub fn build_global(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 1, spec.op_type)?;
    spec.attrs.only(&[])?;
    Ok(Box::new(GlobalPool {
        max: spec.op_type == "GlobalMaxPool",
    }))
}

impl GlobalPool {
    fn typed<T: Real>(&self, x: &Tensor) -> Result<Tensor> {
        let shape = x.shape();
        if shape.len() < 3 {
            return Err(KernelError::Shape(format!(
                "global pooling needs rank >= 3, got {shape:?}"
            )));
        }
        let ilen: usize = shape[2..].iter().product();
        let planes = shape[0] * shape[1];
        if shape[0] > 0 && shape[1..].contains(&0) {
            return Err(KernelError::Shape(format!(
                "global pooling of an empty image (only N may be 0): X has shape {shape:?}"
            )));
        }
        let xs = contiguous::<T>(x)?;
        let y: Vec<T> = (0..planes)
            .into_par_iter()
            .map(|p| {
                let plane = &xs[p * ilen..(p + 1) * ilen];
                if self.max {
                    plane
                        .iter()
                        .copied()
                        .fold(T::neg_infinity(), |m, v| if v > m { v } else { m })
                } else {
                    lane_sum(plane) / T::of(ilen as f64)
                }
            })
            .collect();
        let mut oshape = shape[..2].to_vec();
        oshape.extend(std::iter::repeat_n(1, shape.len() - 2));
        output(&oshape, y)
    }
}

impl Kernel for GlobalPool {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let dtype = x.dtype();
        let w = widen(x, 0)?;
        let y = match w {
            Tensor::F64(_) => self.typed::<f64>(&w)?,
            _ => self.typed::<f32>(&w)?,
        };
        Ok(vec![narrow(y, dtype)?])
    }
}

/// The sum of `values`, accumulated in 16 interleaved partial sums (a loop the compiler
/// vectorizes, where one running sum is a chain of dependent additions).
fn lane_sum<T: Real>(values: &[T]) -> T {
    const LANES: usize = 16;
    let mut partial = [T::ZERO; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        partial.iter_mut().zip(chunk).for_each(|(p, &v)| *p += v);
    }
    let tail: T = chunks.remainder().iter().copied().sum();
    partial.iter().copied().sum::<T>() + tail
}
