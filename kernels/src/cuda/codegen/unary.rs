//! Elementwise maps of one tensor: the activations and math functions ([`FloatOp`]), `Clip`,
//! `Not` and `Cast`. Attribute values are baked into the source as exact literals.

use super::{GRID_STRIDE_LOOP, KernelSource, c_type, is_float};
use crate::DType;
use crate::cpu::unary::float_ops::FloatOp;

/// The C math function `base` for the element type (`expf` for float, `exp` for double).
fn math(base: &str, dtype: DType) -> String {
    if dtype == DType::F32 {
        format!("{base}f")
    } else {
        base.to_string()
    }
}

/// `value` as an exact literal of the element type.
pub(crate) fn literal(value: f64, dtype: DType) -> String {
    match dtype {
        DType::F32 => format!("{:?}f", value as f32),
        DType::F64 => format!("{value:?}"),
        _ => format!("(({}){})", c_type(dtype).unwrap_or("int"), value as i64),
    }
}

/// The C expression of `op` applied to `v`, or `None` when `op` is not defined for `dtype`.
fn expression(op: FloatOp, dtype: DType) -> Option<String> {
    let t = c_type(dtype)?;
    let float = is_float(dtype);
    let lit = |x: f64| literal(x, dtype);
    let f = |base: &str| math(base, dtype);
    let (zero, one, half) = (lit(0.0), lit(1.0), lit(0.5));
    let numeric = !matches!(dtype, DType::Bool);
    Some(match op {
        FloatOp::Relu if numeric => format!("v < {zero} ? {zero} : v"),
        FloatOp::Neg if numeric => format!("({t})(-v)"),
        FloatOp::Abs if numeric => format!("v < {zero} ? ({t})(-v) : v"),
        FloatOp::Sign if numeric => format!("v > {zero} ? {one} : (v < {zero} ? ({t})(-1) : v)"),
        _ if !float => return None,
        FloatOp::Relu | FloatOp::Neg | FloatOp::Abs | FloatOp::Sign => unreachable!(),
        FloatOp::LeakyRelu(alpha) => format!("v < {zero} ? {} * v : v", lit(alpha.into())),
        FloatOp::Sigmoid => format!("{one} / ({one} + {}(-v))", f("exp")),
        FloatOp::HardSigmoid(alpha, beta) => format!(
            "{min}({max}({a} * v + {b}, {zero}), {one})",
            min = f("fmin"),
            max = f("fmax"),
            a = lit(alpha.into()),
            b = lit(beta.into())
        ),
        FloatOp::HardSwish => format!(
            "v * {min}({max}(v * {sixth} + {half}, {zero}), {one})",
            min = f("fmin"),
            max = f("fmax"),
            sixth = lit(1.0 / 6.0)
        ),
        FloatOp::Tanh => format!("{}(v)", f("tanh")),
        FloatOp::Elu(alpha) => format!(
            "v >= {zero} ? v : {} * {}(v)",
            lit(alpha.into()),
            f("expm1")
        ),
        FloatOp::Selu(alpha, gamma) => format!(
            "v > {zero} ? {g} * v : {g} * ({a} * {exp}(v) - {a})",
            g = lit(gamma.into()),
            a = lit(alpha.into()),
            exp = f("exp")
        ),
        FloatOp::Celu(alpha) => format!(
            "{max}(v, {zero}) + {min}({a} * {expm1}(v / {a}), {zero})",
            max = f("fmax"),
            min = f("fmin"),
            a = lit(alpha.into()),
            expm1 = f("expm1")
        ),
        FloatOp::Softplus => format!(
            "v > {zero} ? v + {log1p}({exp}(-v)) : {log1p}({exp}(v))",
            log1p = f("log1p"),
            exp = f("exp")
        ),
        FloatOp::Softsign => format!("v / ({one} + {}(v))", f("fabs")),
        FloatOp::Sqrt => format!("{}(v)", f("sqrt")),
        FloatOp::Exp => format!("{}(v)", f("exp")),
        FloatOp::Log => format!("{}(v)", f("log")),
        FloatOp::Floor => format!("{}(v)", f("floor")),
        FloatOp::Ceil => format!("{}(v)", f("ceil")),
        // rint rounds halves to even, as ONNX Round requires.
        FloatOp::Round => format!("{}(v)", f("rint")),
        FloatOp::Reciprocal => format!("{one} / v"),
        FloatOp::Erf => format!("{}(v)", f("erf")),
        FloatOp::Gelu(false) => format!(
            "{half} * v * ({one} + {erf}(v * {k}))",
            erf = f("erf"),
            k = lit(std::f64::consts::FRAC_1_SQRT_2)
        ),
        FloatOp::Gelu(true) => format!(
            "{half} * v * ({one} + {tanh}({k} * (v + {c} * v * v * v)))",
            tanh = f("tanh"),
            k = lit((2.0 / std::f64::consts::PI).sqrt()),
            c = lit(0.044715)
        ),
        FloatOp::Cos => format!("{}(v)", f("cos")),
        FloatOp::Sin => format!("{}(v)", f("sin")),
        FloatOp::Tan => format!("{}(v)", f("tan")),
        FloatOp::Acos => format!("{}(v)", f("acos")),
        FloatOp::Asin => format!("{}(v)", f("asin")),
        FloatOp::Atan => format!("{}(v)", f("atan")),
        FloatOp::Cosh => format!("{}(v)", f("cosh")),
        FloatOp::Sinh => format!("{}(v)", f("sinh")),
        FloatOp::Acosh => format!("{}(v)", f("acosh")),
        FloatOp::Asinh => format!("{}(v)", f("asinh")),
        FloatOp::Atanh => format!("{}(v)", f("atanh")),
        FloatOp::ThresholdedRelu(alpha) => format!("v > {} ? v : {zero}", lit(alpha.into())),
        FloatOp::Shrink(bias, lambd) => format!(
            "v < -({l}) ? v + {b} : (v > {l} ? v - {b} : {zero})",
            l = lit(lambd.into()),
            b = lit(bias.into())
        ),
        FloatOp::Mish => format!(
            "v * {tanh}(v > {zero} ? v + {log1p}({exp}(-v)) : {log1p}({exp}(v)))",
            tanh = f("tanh"),
            log1p = f("log1p"),
            exp = f("exp")
        ),
        FloatOp::Swish(alpha) => format!(
            "v / ({one} + {exp}(-({a}) * v))",
            a = lit(alpha.into()),
            exp = f("exp")
        ),
    })
}

