//! Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9): separable nearest,
//! linear and cubic interpolation, one axis at a time, like the onnx reference
//! implementation: in f64, except f32 tensors, computed in f32 as ONNX Runtime does.

use half::{bf16, f16};
use num_traits::ToPrimitive;

use super::resize_axis::{AxisParams, AxisPlan, Coord, Interp, Nearest, Sample, apply, plan};
use super::util::{min_opset, norm_axes, tensor_from};
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input, opt_input};
use crate::{DType, Tensor, dispatch_numeric};

/// How `sizes` are reconciled with the input's aspect ratio (opset 18+).
#[derive(Debug, Clone, Copy, PartialEq)]
enum AspectPolicy {
    Stretch,
    NotLarger,
    NotSmaller,
}

/// Where the scales come from.
#[derive(Debug, Clone, PartialEq)]
enum Inputs {
    /// Upsample-7: `scales` attribute.
    ScalesAttr(Vec<f32>),
    /// Upsample-9 and Resize-10: `(X, scales)`.
    ScalesInput,
    /// Resize-11+: `(X, roi, scales, sizes)`.
    Full,
}

/// Resize or Upsample.
#[derive(Debug)]
pub struct Resize {
    inputs: Inputs,
    coord: Coord,
    interp: Interp,
    antialias: bool,
    exclude_outside: bool,
    extrapolation: f64,
    axes: Option<Vec<i64>>,
    policy: AspectPolicy,
}

fn unsupported(name: &str, reason: String) -> KernelError {
    KernelError::UnsupportedAttribute {
        name: name.into(),
        reason,
    }
}

fn parse_mode(mode: &str, nearest: Nearest, cubic_a: f64) -> Result<Interp> {
    Ok(match mode {
        "nearest" => Interp::Nearest(nearest),
        "linear" | "bilinear" => Interp::Linear,
        "cubic" => Interp::Cubic { a: cubic_a },
        m => return Err(unsupported("mode", format!("unknown mode '{m}'"))),
    })
}

/// Builds [`Resize`] for `Upsample` (asymmetric coordinates, floor rounding).
pub fn build_upsample(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(parse_upsample(spec)?))
}

/// [`Resize`] for `Upsample`.
pub(crate) fn parse_upsample(spec: &NodeSpec<'_>) -> Result<Resize> {
    min_opset(spec, 7)?;
    let a = spec.attrs;
    let inputs = if spec.opset < 9 {
        a.only(&["mode", "scales"])?;
        Inputs::ScalesAttr(
            a.opt_floats("scales")?
                .ok_or_else(|| KernelError::BadAttribute {
                    name: "scales".into(),
                    reason: "required".into(),
                })?,
        )
    } else {
        a.only(&["mode"])?;
        Inputs::ScalesInput
    };
    let interp = parse_mode(&a.string("mode", "nearest")?, Nearest::Floor, -0.75)?;
    if matches!(interp, Interp::Cubic { .. }) {
        return Err(unsupported("mode", "Upsample has no cubic mode".into()));
    }
    Ok(Resize {
        inputs,
        coord: Coord::Asymmetric,
        interp,
        antialias: false,
        exclude_outside: false,
        extrapolation: 0.0,
        axes: None,
        policy: AspectPolicy::Stretch,
    })
}

/// Builds [`Resize`]. Opset 10 behaves like Upsample (asymmetric, floor).
pub fn build_resize(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    Ok(Box::new(parse_resize(spec)?))
}

