//! Cast and CastLike: element type conversion with numpy `astype` semantics
//! (float → int truncates toward zero, int → narrower int wraps, anything → bool is
//! "non-zero", strings are parsed and printed like numpy does). The low-precision targets
//! (float8, float4, 4- and 2-bit integers) follow the ONNX rules instead; their conversions
//! are in `cast_low_precision`.

use half::{bf16, f16};
use ndarray::{ArcArray, IxDyn};

use super::util::min_opset;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::low_precision::{
    E8M0Rounding, F4E2M1, F8E4M3Fn, F8E4M3FnUz, F8E5M2, F8E5M2FnUz, F8E8M0, I2, I4, U2, U4,
};
use crate::{DType, Element, Tensor, dispatch_copy};

/// Cast (`to` attribute) or CastLike (type of input 1).
#[derive(Debug)]
pub struct Cast {
    to: Option<DType>,
    mode: CastMode,
}

/// The attributes that shape a conversion to a low-precision type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CastMode {
    /// `saturate` (opset 19+, default 1): float8 targets clamp out-of-range values to ±max
    /// instead of giving infinity or NaN.
    pub saturate: bool,
    /// `round_mode` (opset 24+, default `up`): how float8 E8M0 targets pick a power of two.
    pub rounding: E8M0Rounding,
}

impl Default for CastMode {
    fn default() -> Self {
        CastMode {
            saturate: true,
            rounding: E8M0Rounding::Up,
        }
    }
}

/// Builds [`Cast`] for `Cast` or `CastLike`.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    min_opset(spec, 6)?;
    let a = spec.attrs;
    let mut known = vec![];
    if spec.op_type == "Cast" {
        known.push("to");
    }
    if spec.opset >= 19 {
        known.push("saturate");
    }
    if spec.opset >= 24 {
        known.push("round_mode");
    }
    a.only(&known)?;
    let mut mode = CastMode::default();
    if spec.opset >= 19 {
        mode.saturate = a.int("saturate", 1)? != 0;
    }
    if spec.opset >= 24 {
        let r = a.string("round_mode", "up")?;
        mode.rounding =
            E8M0Rounding::parse(&r).ok_or_else(|| KernelError::UnsupportedAttribute {
                name: "round_mode".into(),
                reason: format!("'{r}' is not one of up, down, nearest"),
            })?;
    }
    if spec.op_type == "CastLike" {
        return Ok(Box::new(Cast { to: None, mode }));
    }
    let code = a.req_int("to")?;
    let to = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx)
        .ok_or_else(|| KernelError::UnsupportedAttribute {
            name: "to".into(),
            reason: format!("element type {code} is not supported (no complex types)"),
        })?;
    Ok(Box::new(Cast { to: Some(to), mode }))
}

impl Kernel for Cast {
    fn run(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let to = match self.to {
            Some(t) => t,
            None => input(inputs, 1)?.dtype(),
        };
        Ok(vec![cast_tensor_with(x, to, self.mode)?])
    }
}

/// An intermediate wide enough for every value of every element type.
#[derive(Clone, Copy)]
pub(super) enum Wide {
    Int(i128),
    Float(f64),
}

/// Conversions of a `Copy` element type through [`Wide`] and strings. `mode` matters only
/// to the low-precision types.
pub(super) trait CastElem: Element + Copy {
    fn to_wide(self) -> Wide;
    fn from_wide(w: Wide, mode: CastMode) -> Self;
    fn to_text(self) -> String;
    fn parse_text(s: &str, mode: CastMode) -> Result<Self>;
}

pub(super) fn parse_err(s: &str, t: DType) -> KernelError {
    KernelError::InvalidValue(format!("cannot parse '{s}' as {t}"))
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl CastElem for $t {
            fn to_wide(self) -> Wide { Wide::Int(self as i128) }
            fn from_wide(w: Wide, _: CastMode) -> Self {
                match w {
                    Wide::Int(i) => i as $t,
                    // Truncates toward zero (saturating in i128), then wraps like C.
                    Wide::Float(f) => (f as i128) as $t,
                }
            }
            fn to_text(self) -> String { self.to_string() }
            fn parse_text(s: &str, _: CastMode) -> Result<Self> {
                s.trim().parse::<i128>().map(|v| v as $t).map_err(|_| parse_err(s, <$t as Element>::DTYPE))
            }
        }
    )*};
}
int_elem!(u8, i8, u16, i16, i32, i64, u32, u64);

