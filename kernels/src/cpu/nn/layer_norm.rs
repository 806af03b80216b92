//! `LayerNormalization` (opset 17): normalise over the dims from `axis` on, with `Scale` and the
//! optional `B` broadcast to those dims, and the optional `Mean` / `InvStdDev` outputs. Also
//! `spillway` `RMSNormalization` (what ONNX opset 23 names so, over the last axis, in `f32`):
//! `x / √(mean(x²) + ε) · Scale`, which the graph passes make of T5's norm written out op by op;
//! and ONNX's own `RMSNormalization` (opset 23): the same over the dims from `axis` on.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use ndarray::IxDyn;
use rayon::prelude::*;

use super::common::{Real, contiguous, min_opset, narrow, output, widen};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{Element, Tensor};

/// A built `LayerNormalization` or `RMSNormalization`.
#[derive(Debug)]
pub struct LayerNorm {
    axis: i64,
    epsilon: f64,
    outputs: usize,
    /// `RMSNormalization`: no mean is subtracted (the variance is the mean square).
    rms: bool,
    /// `spillway` `RMSNormalization`: over the last axis, `f32` only, with the scale broadcast
    /// as a `Mul` operand ([`LayerNorm::rms`]).
    contrib: bool,
}

/// Builds `spillway` `RMSNormalization` (attribute `epsilon`; inputs `X` and `Scale`).
pub fn build_rms(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    spec.attrs.only(&["epsilon"])?;
    if spec.num_outputs != 1 {
        return Err(KernelError::Arity(format!(
            "{} outputs, expected 1",
            spec.num_outputs
        )));
    }
    Ok(Box::new(LayerNorm {
        axis: -1,
        epsilon: spec.attrs.float("epsilon", 1e-5)? as f64,
        outputs: 1,
        rms: true,
        contrib: true,
    }))
}

/// Builds ONNX `RMSNormalization` (opset 23): `X / √(mean(X²) + ε) · Scale` over the dims from
/// `axis` on, `Scale` broadcast to them.
pub fn build_onnx_rms(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 23, "RMSNormalization")?;
    spec.attrs.only(&["axis", "epsilon", "stash_type"])?;
    float_stash(spec)?;
    if spec.num_inputs != 2 || spec.num_outputs != 1 {
        return Err(KernelError::Arity(
            "RMSNormalization takes two inputs and has one output".into(),
        ));
    }
    Ok(Box::new(LayerNorm {
        axis: spec.attrs.int("axis", -1)?,
        epsilon: spec.attrs.float("epsilon", 1e-5)? as f64,
        outputs: 1,
        rms: true,
        contrib: false,
    }))
}

/// Checks `stash_type`, the type the statistics are computed in and `Mean`/`InvStdDev` are
/// given in: 1 (float), the one implemented, or, for a node without those outputs, 0
/// (`UNDEFINED`, which ORT then reads as the default; with them, ORT's type inference refuses
/// it).
pub(crate) fn float_stash(spec: &NodeSpec<'_>) -> Result<()> {
    match spec.attrs.int("stash_type", 1)? {
        1 => Ok(()),
        0 if spec.num_outputs == 1 => Ok(()),
        stash => Err(KernelError::UnsupportedAttribute {
            name: "stash_type".into(),
            reason: format!("only 1 (float) is implemented, got {stash}"),
        }),
    }
}

/// Builds `LayerNormalization`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 17, "LayerNormalization")?;
    spec.attrs.only(&["axis", "epsilon", "stash_type"])?;
    float_stash(spec)?;
    if !(1..=3).contains(&spec.num_outputs) {
        return Err(KernelError::Arity(format!(
            "{} outputs, expected 1 to 3",
            spec.num_outputs
        )));
    }
    Ok(Box::new(LayerNorm {
        axis: spec.attrs.int("axis", -1)?,
        epsilon: spec.attrs.float("epsilon", 1e-5)? as f64,
        outputs: spec.num_outputs,
        rms: false,
        contrib: false,
    }))
}