/// [`Resize`] for `Resize`.
pub(crate) fn parse_resize(spec: &NodeSpec<'_>) -> Result<Resize> {
    min_opset(spec, 10)?;
    let a = spec.attrs;
    if spec.opset == 10 {
        a.only(&["mode"])?;
        let interp = parse_mode(&a.string("mode", "nearest")?, Nearest::Floor, -0.75)?;
        if matches!(interp, Interp::Cubic { .. }) {
            return Err(unsupported("mode", "Resize-10 has no cubic mode".into()));
        }
        return Ok(Resize {
            inputs: Inputs::ScalesInput,
            coord: Coord::Asymmetric,
            interp,
            antialias: false,
            exclude_outside: false,
            extrapolation: 0.0,
            axes: None,
            policy: AspectPolicy::Stretch,
        });
    }
    let mut known = vec![
        "mode",
        "coordinate_transformation_mode",
        "cubic_coeff_a",
        "exclude_outside",
        "extrapolation_value",
        "nearest_mode",
    ];
    if spec.opset >= 18 {
        known.extend(["antialias", "axes", "keep_aspect_ratio_policy"]);
    }
    a.only(&known)?;
    let ctm = a.string("coordinate_transformation_mode", "half_pixel")?;
    let coord = match ctm.as_str() {
        "half_pixel" => Coord::HalfPixel,
        "half_pixel_symmetric" if spec.opset >= 19 => Coord::HalfPixelSymmetric,
        "pytorch_half_pixel" => Coord::PytorchHalfPixel,
        "align_corners" => Coord::AlignCorners,
        "asymmetric" => Coord::Asymmetric,
        "tf_half_pixel_for_nn" if spec.opset < 13 => Coord::TfHalfPixelForNn,
        "tf_crop_and_resize" => Coord::TfCropAndResize,
        m => {
            return Err(unsupported(
                "coordinate_transformation_mode",
                format!("'{m}' is not valid at opset {}", spec.opset),
            ));
        }
    };
    let nearest = match a.string("nearest_mode", "round_prefer_floor")?.as_str() {
        "round_prefer_floor" => Nearest::RoundPreferFloor,
        "round_prefer_ceil" => Nearest::RoundPreferCeil,
        "floor" => Nearest::Floor,
        "ceil" => Nearest::Ceil,
        m => {
            return Err(unsupported(
                "nearest_mode",
                format!("unknown nearest_mode '{m}'"),
            ));
        }
    };
    let interp = parse_mode(
        &a.string("mode", "nearest")?,
        nearest,
        a.float("cubic_coeff_a", -0.75)? as f64,
    )?;
    let antialias = a.int("antialias", 0)? != 0;
    if antialias && matches!(interp, Interp::Nearest(_)) {
        return Err(unsupported(
            "antialias",
            "antialias applies to linear and cubic modes only".into(),
        ));
    }
    let policy = match a.string("keep_aspect_ratio_policy", "stretch")?.as_str() {
        "stretch" => AspectPolicy::Stretch,
        "not_larger" => AspectPolicy::NotLarger,
        "not_smaller" => AspectPolicy::NotSmaller,
        m => {
            return Err(unsupported(
                "keep_aspect_ratio_policy",
                format!("unknown policy '{m}'"),
            ));
        }
    };
    Ok(Resize {
        inputs: Inputs::Full,
        coord,
        interp,
        antialias,
        exclude_outside: a.int("exclude_outside", 0)? != 0,
        extrapolation: a.float("extrapolation_value", 0.0)? as f64,
        axes: a.opt_ints("axes")?,
        policy,
    })
}

/// A present, non-empty optional input.
fn given<'a>(inputs: &[Option<&'a Tensor>], i: usize) -> Option<&'a Tensor> {
    opt_input(inputs, i).filter(|t| !t.is_empty())
}

impl Resize {
    /// Output sizes, scales and roi for every axis of `shape`, plus the axes to resize in order;
    /// `single`: scales computed from sizes in `f32`, as ONNX Runtime does for `f32` tensors.
    #[allow(clippy::type_complexity)]
    fn geometry(
        &self,
        inputs: &[Option<&Tensor>],
        shape: &[usize],
        single: bool,
    ) -> Result<(Vec<usize>, Vec<f64>, Vec<(f64, f64)>, Vec<usize>)> {
        let r = shape.len();
        let axes = match &self.axes {
            Some(a) => norm_axes(a, r)?,
            None => (0..r).collect(),
        };
        let (scales, sizes, roi) = match &self.inputs {
            Inputs::ScalesAttr(s) => (
                Some(s.iter().map(|&v| v as f64).collect::<Vec<_>>()),
                None,
                None,
            ),
            Inputs::ScalesInput => (Some(input(inputs, 1)?.to_f64_vec()?), None, None),
            Inputs::Full => (
                given(inputs, 2).map(Tensor::to_f64_vec).transpose()?,
                given(inputs, 3).map(Tensor::to_i64_vec).transpose()?,
                given(inputs, 1).map(Tensor::to_f64_vec).transpose()?,
            ),
        };
        // An empty `scales` beside `sizes` is how Resize-11 exporters say "no scales"; the
        // other way round, `sizes` present even empty is a second answer (ORT refuses it too).
        let sizes_named = opt_input(inputs, 3).is_some() && matches!(self.inputs, Inputs::Full);
        let mut out: Vec<usize> = shape.to_vec();
        let mut sc = vec![1.0; r];
        match (scales, sizes) {
            (Some(_), None) if sizes_named => {
                return Err(KernelError::InvalidValue(
                    "Resize: give scales or sizes, not both (sizes is given, empty)".into(),
                ));
            }
            (Some(_), Some(_)) => {
                return Err(KernelError::InvalidValue(
                    "Resize: give scales or sizes, not both".into(),
                ));
            }
            (None, None) => return Err(KernelError::Arity("Resize needs scales or sizes".into())),
            (Some(s), None) => {
                if s.len() != axes.len() || s.iter().any(|&v| v.is_nan() || v <= 0.0) {
                    return Err(KernelError::InvalidValue(format!(
                        "Resize scales {s:?} must be {} positive values",
                        axes.len()
                    )));
                }
                for (&ax, &v) in axes.iter().zip(&s) {
                    sc[ax] = v;
                    out[ax] = (v * shape[ax] as f64) as usize;
                }
            }
            (None, Some(z)) => {
                if z.len() != axes.len() || z.iter().any(|&v| v < 0) {
                    return Err(KernelError::InvalidValue(format!(
                        "Resize sizes {z:?} must be {} non-negative values",
                        axes.len()
                    )));
                }
                for (&ax, &v) in axes.iter().zip(&z) {
                    sc[ax] = if single {
                        f64::from(v as f32 / shape[ax] as f32)
                    } else {
                        v as f64 / shape[ax] as f64
                    };
                    out[ax] = v as usize;
                }
                if self.policy != AspectPolicy::Stretch {
                    let pick = axes.iter().map(|&ax| sc[ax]);
                    let s = if self.policy == AspectPolicy::NotLarger {
                        pick.fold(f64::INFINITY, f64::min)
                    } else {
                        pick.fold(f64::NEG_INFINITY, f64::max)
                    };
                    for &ax in &axes {
                        sc[ax] = s;
                        out[ax] = (s * shape[ax] as f64 + 0.5) as usize;
                    }
                }
            }
        }
        let mut rois = vec![(0.0, 1.0); r];
        if let Some(roi) = roi.filter(|_| self.coord == Coord::TfCropAndResize) {
            if roi.len() != 2 * axes.len() {
                return Err(KernelError::Shape(format!(
                    "Resize roi has {} values for {} axes",
                    roi.len(),
                    axes.len()
                )));
            }
            for (i, &ax) in axes.iter().enumerate() {
                rois[ax] = (roi[i], roi[axes.len() + i]);
            }
        } else if self.coord == Coord::TfCropAndResize {
            return Err(KernelError::Arity(
                "tf_crop_and_resize needs a roi input".into(),
            ));
        }
        for &ax in &axes {
            if shape[ax] == 0 && out[ax] != 0 {
                return Err(KernelError::InvalidValue(format!(
                    "cannot resize an empty axis {ax} to {}",
                    out[ax]
                )));
            }
        }
        Ok((out, sc, rois, axes))
    }
}