macro_rules! float_elem {
    ($($t:ty => $from_f64:expr, $to_f64:expr, $from_i:expr);* $(;)?) => {$(
        impl CastElem for $t {
            fn to_wide(self) -> Wide { Wide::Float($to_f64(self)) }
            fn from_wide(w: Wide, _: CastMode) -> Self {
                match w {
                    Wide::Int(i) => $from_i(i),
                    Wide::Float(f) => $from_f64(f),
                }
            }
            fn to_text(self) -> String { float_text($to_f64(self), <$t as Element>::DTYPE) }
            fn parse_text(s: &str, _: CastMode) -> Result<Self> {
                parse_float(s).map($from_f64).ok_or_else(|| parse_err(s, <$t as Element>::DTYPE))
            }
        }
    )*};
}
float_elem! {
    f32 => |f: f64| f as f32, |v: f32| v as f64, |i: i128| i as f32;
    f64 => |f: f64| f, |v: f64| v, |i: i128| i as f64;
    f16 => f16::from_f64, |v: f16| v.to_f64(), |i: i128| f16::from_f32(i as f32);
    bf16 => bf16::from_f64, |v: bf16| v.to_f64(), |i: i128| bf16::from_f32(i as f32);
}

impl CastElem for bool {
    fn to_wide(self) -> Wide {
        Wide::Int(self as i128)
    }
    fn from_wide(w: Wide, _: CastMode) -> Self {
        match w {
            Wide::Int(i) => i != 0,
            Wide::Float(f) => f != 0.0,
        }
    }
    fn to_text(self) -> String {
        if self { "True" } else { "False" }.to_string()
    }
    fn parse_text(s: &str, _: CastMode) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            t => parse_float(t)
                .map(|f| f != 0.0)
                .ok_or_else(|| parse_err(s, DType::Bool)),
        }
    }
}

/// Parses a float the way numpy does (`inf`, `-INF`, `NaN`, `1e5`, surrounding spaces).
pub(super) fn parse_float(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok()
}