/// Broadcasts a parameter to the normalised shape and flattens it to f64.
fn param(t: &Tensor, norm: &[usize], what: &str) -> Result<Vec<f64>> {
    let a = ndarray::ArrayD::from_shape_vec(IxDyn(t.shape()), t.to_f64_vec()?)
        .map_err(|e| KernelError::Shape(e.to_string()))?;
    let b = a
        .broadcast(IxDyn(norm))
        .ok_or_else(|| not_broadcastable(t, norm, what))?;
    Ok(b.iter().copied().collect())
}

/// A parameter of `X`'s own element type over the normalised shape: borrowed when it already
/// has that shape (the usual case, so nothing is converted on each run), else broadcast.
fn param_as<'a, T: Element + Clone>(
    t: &'a Tensor,
    norm: &[usize],
    what: &str,
) -> Result<Cow<'a, [T]>> {
    if t.shape() == norm {
        return contiguous::<T>(t);
    }
    let v = t.view::<T>()?;
    let b = v
        .broadcast(IxDyn(norm))
        .ok_or_else(|| not_broadcastable(t, norm, what))?;
    Ok(Cow::Owned(b.iter().cloned().collect()))
}

fn not_broadcastable(t: &Tensor, norm: &[usize], what: &str) -> KernelError {
    KernelError::Shape(format!(
        "{what} of shape {:?} does not broadcast to {norm:?}",
        t.shape()
    ))
}

/// Whether a parameter broadcasts to `shape` (the normalised shape in the usual case).
fn fits(t: &Tensor, shape: &[usize]) -> bool {
    t.rank() <= shape.len()
        && t.shape()
            .iter()
            .rev()
            .zip(shape.iter().rev())
            .all(|(&p, &n)| p == n || p == 1)
}

impl LayerNorm {
    /// `normalize(X) · Scale + B` when `Scale` or `B` has axes before the normalised ones
    /// (the ONNX function body's `Mul` and `Add` broadcast them, as ONNX Runtime does): each
    /// must broadcast to `X`'s whole shape, which `Y` keeps.
    fn parameters_over_x(
        &self,
        x: &Tensor,
        axis: usize,
        scale: &Tensor,
        bias: Option<&Tensor>,
    ) -> Result<Vec<Tensor>> {
        use crate::cpu::binary::arith::{ArithOp, arith_tensors};
        for (t, what) in [(Some(scale), "Scale"), (bias, "B")] {
            if let Some(t) = t
                && !fits(t, x.shape())
            {
                return Err(not_broadcastable(t, x.shape(), what));
            }
        }
        let inner = x.shape()[axis..].iter().product::<usize>();
        let w = widen(x, 0)?;
        let ones = vec![1.0; inner];
        let mut outs = match w {
            Tensor::F64(_) => self.typed::<f64>(&w, axis, &ones, None)?,
            _ => self.typed::<f32>(&w, axis, &ones, None)?,
        };
        let mut y = narrow(outs[0].clone(), x.dtype())?;
        y = arith_tensors(ArithOp::Mul, &y, scale)?;
        if let Some(b) = bias {
            y = arith_tensors(ArithOp::Add, &y, b)?;
        }
        outs[0] = y;
        Ok(outs)
    }

    fn typed<T: Real>(
        &self,
        x: &Tensor,
        axis: usize,
        scale: &[f64],
        bias: Option<&[f64]>,
    ) -> Result<Vec<Tensor>> {
        let shape = x.shape();
        let inner: usize = shape[axis..].iter().product();
        let outer: usize = shape[..axis].iter().product();
        let xs = contiguous::<T>(x)?;
        let mut y = vec![T::ZERO; xs.len()];
        let mut stats = vec![(0f32, 0f32); outer];
        if inner > 0 {
            y.par_chunks_mut(inner)
                .zip(xs.par_chunks(inner))
                .zip(stats.par_iter_mut())
                .for_each(|((yr, xr), st)| {
                    let f = |v: &T| v.to_f64().unwrap_or(f64::NAN);
                    let mean = match self.rms {
                        true => 0.0,
                        false => xr.iter().map(f).sum::<f64>() / inner as f64,
                    };
                    let var = xr.iter().map(|v| (f(v) - mean).powi(2)).sum::<f64>() / inner as f64;
                    let inv = 1.0 / (var + self.epsilon).sqrt();
                    for (i, (o, v)) in yr.iter_mut().zip(xr).enumerate() {
                        let b = bias.map_or(0.0, |b| b[i]);
                        *o = T::of((f(v) - mean) * inv * scale[i] + b);
                    }
                    *st = (mean as f32, inv as f32);
                });
        }
        self.with_stats(shape, axis, y, &stats)
    }