/// One pass of a separable resize: `axis` of a tensor of `shape` (the previous passes'
/// output) resampled by `plan`.
#[derive(Debug)]
pub(crate) struct ResizePass {
    pub axis: usize,
    pub shape: Vec<usize>,
    pub plan: AxisPlan,
}

/// Outputs of the innermost axis's pass cost this many times an outer axis's: each is a
/// gather of a few scattered inputs, where an outer axis blends whole rows in vectors.
const GATHER_COST: usize = 4;

/// The work of resizing `in_shape` to `out_shape` along `order`, pass after pass: each pass's
/// output size, weighted by [`GATHER_COST`] for the innermost axis.
fn pass_cost(in_shape: &[usize], out_shape: &[usize], order: &[usize]) -> usize {
    let mut shape = in_shape.to_vec();
    order
        .iter()
        .map(|&ax| {
            shape[ax] = out_shape[ax];
            let weight = if ax + 1 == shape.len() {
                GATHER_COST
            } else {
                1
            };
            shape.iter().product::<usize>() * weight
        })
        .sum()
}

impl Resize {
    /// The passes that resize `in_shape` to `out_shape`, in order; identity axes are skipped.
    fn passes(
        &self,
        in_shape: &[usize],
        out_shape: &[usize],
        scales: &[f64],
        rois: &[(f64, f64)],
        axes: &[usize],
        single: bool,
    ) -> Vec<ResizePass> {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
        let identity = |ax: usize| {
            let (s, e) = rois[ax];
            close(scales[ax], 1.0)
                && out_shape[ax] == in_shape[ax]
                && (close(s, 0.0) || s == 0.0)
                && close(e, 1.0)
        };
        // Each pass costs about its output's size: the axes that shrink most go first and
        // those that grow most last, so the intermediates stay small. Between equal growths
        // the inner axis goes first: its pass gathers element by element, an outer axis's
        // blends whole rows.
        let growth = |ax: usize| out_shape[ax] as f64 / in_shape[ax].max(1) as f64;
        let mut order: Vec<usize> = axes.iter().copied().filter(|&ax| !identity(ax)).collect();
        order.sort_by(|&a, &b| growth(a).total_cmp(&growth(b)).then(b.cmp(&a)));
        // The innermost axis's gather costs several times a row blend per output: it goes
        // last where that is cheaper overall (SSD's 480×640 → 320×320 image: 307 200
        // gathered outputs instead of 460 800).
        if let Some(pos) = order.iter().position(|&ax| ax + 1 == in_shape.len()) {
            let mut inner_last = order.clone();
            let inner = inner_last.remove(pos);
            inner_last.push(inner);
            if pass_cost(in_shape, out_shape, &inner_last) < pass_cost(in_shape, out_shape, &order)
            {
                order = inner_last;
            }
        }
        let mut shape = in_shape.to_vec();
        order
            .into_iter()
            .map(|ax| {
                let p = AxisParams {
                    in_len: shape[ax],
                    out_len: out_shape[ax],
                    scale: scales[ax],
                    roi: rois[ax],
                    coord: self.coord,
                    interp: self.interp,
                    antialias: self.antialias,
                    exclude_outside: self.exclude_outside,
                    single,
                };
                let pass = ResizePass {
                    axis: ax,
                    shape: shape.clone(),
                    plan: plan(&p),
                };
                shape[ax] = out_shape[ax];
                pass
            })
            .collect()
    }

