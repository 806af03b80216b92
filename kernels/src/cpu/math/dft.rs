//! `DFT` (opsets 17, 20), `STFT` (17) and `MelWeightMatrix` (17), as the ONNX reference
//! computes them (numpy's FFT conventions), by the direct `O(n²)` sum in `f64`.
//!
//! Signals are real (`[..., 1]`) or complex (`[..., 2]`, real and imaginary). `DFT` transforms
//! along `axis` over `dft_length` points (the input cut or zero-padded to it): forward, with
//! `onesided` keeping the `n/2 + 1` first bins; inverse (divided by `n`), with `onesided` the
//! inverse of a real signal's one-sided spectrum (numpy's `irfft`: real output).

use std::f64::consts::PI;

use super::check_inputs;
use crate::cpu::binary::check_opset;
use crate::cpu::shape::cast::cast_tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::limits::checked_elements;
use crate::{DType, Tensor};

/// `Σ_t x[t] e^{∓2πi kt/n}` for the bins `0..bins` (`x` cut or zero-padded to `n`); the
/// inverse sign and a `1/n` factor when `inverse`.
fn dft(x: &[(f64, f64)], n: usize, bins: usize, inverse: bool) -> Vec<(f64, f64)> {
    let sign = if inverse { 1.0 } else { -1.0 };
    let len = x.len().min(n);
    (0..bins)
        .map(|k| {
            let (mut re, mut im) = (0.0, 0.0);
            for (t, &(a, b)) in x[..len].iter().enumerate() {
                // k·t mod n keeps the angle small, so the twiddle stays exact.
                let angle = sign * 2.0 * PI * ((k * t) % n) as f64 / n as f64;
                let (s, c) = angle.sin_cos();
                re += a * c - b * s;
                im += a * s + b * c;
            }
            if inverse {
                (re / n as f64, im / n as f64)
            } else {
                (re, im)
            }
        })
        .collect()
}

/// numpy's `irfft`: the real signal of `n` points whose one-sided spectrum is `x` (its first
/// `n/2 + 1` bins used, zero-padded; the imaginary parts of bin 0 and of bin `n/2` ignored).
fn irfft(x: &[(f64, f64)], n: usize) -> Vec<f64> {
    let half = n / 2 + 1;
    let bin = |k: usize| x.get(k).copied().unwrap_or((0.0, 0.0));
    (0..n)
        .map(|t| {
            let mut sum = bin(0).0;
            for k in 1..half {
                let (a, b) = bin(k);
                let angle = 2.0 * PI * ((k * t) % n) as f64 / n as f64;
                let (s, c) = angle.sin_cos();
                let term = a * c - b * s;
                // Bin n/2 of an even length has no mirror image.
                sum += if n.is_multiple_of(2) && k == n / 2 {
                    a * c
                } else {
                    2.0 * term
                };
            }
            sum / n as f64
        })
        .collect()
}

/// The signal's elements as complex numbers, the last dimension (1 or 2) taken off.
fn complex(x: &Tensor) -> Result<Vec<(f64, f64)>> {
    let parts = *x.shape().last().unwrap_or(&0);
    let v = x.to_f64_vec()?;
    match parts {
        1 => Ok(v.iter().map(|&a| (a, 0.0)).collect()),
        2 => Ok(v.chunks_exact(2).map(|c| (c[0], c[1])).collect()),
        _ => Err(KernelError::Shape(format!(
            "a signal's last dimension must be 1 (real) or 2 (complex), got {:?}",
            x.shape()
        ))),
    }
}

fn float_out(values: Vec<f64>, shape: &[usize], dtype: DType) -> Result<Tensor> {
    let t = Tensor::from_shape_vec(shape, values)?;
    if dtype == DType::F64 {
        Ok(t)
    } else {
        cast_tensor(&t, dtype)
    }
}

/// A built `DFT`.
#[derive(Debug)]
pub struct Dft {
    /// Opset 17's `axis` attribute; from opset 20 the axis is input 2.
    attr_axis: Option<i64>,
    inverse: bool,
    onesided: bool,
}

/// Builds `DFT`.
pub fn build_dft(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    check_opset(spec, 17)?;
    let attr_axis = if spec.opset < 20 {
        spec.attrs.only(&["axis", "inverse", "onesided"])?;
        Some(spec.attrs.int("axis", 1)?)
    } else {
        spec.attrs.only(&["inverse", "onesided"])?;
        None
    };
    let most = if spec.opset < 20 { 2 } else { 3 };
    if !(1..=most).contains(&spec.num_inputs) {
        return Err(KernelError::Arity(format!("DFT takes 1 to {most} inputs")));
    }
    Ok(Box::new(Dft {
        attr_axis,
        inverse: spec.attrs.flag("inverse", false)?,
        onesided: spec.attrs.flag("onesided", false)?,
    }))
}