    /// `Y` of `shape`, with the `Mean` and `InvStdDev` outputs (one per row) when asked for.
    fn with_stats<T: Element>(
        &self,
        shape: &[usize],
        axis: usize,
        y: Vec<T>,
        stats: &[(f32, f32)],
    ) -> Result<Vec<Tensor>> {
        let mut outs = vec![output(shape, y)?];
        let mut sshape = shape[..axis].to_vec();
        sshape.extend(std::iter::repeat_n(1, shape.len() - axis));
        if self.outputs >= 2 {
            outs.push(output(&sshape, stats.iter().map(|s| s.0).collect())?);
        }
        if self.outputs >= 3 {
            outs.push(output(&sshape, stats.iter().map(|s| s.1).collect())?);
        }
        Ok(outs)
    }
}

/// [`LayerNorm::typed`] for `f32` with the parameters already `f32` and the normalised size
/// long: each row's mean and variance summed in eight `f64` lanes (which vectorize), the row
/// then normalised in `f32`. Returns the output and each row's (mean, 1 / standard deviation).
fn normalize_f32(xs: &[f32], inner: usize, params: RowParams<'_>) -> (Vec<f32>, Vec<(f32, f32)>) {
    let rows = xs.len() / inner;
    let mut stats = vec![(0f32, 0f32); rows];
    let y = crate::output_buffer::build(0, xs.len(), |y| {
        y.par_chunks_mut(inner)
            .zip(xs.par_chunks(inner))
            .zip(stats.par_iter_mut())
            .with_min_len(4)
            .for_each(|((yr, xr), st)| {
                *st = normalize_row_widest(xr, yr, &params);
            });
    });
    (y, stats)
}

/// What every row of a `LayerNormalization` is normalised with.
#[derive(Clone, Copy)]
struct RowParams<'a> {
    epsilon: f64,
    scale: &'a [f32],
    bias: Option<&'a [f32]>,
    /// `RMSNormalization`: the mean is taken as 0.
    rms: bool,
}

/// One row of [`normalize_f32`] compiled for AVX-512 where the CPU has it: the same
/// operations, so the same results, in 8 `f64` lanes a vector instead of the baseline's 2
/// (BERT-base's `[128, 768]` rows took 45 µs on 2 threads in the baseline's vectors).
fn normalize_row_widest(xr: &[f32], yr: &mut [MaybeUninit<f32>], p: &RowParams<'_>) -> (f32, f32) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn avx512(xr: &[f32], yr: &mut [MaybeUninit<f32>], p: &RowParams<'_>) -> (f32, f32) {
            normalize_row(xr, yr, p)
        }
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { avx512(xr, yr, p) };
        }
    }
    normalize_row(xr, yr, p)
}

/// Normalises the row `xr` into `yr`: its mean and variance summed in eight `f64` lanes, the
/// row then normalised in `f32`. Returns the row's (mean, 1 / standard deviation).
#[inline(always)]
fn normalize_row(xr: &[f32], yr: &mut [MaybeUninit<f32>], p: &RowParams<'_>) -> (f32, f32) {
    let (epsilon, scale, bias) = (p.epsilon, p.scale, p.bias);
    let inner = xr.len();
    let mean = match p.rms {
        true => 0.0,
        false => lane_sum(xr, |v| v as f64) / inner as f64,
    };
    let var = lane_sum(xr, |v| (v as f64 - mean).powi(2)) / inner as f64;
    let inv = 1.0 / (var + epsilon).sqrt();
    let (m, s) = (mean as f32, inv as f32);
    match bias {
        Some(b) => {
            for (((o, &v), &k), &b) in yr.iter_mut().zip(xr).zip(scale).zip(b) {
                o.write((v - m) * s * k + b);
            }
        }
        None => {
            for ((o, &v), &k) in yr.iter_mut().zip(xr).zip(scale) {
                o.write((v - m) * s * k + 0.0);
            }
        }
    }
    (m, s)
}

