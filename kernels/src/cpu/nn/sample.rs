//! `GridSample` (opsets 16, 20, 22) and `AffineGrid` (20), as the ONNX reference computes them.
//!
//! GridSample reads `X` (`[N, C, *in]`, 2-D or 3-D images) at the normalised coordinates of
//! `grid` (`[N, *out, nd]`, `(x, y[, z])` in `[-1, 1]`), by `nearest`, `linear` (`bilinear`)
//! or `cubic` (`bicubic`) interpolation; `padding_mode` `zeros`, `border` or `reflection`
//! says what lies outside. AffineGrid makes such a grid from affine matrices `theta`
//! (`[N, 2, 3]` or `[N, 3, 4]`) for an output `size`. Computed in `f64`; the coordinates,
//! which decide the taps, are rounded as the reference's `float32` arithmetic rounds them.

use super::common::min_opset;
use crate::cpu::shape::cast::cast_tensor;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::limits::checked_elements;
use crate::{DType, Tensor};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// A built `GridSample`.
#[derive(Debug)]
pub struct GridSample {
    mode: Mode,
    padding: Padding,
    align_corners: bool,
}

/// Builds `GridSample`.
pub fn build_grid_sample(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 16, "GridSample")?;
    spec.attrs
        .only(&["align_corners", "mode", "padding_mode"])?;
    if spec.num_inputs != 2 {
        return Err(KernelError::Arity("GridSample takes two inputs".into()));
    }
    let default = if spec.opset >= 20 {
        "linear"
    } else {
        "bilinear"
    };
    let mode = match spec.attrs.string("mode", default)?.as_str() {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        other => {
            return Err(KernelError::BadAttribute {
                name: "mode".into(),
                reason: format!("unknown mode '{other}'"),
            });
        }
    };
    let padding = match spec.attrs.string("padding_mode", "zeros")?.as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        other => {
            return Err(KernelError::BadAttribute {
                name: "padding_mode".into(),
                reason: format!("unknown padding mode '{other}'"),
            });
        }
    };
    Ok(Box::new(GridSample {
        mode,
        padding,
        align_corners: spec.attrs.flag("align_corners", false)?,
    }))
}

/// Reflects `x` at the borders until it lies within `[lo, hi]`.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    if x < lo {
        let dx = lo - x;
        let n = (dx / range).trunc();
        let r = dx - n * range;
        if n % 2.0 == 0.0 { lo + r } else { hi - r }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / range).trunc();
        let r = dx - n * range;
        if n % 2.0 == 0.0 { hi - r } else { lo + r }
    } else {
        x
    }
}

/// Keys' cubic convolution weights (α = -0.75) of the four taps around a point at `t` past
/// the second.
fn cubic_weights(t: f64) -> [f64; 4] {
    let a = -0.75;
    let x = t.abs();
    let far = |x: f64| ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    let near = |x: f64| ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    [far(x + 1.0), near(x), near(1.0 - x), far(2.0 - x)]
}

impl GridSample {
    /// The tap index `i` of a dim of `size` as padding has it, or `None` for a zero.
    fn tap(&self, i: i64, size: usize, lo: f64, hi: f64) -> Option<usize> {
        match self.padding {
            Padding::Zeros => usize::try_from(i).ok().filter(|&i| i < size),
            Padding::Border => (size > 0).then(|| i.clamp(0, size as i64 - 1) as usize),
            Padding::Reflection => {
                let r = reflect(i as f64, lo, hi) as i64;
                usize::try_from(r).ok().filter(|&r| r < size)
            }
        }
    }
}