fn scalar(t: &Tensor, what: &str) -> Result<i64> {
    match t.to_i64_vec()?.as_slice() {
        [v] => Ok(*v),
        _ => Err(KernelError::Shape(format!("{what} must be a scalar"))),
    }
}

impl Kernel for Dft {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let dtype = x.dtype();
        if !dtype.is_float() {
            return Err(KernelError::UnsupportedDType { index: 0, dtype });
        }
        let shape = x.shape();
        let rank = shape.len();
        if rank < 2 {
            return Err(KernelError::Shape(format!(
                "DFT needs rank >= 2, got {shape:?}"
            )));
        }
        let axis = match (self.attr_axis, opt_input(inputs, 2)) {
            (Some(a), _) => a,
            (None, Some(t)) => scalar(t, "axis")?,
            (None, None) => -2,
        };
        let r = rank as i64;
        let axis = usize::try_from(axis.rem_euclid(r)).expect("non-negative");
        if axis == rank - 1 {
            return Err(KernelError::Shape(
                "the DFT axis cannot be the real/imaginary dimension".into(),
            ));
        }
        let len = shape[axis];
        let n = match opt_input(inputs, 1) {
            Some(t) => crate::limits::dim(scalar(t, "dft_length")?, "dft_length")?,
            None if self.inverse && self.onesided => 2 * len.saturating_sub(1),
            None => len,
        };
        if n == 0 {
            return Err(KernelError::InvalidValue("dft_length is 0".into()));
        }
        let signal = complex(x)?;
        let outer: usize = shape[..axis].iter().product();
        let inner: usize = shape[axis + 1..rank - 1].iter().product();
        let (bins, parts) = match (self.inverse, self.onesided) {
            (false, true) => (n / 2 + 1, 2),
            (true, true) => (n, 1),
            _ => (n, 2),
        };
        let mut out_shape = shape.to_vec();
        out_shape[axis] = bins;
        out_shape[rank - 1] = parts;
        let total = checked_elements(&out_shape, 8)?;
        let mut out = vec![0f64; total];
        let mut lane = Vec::with_capacity(len);
        for o in 0..outer {
            for i in 0..inner {
                lane.clear();
                lane.extend((0..len).map(|t| signal[(o * len + t) * inner + i]));
                let at = |k: usize| ((o * bins + k) * inner + i) * parts;
                if self.inverse && self.onesided {
                    for (k, v) in irfft(&lane, n).into_iter().enumerate() {
                        out[at(k)] = v;
                    }
                } else {
                    for (k, (re, im)) in dft(&lane, n, bins, self.inverse).into_iter().enumerate() {
                        out[at(k)] = re;
                        out[at(k) + 1] = im;
                    }
                }
            }
        }
        Ok(vec![float_out(out, &out_shape, dtype)?])
    }
}

/// A built `STFT`: frames of the signal `[batch, length, 1 or 2]`, `frame_step` apart,
/// weighted by `window` (ones when absent), each transformed over `frame_length` points;
/// output `[batch, frames, bins, 2]`.
#[derive(Debug)]
pub struct Stft {
    onesided: bool,
}

/// Builds `STFT`.
pub fn build_stft(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    check_opset(spec, 17)?;
    spec.attrs.only(&["onesided"])?;
    if !(2..=4).contains(&spec.num_inputs) {
        return Err(KernelError::Arity("STFT takes 2 to 4 inputs".into()));
    }
    Ok(Box::new(Stft {
        onesided: spec.attrs.flag("onesided", true)?,
    }))
}