/// `Σ f(x)` over `xs` in eight interleaved `f64` partial sums.
#[inline(always)]
fn lane_sum(xs: &[f32], f: impl Fn(f32) -> f64) -> f64 {
    let mut lanes = [0f64; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l += f(v);
        }
    }
    lanes.iter().sum::<f64>() + chunks.remainder().iter().map(|&v| f(v)).sum::<f64>()
}

impl LayerNorm {
    /// `RMSNormalization` of the `f32` `x` over its last axis, times the vector `scale`
    /// broadcast as a `Mul` operand: a last axis of 1 grows to the scale's length.
    fn rms(&self, x: &Tensor, scale: &Tensor) -> Result<Vec<Tensor>> {
        let (Tensor::F32(_), Tensor::F32(_)) = (x, scale) else {
            let index = if x.dtype() == crate::DType::F32 { 1 } else { 0 };
            let dtype = [x, scale][index].dtype();
            return Err(KernelError::UnsupportedDType { index, dtype });
        };
        let (shape, n) = (x.shape(), scale.len());
        let d = *shape.last().unwrap_or(&1);
        if scale.shape().len() != 1 || !(d == n || d == 1 || n == 1) {
            return Err(not_broadcastable(
                scale,
                &shape[shape.len().max(1) - 1..],
                "Scale",
            ));
        }
        let (xs, w) = (contiguous::<f32>(x)?, contiguous::<f32>(scale)?);
        if d == 1 && n > 1 {
            let inv = |v: f32| (1.0 / ((v as f64).powi(2) + self.epsilon).sqrt()) as f32;
            let y = xs
                .iter()
                .flat_map(|&v| w.iter().map(move |&k| v * inv(v) * k))
                .collect();
            let mut grown = shape.to_vec();
            grown[shape.len() - 1] = n;
            return Ok(vec![output(&grown, y)?]);
        }
        if d == 0 {
            return Ok(vec![output(shape, Vec::<f32>::new())?]);
        }
        let scale = param_as::<f32>(scale, &shape[shape.len() - 1..], "Scale")?;
        let params = RowParams {
            epsilon: self.epsilon,
            scale: &scale,
            bias: None,
            rms: true,
        };
        Ok(vec![output(shape, normalize_f32(&xs, d, params).0)?])
    }
}