/// A map `y[i] = expr(x[i])` with input type `from` and output type `to`.
fn map_source(key: String, from: &str, to: &str, expr: &str) -> KernelSource {
    let source = format!(
        "extern \"C\" __global__ void spillway_kernel(const {from}* __restrict__ x, {to}* __restrict__ y, long long n) {{\n  {GRID_STRIDE_LOOP} {{\n    {from} v = x[i];\n    y[i] = ({to})({expr});\n  }}\n}}\n"
    );
    KernelSource { key, source }
}

/// The kernel for `op` on `dtype`, or `None` when `op` is not defined for it.
pub fn source(op: FloatOp, dtype: DType) -> Option<KernelSource> {
    let t = c_type(dtype)?;
    let expr = expression(op, dtype)?;
    Some(map_source(format!("unary/{op:?}/{t}"), t, t, &expr))
}

/// `Clip` with constant bounds (either may be absent).
pub fn clip_source(dtype: DType, min: Option<f64>, max: Option<f64>) -> Option<KernelSource> {
    let t = c_type(dtype)?;
    if dtype == DType::Bool {
        return None;
    }
    let mut expr = "v".to_string();
    // Comparisons, not fmin/fmax, so a NaN input stays NaN as on the CPU.
    if let Some(lo) = min {
        expr = format!(
            "(({expr}) < {lo} ? {lo} : ({expr}))",
            lo = literal(lo, dtype)
        );
    }
    if let Some(hi) = max {
        expr = format!(
            "(({expr}) > {hi} ? {hi} : ({expr}))",
            hi = literal(hi, dtype)
        );
    }
    Some(map_source(format!("clip/{t}/{min:?}/{max:?}"), t, t, &expr))
}

/// `Not` on booleans.
pub fn not_source() -> KernelSource {
    map_source("not".into(), "unsigned char", "unsigned char", "v ? 0 : 1")
}

/// `Cast` between two numeric or boolean types (float to integer truncates toward zero;
/// anything to bool is `!= 0`).
pub fn cast_source(from: DType, to: DType) -> Option<KernelSource> {
    let (f, t) = (c_type(from)?, c_type(to)?);
    let expr = if to == DType::Bool {
        "v != 0 ? 1 : 0"
    } else {
        "v"
    };
    Some(map_source(format!("cast/{from:?}/{to:?}"), f, t, expr))
}

/// Every float op with representative attributes (the compile check builds each).
pub fn all_float_ops() -> Vec<FloatOp> {
    vec![
        FloatOp::Relu,
        FloatOp::LeakyRelu(0.01),
        FloatOp::Sigmoid,
        FloatOp::HardSigmoid(0.2, 0.5),
        FloatOp::HardSwish,
        FloatOp::Tanh,
        FloatOp::Elu(1.0),
        FloatOp::Selu(1.673_263_2, 1.050_701),
        FloatOp::Celu(1.0),
        FloatOp::Softplus,
        FloatOp::Softsign,
        FloatOp::Sqrt,
        FloatOp::Exp,
        FloatOp::Log,
        FloatOp::Neg,
        FloatOp::Abs,
        FloatOp::Sign,
        FloatOp::Floor,
        FloatOp::Ceil,
        FloatOp::Round,
        FloatOp::Reciprocal,
        FloatOp::Erf,
        FloatOp::Gelu(false),
        FloatOp::Gelu(true),
        FloatOp::Cos,
        FloatOp::Sin,
        FloatOp::Tan,
        FloatOp::Acos,
        FloatOp::Asin,
        FloatOp::Atan,
        FloatOp::Cosh,
        FloatOp::Sinh,
        FloatOp::Acosh,
        FloatOp::Asinh,
        FloatOp::Atanh,
        FloatOp::ThresholdedRelu(1.0),
        FloatOp::Shrink(0.0, 0.5),
        FloatOp::Mish,
        FloatOp::Swish(1.0),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_exact() {
        assert_eq!(literal(0.2f32 as f64, DType::F32), "0.2f");
        assert_eq!(literal(0.5, DType::F64), "0.5");
        assert_eq!(literal(3.0, DType::I64), "((long long)3)");
    }

    #[test]
    fn integer_types_get_only_integer_ops() {
        assert!(source(FloatOp::Relu, DType::I64).is_some());
        assert!(source(FloatOp::Abs, DType::I32).is_some());
        assert!(source(FloatOp::Exp, DType::I64).is_none());
        assert!(source(FloatOp::Relu, DType::Bool).is_none());
        assert!(source(FloatOp::Exp, DType::String).is_none());
    }

    #[test]
    fn float_and_double_use_their_own_math_functions() {
        let f = source(FloatOp::Sigmoid, DType::F32).unwrap().source;
        let d = source(FloatOp::Sigmoid, DType::F64).unwrap().source;
        assert!(f.contains("expf(-v)"), "{f}");
        assert!(d.contains("exp(-v)") && !d.contains("expf"), "{d}");
    }
}