impl Kernel for Stft {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let dtype = x.dtype();
        if !dtype.is_float() {
            return Err(KernelError::UnsupportedDType { index: 0, dtype });
        }
        let &[batch, len, _] = x.shape() else {
            return Err(KernelError::Shape(format!(
                "STFT takes a [batch, length, 1 or 2] signal, got {:?}",
                x.shape()
            )));
        };
        let step = scalar(input(inputs, 1)?, "frame_step")?;
        let step = usize::try_from(step)
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| {
                KernelError::InvalidValue(format!("frame_step must be positive, got {step}"))
            })?;
        let window = opt_input(inputs, 2).map(Tensor::to_f64_vec).transpose()?;
        let frame_length = match (opt_input(inputs, 3), &window) {
            (Some(t), _) => crate::limits::dim(scalar(t, "frame_length")?, "frame_length")?,
            (None, Some(w)) => w.len(),
            (None, None) => len,
        };
        if frame_length == 0 || frame_length > len {
            return Err(KernelError::InvalidValue(format!(
                "frame_length {frame_length} does not fit a signal of {len}"
            )));
        }
        let window = window.unwrap_or_else(|| vec![1.0; frame_length]);
        let frames = 1 + (len - frame_length) / step;
        let bins = if self.onesided {
            frame_length / 2 + 1
        } else {
            frame_length
        };
        let signal = complex(x)?;
        let out_shape = [batch, frames, bins, 2];
        let total = checked_elements(&out_shape, 8)?;
        let mut out = Vec::with_capacity(total);
        for b in 0..batch {
            for f in 0..frames {
                let start = f * step;
                let frame: Vec<(f64, f64)> = window
                    .iter()
                    .enumerate()
                    .map(|(t, &w)| {
                        let (re, im) = signal.get(b * len + start + t).copied().unwrap_or_default();
                        // Past the signal's end the frame is zero-padded.
                        if start + t < len {
                            (re * w, im * w)
                        } else {
                            (0.0, 0.0)
                        }
                    })
                    .collect();
                for (re, im) in dft(&frame, frame_length, bins, false) {
                    out.push(re);
                    out.push(im);
                }
            }
        }
        Ok(vec![float_out(out, &out_shape, dtype)?])
    }
}

/// A built `MelWeightMatrix`: `[dft_length / 2 + 1, num_mel_bins]` triangular filters on the
/// mel scale between the edge frequencies.
#[derive(Debug)]
pub struct MelWeightMatrix {
    dtype: DType,
}

/// Builds `MelWeightMatrix`.
pub fn build_mel(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    check_opset(spec, 17)?;
    spec.attrs.only(&["output_datatype"])?;
    check_inputs(spec, 5)?;
    let code = spec.attrs.int("output_datatype", 1)?;
    let dtype = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .filter(|d| d.is_float() || d.is_int())
        .ok_or_else(|| KernelError::BadAttribute {
            name: "output_datatype".into(),
            reason: format!("{code} is not a numeric element type"),
        })?;
    Ok(Box::new(MelWeightMatrix { dtype }))
}

impl Kernel for MelWeightMatrix {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let int = |i: usize, what: &str| -> Result<usize> {
            crate::limits::dim(scalar(input(inputs, i)?, what)?, what)
        };
        let float = |i: usize| -> Result<f64> {
            match input(inputs, i)?.to_f64_vec()?.as_slice() {
                [v] => Ok(*v),
                _ => Err(KernelError::Shape(
                    "the edge frequencies must be scalars".into(),
                )),
            }
        };
        let (mels, dft_length, rate) = (
            int(0, "num_mel_bins")?,
            int(1, "dft_length")?,
            int(2, "sample_rate")?,
        );
        let (low, high) = (float(3)?, float(4)?);
        if rate == 0 {
            return Err(KernelError::InvalidValue("sample_rate is 0".into()));
        }
        let spectrum = dft_length / 2 + 1;
        let shape = [spectrum, mels];
        let total = checked_elements(&shape, 8)?;
        let mel = |hz: f64| 2595.0 * (1.0 + hz / 700.0).log10();
        let (low_mel, high_mel) = (mel(low), mel(high));
        let step = (high_mel - low_mel) / (mels + 2) as f64;
        let bins: Vec<i64> = (0..mels + 2)
            .map(|i| {
                let hz = 700.0 * (10f64.powf((i as f64 * step + low_mel) / 2595.0) - 1.0);
                (((dft_length + 1) as f64 * hz) / rate as f64).floor() as i64
            })
            .collect();
        let mut out = vec![0f64; total];
        let mut set = |j: i64, i: usize, v: f64| -> Result<()> {
            let j = usize::try_from(j)
                .ok()
                .filter(|&j| j < spectrum)
                .ok_or_else(|| {
                    KernelError::InvalidValue(format!("mel bin edge {j} is outside the spectrum"))
                })?;
            out[j * mels + i] = v;
            Ok(())
        };
        for i in 0..mels {
            let (left, center, right) = (bins[i], bins[i + 1], bins[i + 2]);
            if center == left {
                set(center, i, 1.0)?;
            } else {
                for j in left..=center {
                    set(j, i, (j - left) as f64 / (center - left) as f64)?;
                }
            }
            if right > center {
                for j in center..right {
                    set(j, i, (right - j) as f64 / (right - center) as f64)?;
                }
            }
        }
        let t = Tensor::from_shape_vec(&shape, out)?;
        Ok(vec![cast_tensor(&t, self.dtype)?])
    }
}