impl Kernel for LayerNorm {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let dtype = x.dtype();
        let rank = x.rank() as i64;
        let axis = if self.axis < 0 {
            self.axis + rank
        } else {
            self.axis
        };
        if axis < 0 || axis >= rank.max(1) {
            return Err(KernelError::BadAttribute {
                name: "axis".into(),
                reason: format!("{} is out of range for rank {rank}", self.axis),
            });
        }
        let axis = axis as usize;
        let norm = &x.shape()[axis..];
        let scale = input(inputs, 1)?;
        if scale.dtype() != dtype {
            return Err(KernelError::DTypeMismatch(format!(
                "Scale is {}, X is {dtype}",
                scale.dtype()
            )));
        }
        if self.contrib {
            return self.rms(x, scale);
        }
        let bias = opt_input(inputs, 2);
        if !fits(scale, norm) || bias.is_some_and(|b| !fits(b, norm)) {
            return self.parameters_over_x(x, axis, scale, bias);
        }
        let inner = norm.iter().product::<usize>();
        if let (Tensor::F32(_), true) = (x, inner > 0) {
            let scale = param_as::<f32>(scale, norm, "Scale")?;
            let bias = opt_input(inputs, 2)
                .map(|b| param_as::<f32>(b, norm, "B"))
                .transpose()?;
            let xs = contiguous::<f32>(x)?;
            let params = RowParams {
                epsilon: self.epsilon,
                scale: &scale,
                bias: bias.as_deref(),
                rms: self.rms,
            };
            let (y, stats) = normalize_f32(&xs, inner, params);
            return self.with_stats(x.shape(), axis, y, &stats);
        }
        let scale = param(scale, norm, "Scale")?;
        let bias = opt_input(inputs, 2)
            .map(|b| param(b, norm, "B"))
            .transpose()?;
        let w = widen(x, 0)?;
        let mut outs = match w {
            Tensor::F64(_) => self.typed::<f64>(&w, axis, &scale, bias.as_deref())?,
            _ => self.typed::<f32>(&w, axis, &scale, bias.as_deref())?,
        };
        outs[0] = narrow(outs[0].clone(), dtype)?;
        Ok(outs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attributes;
    use crate::test_values::uniform;

    fn rms_norm(epsilon: f32) -> Box<dyn Kernel> {
        let attrs = Attributes::new().with("epsilon", crate::AttrValue::Float(epsilon));
        let spec = NodeSpec {
            op_type: "RMSNormalization",
            domain: crate::cpu::nn::SPILLWAY_DOMAIN,
            opset: 1,
            attrs: &attrs,
            num_inputs: 2,
            num_outputs: 1,
            options: Default::default(),
        };
        build_rms(&spec).unwrap()
    }

    /// `w[j] · x / √(mean(x²) + ε)` for row `x`, in f64.
    fn reference(x: &[f32], w: &[f32], j: usize, v: f32, epsilon: f64) -> f64 {
        let ms = x.iter().map(|&a| (a as f64).powi(2)).sum::<f64>() / x.len() as f64;
        w[j % w.len()] as f64 * v as f64 / (ms + epsilon).sqrt()
    }

    /// Rows against the definition, with a scale per element and one broadcast scalar; a last
    /// axis of 1 grows to the scale's length (as `Mul` broadcasts it); a scale that does not
    /// broadcast and a non-`f32` input are refused.
    #[test]
    fn rms_rows_match_the_definition() {
        let kernel = rms_norm(1e-6);
        let (rows, d) = (6, 40);
        let xs = uniform(rows * d, 3);
        let x = Tensor::from_shape_vec(&[2, 3, d], xs.clone()).unwrap();
        for n in [d, 1] {
            let w = uniform(n, 5);
            let scale = Tensor::from_shape_vec(&[n], w.clone()).unwrap();
            let y = kernel.run(&[Some(&x), Some(&scale)]).unwrap().remove(0);
            assert_eq!(y.shape(), [2, 3, d]);
            for (i, &g) in y.to_f64_vec().unwrap().iter().enumerate() {
                let row = &xs[i / d * d..][..d];
                let want = reference(row, &w, i % d, xs[i], 1e-6);
                assert!(
                    (g - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "{i}: {g} vs {want}"
                );
            }
        }
        let column = Tensor::from_shape_vec(&[3, 1], vec![0.5f32, -2.0, 0.0]).unwrap();
        let w = vec![1.0f32, 2.0, -1.0, 0.5];
        let scale = Tensor::from_shape_vec(&[4], w.clone()).unwrap();
        let y = kernel
            .run(&[Some(&column), Some(&scale)])
            .unwrap()
            .remove(0);
        assert_eq!(y.shape(), [3, 4]);
        for (i, &g) in y.to_f64_vec().unwrap().iter().enumerate() {
            let v = [0.5f32, -2.0, 0.0][i / 4];
            let want = reference(&[v], &w, i % 4, v, 1e-6);
            assert!(
                (g - want).abs() <= 1e-6 * (1.0 + want.abs()),
                "{i}: {g} vs {want}"
            );
        }
        let wrong = Tensor::from_shape_vec(&[3], vec![1.0f32; 3]).unwrap();
        assert!(matches!(
            kernel.run(&[Some(&x), Some(&wrong)]),
            Err(KernelError::Shape(_))
        ));
        let x64 = Tensor::from_shape_vec(&[2, 2], vec![1.0f64; 4]).unwrap();
        let w64 = Tensor::from_shape_vec(&[2], vec![1.0f64; 2]).unwrap();
        assert!(matches!(
            kernel.run(&[Some(&x64), Some(&w64)]),
            Err(KernelError::UnsupportedDType { index: 0, .. })
        ));
    }
}