    /// Resizes `data` (laid out as `shape`) axis after axis.
    fn resample<T: Sample>(&self, input: &[T], passes: &[ResizePass]) -> Vec<T> {
        // The first resized axis reads the input where it lies.
        let mut data: Option<Vec<T>> = None;
        for (i, pass) in passes.iter().enumerate() {
            let src = data.as_deref().unwrap_or(input);
            let is_output = i + 1 == passes.len();
            data = Some(apply(
                src,
                &pass.shape,
                pass.axis,
                &pass.plan,
                self.extrapolation,
                is_output,
            ));
        }
        data.unwrap_or_else(|| input.to_vec())
    }

    /// The output shape and the passes of a resize of a tensor of `shape` given `inputs`
    /// (the tensor's own entry may be absent), and the extrapolation value; `single`: the
    /// tensor is `f32`, whose scales and coordinates are computed in `f32` as ONNX Runtime does.
    pub(crate) fn plan_for(
        &self,
        inputs: &[Option<&Tensor>],
        shape: &[usize],
        single: bool,
    ) -> Result<(Vec<usize>, Vec<ResizePass>, f64)> {
        let (out_shape, scales, rois, axes) = self.geometry(inputs, shape, single)?;
        let elements = crate::limits::checked_elements(&out_shape, 4)?;
        // An empty output needs no pass, and an axis's table is as long as its output
        // dimension, which another zero dimension may leave huge.
        if elements == 0 {
            return Ok((out_shape, Vec::new(), self.extrapolation));
        }
        let passes = self.passes(shape, &out_shape, &scales, &rois, &axes, single);
        Ok((out_shape, passes, self.extrapolation))
    }
}

impl Kernel for Resize {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let single = x.dtype() == DType::F32;
        let (out_shape, passes, _) = self.plan_for(inputs, x.shape(), single)?;
        if out_shape.contains(&0) {
            return Ok(vec![Tensor::zeros(x.dtype(), &out_shape)]);
        }
        // f32 computes in f32, as ONNX Runtime does; every other type in f64, like the reference.
        if let Tensor::F32(a) = x {
            let a = a.as_standard_layout();
            let input = a
                .as_slice()
                .ok_or_else(|| KernelError::Shape("Resize input is not contiguous".into()))?;
            let data = self.resample(input, &passes);
            return Ok(vec![tensor_from(&out_shape, data)?]);
        }
        let data: Vec<f64> = dispatch_numeric!(x, a => a.as_standard_layout().iter().map(|v| v.to_f64().unwrap_or(f64::NAN)).collect(),
            other => return Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }));
        let data = self.resample(&data, &passes);
        Ok(vec![from_f64(x.dtype(), &out_shape, data)?])
    }
}

/// Converts back to the input type; integers are rounded half to even and saturated.
fn from_f64(dtype: DType, shape: &[usize], data: Vec<f64>) -> Result<Tensor> {
    macro_rules! int {
        ($t:ty) => {
            tensor_from(
                shape,
                data.into_iter()
                    .map(|v| {
                        v.round_ties_even()
                            .clamp(<$t>::MIN as f64, <$t>::MAX as f64) as $t
                    })
                    .collect(),
            )
        };
    }
    match dtype {
        DType::F32 => tensor_from(shape, data.into_iter().map(|v| v as f32).collect()),
        DType::F64 => tensor_from(shape, data),
        DType::F16 => tensor_from(shape, data.into_iter().map(f16::from_f64).collect()),
        DType::BF16 => tensor_from(shape, data.into_iter().map(bf16::from_f64).collect()),
        DType::U8 => int!(u8),
        DType::I8 => int!(i8),
        DType::U16 => int!(u16),
        DType::I16 => int!(i16),
        DType::I32 => int!(i32),
        DType::I64 => int!(i64),
        DType::U32 => int!(u32),
        DType::U64 => int!(u64),
        other => Err(KernelError::UnsupportedDType {
            index: 0,
            dtype: other,
        }),
    }
}