/// Formats a float like numpy's `str()`: shortest round-trip digits, positional
/// for 1e-4 <= |x| < 1e16, scientific (`1e+20`, `1.5e-05`) otherwise.
pub(super) fn float_text(v: f64, dtype: DType) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Shortest digits for the source precision, not for f64.
    let short = match dtype {
        DType::F64 => format!("{v:e}"),
        DType::F32 => format!("{:e}", v as f32),
        _ => format!("{:e}", v as f32),
    };
    let (mant, exp) = short.split_once('e').unwrap_or((&short, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let a = v.abs();
    if a == 0.0 || (1e-4..1e16).contains(&a) {
        let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
        let neg = mant.starts_with('-');
        let point = exp + 1;
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        if neg { format!("-{body}") } else { body }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    }
}

/// Converts `t` to `to` with the default attributes (`saturate` = 1, `round_mode` = up);
/// shares the storage when the type already matches.
pub(crate) fn cast_tensor(t: &Tensor, to: DType) -> Result<Tensor> {
    cast_tensor_with(t, to, CastMode::default())
}

/// Converts `t` to `to`; shares the storage when the type already matches.
pub(crate) fn cast_tensor_with(t: &Tensor, to: DType, mode: CastMode) -> Result<Tensor> {
    if t.dtype() == to {
        return Ok(t.clone());
    }
    dispatch_copy!(t, a => Ok(cast_from(a, to, mode)), other => match other {
        Tensor::String(s) => from_strings(s, to, mode),
        other => Err(KernelError::UnsupportedDType { index: 0, dtype: other.dtype() }),
    })
}

fn cast_from<S: CastElem>(a: &ArcArray<S, IxDyn>, to: DType, mode: CastMode) -> Tensor {
    fn conv<S: CastElem, T: CastElem>(a: &ArcArray<S, IxDyn>, mode: CastMode) -> Tensor {
        T::into_tensor(a.map(|&v| T::from_wide(v.to_wide(), mode)).into_shared())
    }
    match to {
        DType::F32 => conv::<S, f32>(a, mode),
        DType::U8 => conv::<S, u8>(a, mode),
        DType::I8 => conv::<S, i8>(a, mode),
        DType::U16 => conv::<S, u16>(a, mode),
        DType::I16 => conv::<S, i16>(a, mode),
        DType::I32 => conv::<S, i32>(a, mode),
        DType::I64 => conv::<S, i64>(a, mode),
        DType::Bool => conv::<S, bool>(a, mode),
        DType::F16 => conv::<S, f16>(a, mode),
        DType::F64 => conv::<S, f64>(a, mode),
        DType::U32 => conv::<S, u32>(a, mode),
        DType::U64 => conv::<S, u64>(a, mode),
        DType::BF16 => conv::<S, bf16>(a, mode),
        DType::F8E4M3Fn => conv::<S, F8E4M3Fn>(a, mode),
        DType::F8E4M3FnUz => conv::<S, F8E4M3FnUz>(a, mode),
        DType::F8E5M2 => conv::<S, F8E5M2>(a, mode),
        DType::F8E5M2FnUz => conv::<S, F8E5M2FnUz>(a, mode),
        DType::U4 => conv::<S, U4>(a, mode),
        DType::I4 => conv::<S, I4>(a, mode),
        DType::F4E2M1 => conv::<S, F4E2M1>(a, mode),
        DType::F8E8M0 => conv::<S, F8E8M0>(a, mode),
        DType::U2 => conv::<S, U2>(a, mode),
        DType::I2 => conv::<S, I2>(a, mode),
        DType::String => Tensor::String(a.map(|&v| v.to_text()).into_shared()),
    }
}

fn from_strings(a: &ArcArray<String, IxDyn>, to: DType, mode: CastMode) -> Result<Tensor> {
    fn parse<T: CastElem>(a: &ArcArray<String, IxDyn>, mode: CastMode) -> Result<Tensor> {
        let v = a
            .iter()
            .map(|s| T::parse_text(s, mode))
            .collect::<Result<Vec<T>>>()?;
        super::util::tensor_from(a.shape(), v)
    }
    match to {
        DType::F32 => parse::<f32>(a, mode),
        DType::U8 => parse::<u8>(a, mode),
        DType::I8 => parse::<i8>(a, mode),
        DType::U16 => parse::<u16>(a, mode),
        DType::I16 => parse::<i16>(a, mode),
        DType::I32 => parse::<i32>(a, mode),
        DType::I64 => parse::<i64>(a, mode),
        DType::Bool => parse::<bool>(a, mode),
        DType::F16 => parse::<f16>(a, mode),
        DType::F64 => parse::<f64>(a, mode),
        DType::U32 => parse::<u32>(a, mode),
        DType::U64 => parse::<u64>(a, mode),
        DType::BF16 => parse::<bf16>(a, mode),
        DType::F8E4M3Fn => parse::<F8E4M3Fn>(a, mode),
        DType::F8E4M3FnUz => parse::<F8E4M3FnUz>(a, mode),
        DType::F8E5M2 => parse::<F8E5M2>(a, mode),
        DType::F8E5M2FnUz => parse::<F8E5M2FnUz>(a, mode),
        DType::U4 => parse::<U4>(a, mode),
        DType::I4 => parse::<I4>(a, mode),
        DType::F4E2M1 => parse::<F4E2M1>(a, mode),
        DType::F8E8M0 => parse::<F8E8M0>(a, mode),
        DType::U2 => parse::<U2>(a, mode),
        DType::I2 => parse::<I2>(a, mode),
        DType::String => Ok(Tensor::String(a.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Tensor {
        Tensor::from_shape_vec(&[v.len()], v.to_vec()).unwrap()
    }

    #[test]
    #[allow(clippy::excessive_precision)]
    fn numeric_casts_follow_numpy() {
        // np.array([-1.7, 2.5, 300.0], np.float32).astype(np.int32) == [-1, 2, 300]
        let out = cast_tensor(&f32s(&[-1.7, 2.5, 300.0]), DType::I32).unwrap();
        assert_eq!(
            out,
            Tensor::from_shape_vec(&[3], vec![-1i32, 2, 300]).unwrap()
        );
        // np.array([300, -1], np.int64).astype(np.uint8) == [44, 255]
        let i = Tensor::from_shape_vec(&[2], vec![300i64, -1]).unwrap();
        assert_eq!(
            cast_tensor(&i, DType::U8).unwrap(),
            Tensor::from_shape_vec(&[2], vec![44u8, 255]).unwrap()
        );
        // np.array([0.0, -0.5, nan]).astype(bool) == [False, True, True]
        let b = cast_tensor(&f32s(&[0.0, -0.5, f32::NAN]), DType::Bool).unwrap();
        assert_eq!(
            b,
            Tensor::from_shape_vec(&[3], vec![false, true, true]).unwrap()
        );
        let h = cast_tensor(&f32s(&[1.0009765625]), DType::F16).unwrap();
        assert_eq!(h.view::<f16>().unwrap()[0].to_f32(), 1.0009765625);
    }

    #[test]
    fn string_casts_follow_numpy() {
        // np.array(['1.5', ' -inf', 'NaN', '1e-5']).astype(np.float32)
        let s = Tensor::from_shape_vec(
            &[4],
            ["1.5", " -inf", "NaN", "1e-5"].map(String::from).to_vec(),
        )
        .unwrap();
        let f = cast_tensor(&s, DType::F32).unwrap();
        let v: Vec<f32> = f.view::<f32>().unwrap().iter().copied().collect();
        assert_eq!(v[0], 1.5);
        assert_eq!(v[1], f32::NEG_INFINITY);
        assert!(v[2].is_nan());
        assert_eq!(v[3], 1e-5);
        // np.array([0.1, 1.0, 1e20, 1.5e-5, -3], np.float32).astype(str)
        let t = cast_tensor(&f32s(&[0.1, 1.0, 1e20, 1.5e-5, -3.0]), DType::String).unwrap();
        let v: Vec<String> = t.view::<String>().unwrap().iter().cloned().collect();
        assert_eq!(v, ["0.1", "1.0", "1e+20", "1.5e-05", "-3.0"]);
        let bad = Tensor::from_shape_vec(&[1], vec!["abc".to_string()]).unwrap();
        assert!(matches!(
            cast_tensor(&bad, DType::I32),
            Err(KernelError::InvalidValue(_))
        ));
    }

    fn cast_spec<'a>(attrs: &'a crate::Attributes, opset: i64) -> NodeSpec<'a> {
        NodeSpec {
            op_type: "Cast",
            domain: "",
            opset,
            attrs,
            num_inputs: 1,
            num_outputs: 1,
            options: Default::default(),
        }
    }

    #[test]
    fn attributes_are_read_and_checked() {
        use crate::AttrValue;
        let attrs = crate::Attributes::new().with("to", AttrValue::Int(17));
        assert!(build(&cast_spec(&attrs, 19)).is_ok());
        // Complex types (14, 15) and unknown codes are refused with a typed error.
        let attrs = crate::Attributes::new().with("to", AttrValue::Int(14));
        assert!(matches!(
            build(&cast_spec(&attrs, 19)),
            Err(KernelError::UnsupportedAttribute { .. })
        ));
        let attrs = crate::Attributes::new()
            .with("to", AttrValue::Int(24))
            .with("round_mode", AttrValue::String("sideways".into()));
        assert!(matches!(
            build(&cast_spec(&attrs, 25)),
            Err(KernelError::UnsupportedAttribute { .. })
        ));
        // `saturate` is not an attribute before opset 19.
        let attrs = crate::Attributes::new()
            .with("to", AttrValue::Int(17))
            .with("saturate", AttrValue::Int(0));
        assert!(build(&cast_spec(&attrs, 13)).is_err());
    }
}