impl Kernel for GridSample {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (x, grid) = (input(inputs, 0)?, input(inputs, 1)?);
        let dtype = x.dtype();
        if !dtype.is_float() {
            return Err(KernelError::UnsupportedDType { index: 0, dtype });
        }
        let (xs_shape, gs) = (x.shape(), grid.shape());
        let nd = xs_shape.len().saturating_sub(2);
        if !(1..=3).contains(&nd) || gs.len() != nd + 2 || gs[0] != xs_shape[0] || gs[nd + 1] != nd
        {
            return Err(KernelError::Shape(format!(
                "X {xs_shape:?} and grid {gs:?} do not fit (grid [N, *out, {nd}])"
            )));
        }
        let (n, c) = (xs_shape[0], xs_shape[1]);
        let dims = &xs_shape[2..];
        let mut out_shape = vec![n, c];
        out_shape.extend_from_slice(&gs[1..nd + 1]);
        let total = checked_elements(&out_shape, 8)?;
        let points: usize = gs[1..nd + 1].iter().product();
        let plane: usize = dims.iter().product();
        let single = grid.dtype() != DType::F64;
        let round = |v: f64| if single { v as f32 as f64 } else { v };
        let xs = x.to_f64_vec()?;
        let g = grid.to_f64_vec()?;
        let borders: Vec<(f64, f64)> = dims
            .iter()
            .map(|&d| match self.align_corners {
                true => (0.0, d as f64 - 1.0),
                false => (-0.5, d as f64 - 0.5),
            })
            .collect();
        let mut out = vec![0f64; total];
        let mut coords = vec![0f64; nd];
        // Per dim: the taps (index or zero) and their weights.
        let mut taps: Vec<Vec<(Option<usize>, f64)>> = vec![Vec::new(); nd];
        let mut pick = vec![0usize; nd];
        for ni in 0..n {
            for p in 0..points {
                let gp = &g[(ni * points + p) * nd..(ni * points + p + 1) * nd];
                for d in 0..nd {
                    // The grid lists x (the last dim) first.
                    let v = gp[nd - 1 - d];
                    let len = dims[d] as f64;
                    let mut x = if self.align_corners {
                        round(round(round(v + 1.0) / 2.0) * (len - 1.0))
                    } else {
                        round(round(round(round(v + 1.0) * len) - 1.0) / 2.0)
                    };
                    if self.mode == Mode::Nearest {
                        x = x.round_ties_even();
                    }
                    let (lo, hi) = borders[d];
                    if x < lo || x > hi {
                        match self.padding {
                            Padding::Border => x = x.clamp(0.0, len - 1.0),
                            Padding::Reflection => x = round(reflect(x, lo, hi)),
                            Padding::Zeros => {}
                        }
                    }
                    coords[d] = x;
                }
                for d in 0..nd {
                    let (lo, hi) = borders[d];
                    let x = coords[d];
                    let at = |i: i64| self.tap(i, dims[d], lo, hi);
                    taps[d].clear();
                    match self.mode {
                        Mode::Nearest => taps[d].push((at(x as i64), 1.0)),
                        Mode::Linear => {
                            let f = x.floor();
                            let t = x - f;
                            taps[d].push((at(f as i64), 1.0 - t));
                            taps[d].push((at((f as i64).saturating_add(1)), t));
                        }
                        Mode::Cubic => {
                            let f = x.floor();
                            let w = cubic_weights(x - f);
                            for (k, &w) in w.iter().enumerate() {
                                let i = (f as i64).saturating_sub(1).saturating_add(k as i64);
                                taps[d].push((at(i), w));
                            }
                        }
                    }
                }
                for ci in 0..c {
                    let img = &xs[(ni * c + ci) * plane..(ni * c + ci + 1) * plane];
                    // The separable sum over every combination of taps.
                    let mut sum = 0.0;
                    pick.fill(0);
                    'taps: loop {
                        let mut weight = 1.0;
                        let mut at = Some(0usize);
                        for d in 0..nd {
                            let (i, w) = taps[d][pick[d]];
                            weight *= w;
                            at = at.zip(i).map(|(a, i)| a * dims[d] + i);
                        }
                        if let Some(a) = at {
                            sum += weight * img[a];
                        }
                        let mut d = nd;
                        loop {
                            if d == 0 {
                                break 'taps;
                            }
                            d -= 1;
                            pick[d] += 1;
                            if pick[d] < taps[d].len() {
                                break;
                            }
                            pick[d] = 0;
                        }
                    }
                    out[(ni * c + ci) * points + p] = sum;
                }
            }
        }
        let t = Tensor::from_shape_vec(&out_shape, out)?;
        Ok(vec![if dtype == DType::F64 {
            t
        } else {
            cast_tensor(&t, dtype)?
        }])
    }
}

/// A built `AffineGrid`.
#[derive(Debug)]
pub struct AffineGrid {
    align_corners: bool,
}

/// Builds `AffineGrid`.
pub fn build_affine_grid(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec.opset, 20, "AffineGrid")?;
    spec.attrs.only(&["align_corners"])?;
    if spec.num_inputs != 2 {
        return Err(KernelError::Arity("AffineGrid takes two inputs".into()));
    }
    Ok(Box::new(AffineGrid {
        align_corners: spec.attrs.flag("align_corners", false)?,
    }))
}

impl Kernel for AffineGrid {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let (theta, size) = (input(inputs, 0)?, input(inputs, 1)?);
        let dtype = theta.dtype();
        if !dtype.is_float() {
            return Err(KernelError::UnsupportedDType { index: 0, dtype });
        }
        let size: Vec<usize> = size
            .to_i64_vec()?
            .iter()
            .map(|&v| crate::limits::dim(v, "size"))
            .collect::<Result<_>>()?;
        let nd = size.len().saturating_sub(2);
        let n = size.first().copied().unwrap_or(0);
        if !(2..=3).contains(&nd) || theta.shape() != [n, nd, nd + 1] {
            return Err(KernelError::Shape(format!(
                "theta {:?} does not fit size {size:?} (theta [N, {nd}, {}])",
                theta.shape(),
                nd + 1
            )));
        }
        let spatial = &size[2..];
        let mut out_shape = vec![n];
        out_shape.extend_from_slice(spatial);
        out_shape.push(nd);
        let total = checked_elements(&out_shape, 8)?;
        let coord = |i: usize, len: usize| -> f64 {
            match (self.align_corners, len) {
                (true, 1) => -1.0,
                (true, _) => -1.0 + i as f64 * 2.0 / (len - 1) as f64,
                (false, _) => {
                    let step = 2.0 / len as f64;
                    -1.0 + step / 2.0 + i as f64 * step
                }
            }
        };
        let th = theta.to_f64_vec()?;
        let points: usize = spatial.iter().product();
        let mut out = Vec::with_capacity(total);
        let mut idx = vec![0usize; nd];
        for ni in 0..n {
            let m = &th[ni * nd * (nd + 1)..(ni + 1) * nd * (nd + 1)];
            for p in 0..points {
                let mut rest = p;
                for d in (0..nd).rev() {
                    idx[d] = rest % spatial[d];
                    rest /= spatial[d];
                }
                // Homogeneous (x, y[, z], 1): x runs along the last dim.
                let mut h: Vec<f64> = (0..nd)
                    .map(|k| coord(idx[nd - 1 - k], spatial[nd - 1 - k]))
                    .collect();
                h.push(1.0);
                for r in 0..nd {
                    out.push((0..=nd).map(|k| m[r * (nd + 1) + k] * h[k]).sum::<f64>());
                }
            }
        }
        let t = Tensor::from_shape_vec(&out_shape, out)?;
        Ok(vec![if dtype == DType::F64 {
            t
        } else {
            cast_tensor(&t, dtype)?
        }])
    }
}
