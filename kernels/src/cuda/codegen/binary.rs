//! Elementwise functions of two tensors with numpy broadcasting (arithmetic, comparisons,
//! logic, `PRelu`) and `Where` of three. A contiguous same-shape case needs no index
//! arithmetic; every other case walks the output shape with per-operand strides
//! ([`super::Strides`], 0 on broadcast dimensions).

use super::{GRID_STRIDE_LOOP, KernelSource, STRIDES_DECL, c_type, is_float, offsets_code};
use crate::DType;

/// A binary elementwise operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (integers truncate toward zero).
    Div,
    /// `a ^ b` (floats).
    Pow,
    /// Larger of the two; NaN if either is NaN.
    Max,
    /// Smaller of the two; NaN if either is NaN.
    Min,
    /// `Mod` with `fmod = 1`: remainder with the dividend's sign.
    Fmod,
    /// `Mod` with `fmod = 0` (integers): remainder with the divisor's sign.
    Mod,
    /// `a < 0 ? b * a : a`.
    PRelu,
    /// `a == b` (boolean result).
    Equal,
    /// `a > b` (boolean result).
    Greater,
    /// `a >= b` (boolean result).
    GreaterOrEqual,
    /// `a < b` (boolean result).
    Less,
    /// `a <= b` (boolean result).
    LessOrEqual,
    /// Logical and of booleans.
    And,
    /// Logical or of booleans.
    Or,
    /// Logical xor of booleans.
    Xor,
}

impl BinaryOp {
    /// Every operator (the compile check builds each).
    pub const ALL: [BinaryOp; 18] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Fmod,
        BinaryOp::Mod,
        BinaryOp::PRelu,
        BinaryOp::Equal,
        BinaryOp::Greater,
        BinaryOp::GreaterOrEqual,
        BinaryOp::Less,
        BinaryOp::LessOrEqual,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
    ];

    /// The element type of the result for inputs of `dtype`.
    pub fn output_dtype(self, dtype: DType) -> DType {
        use BinaryOp::*;
        match self {
            Equal | Greater | GreaterOrEqual | Less | LessOrEqual | And | Or | Xor => DType::Bool,
            _ => dtype,
        }
    }

    /// The C expression of the operator on `a` and `b`, or `None` for an unsupported type.
    fn expression(self, dtype: DType) -> Option<String> {
        use BinaryOp::*;
        let float = is_float(dtype);
        let boolean = dtype == DType::Bool;
        let suffix = if dtype == DType::F32 { "f" } else { "" };
        Some(match self {
            And | Or | Xor if !boolean => return None,
            And => "(a && b) ? 1 : 0".into(),
            Or => "(a || b) ? 1 : 0".into(),
            Xor => "((a != 0) != (b != 0)) ? 1 : 0".into(),
            _ if boolean && self != Equal => return None,
            Equal => "a == b ? 1 : 0".into(),
            Greater => "a > b ? 1 : 0".into(),
            GreaterOrEqual => "a >= b ? 1 : 0".into(),
            Less => "a < b ? 1 : 0".into(),
            LessOrEqual => "a <= b ? 1 : 0".into(),
            Add => "a + b".into(),
            Sub => "a - b".into(),
            Mul => "a * b".into(),
            // An integer division by zero gives 0 on the CPU too, not a trap.
            Div if !float => "b == 0 ? 0 : a / b".into(),
            Div => "a / b".into(),
            Pow if float => format!("pow{suffix}(a, b)"),
            Pow => return None,
            Max if float => "(a != a || a > b) ? a : b".into(),
            Min if float => "(a != a || a < b) ? a : b".into(),
            Max => "a > b ? a : b".into(),
            Min => "a < b ? a : b".into(),
            Fmod if float => format!("fmod{suffix}(a, b)"),
            Fmod => "b == 0 ? 0 : a % b".into(),
            Mod if float => return None,
            Mod => {
                "b == 0 ? 0 : ((a % b != 0 && ((a % b < 0) != (b < 0))) ? a % b + b : a % b)".into()
            }
            PRelu => "a < 0 ? b * a : a".into(),
        })
    }
}

/// How the operands are laid out relative to the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Every operand has the output's shape and is contiguous: `y[i] = f(a[i], b[i])`.
    Same,
    /// Broadcast over the innermost `rank` dimensions through a `Strides` argument.
    Strided {
        /// Dimensions walked (the rest are 1).
        rank: usize,
    },
}

impl Layout {
    fn key(self) -> String {
        match self {
            Layout::Same => "same".into(),
            Layout::Strided { rank } => format!("strided{rank}"),
        }
    }
}

/// The kernel `y = op(a, b)` for inputs of `dtype`, or `None` when `op` is not defined for it.
///
/// Arguments: `a, b, y, n` and, for [`Layout::Strided`], a `Strides` (operands 0 and 1).
pub fn source(op: BinaryOp, dtype: DType, layout: Layout) -> Option<KernelSource> {
    let t = c_type(dtype)?;
    let o = c_type(op.output_dtype(dtype))?;
    let expr = op.expression(dtype)?;
    let (decl, extra, offsets, ia, ib) = match layout {
        Layout::Same => ("", "", String::new(), "i", "i"),
        Layout::Strided { rank } => (
            STRIDES_DECL,
            ", Strides s",
            format!("    {}", offsets_code(rank, 2)),
            "o0",
            "o1",
        ),
    };
    let source = format!(
        "{decl}extern \"C\" __global__ void spillway_kernel(const {t}* __restrict__ pa, const {t}* __restrict__ pb, {o}* __restrict__ y, long long n{extra}) {{\n  {GRID_STRIDE_LOOP} {{\n{offsets}    {t} a = pa[{ia}]; {t} b = pb[{ib}];\n    y[i] = ({o})({expr});\n  }}\n}}\n"
    );
    Some(KernelSource {
        key: format!("binary/{op:?}/{t}/{}", layout.key()),
        source,
    })
}

/// `Where(cond, a, b)` with all three operands broadcast through a `Strides` argument
/// (operand 0 the condition). Arguments: `cond, a, b, y, n, s`.
pub fn where_source(dtype: DType, rank: usize) -> Option<KernelSource> {
    let t = c_type(dtype)?;
    let source = format!(
        "{STRIDES_DECL}extern \"C\" __global__ void spillway_kernel(const unsigned char* __restrict__ pc, const {t}* __restrict__ pa, const {t}* __restrict__ pb, {t}* __restrict__ y, long long n, Strides s) {{\n  {GRID_STRIDE_LOOP} {{\n    {offsets}    y[i] = pc[o0] ? pa[o1] : pb[o2];\n  }}\n}}\n",
        offsets = offsets_code(rank, 3)
    );
    Some(KernelSource {
        key: format!("where/{t}/strided{rank}"),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_produce_booleans() {
        assert_eq!(BinaryOp::Less.output_dtype(DType::F32), DType::Bool);
        assert_eq!(BinaryOp::Add.output_dtype(DType::I64), DType::I64);
        let k = source(BinaryOp::Less, DType::F32, Layout::Same).unwrap();
        assert!(
            k.source.contains("unsigned char* __restrict__ y"),
            "{}",
            k.source
        );
    }

    #[test]
    fn undefined_combinations_are_refused() {
        assert!(source(BinaryOp::And, DType::F32, Layout::Same).is_none());
        assert!(source(BinaryOp::Add, DType::Bool, Layout::Same).is_none());
        assert!(source(BinaryOp::Pow, DType::I64, Layout::Same).is_none());
        assert!(source(BinaryOp::Mod, DType::F32, Layout::Same).is_none());
        assert!(source(BinaryOp::Equal, DType::Bool, Layout::Same).is_some());
    }

    #[test]
    fn strided_layout_walks_only_the_given_rank() {
        let k = source(BinaryOp::Add, DType::F32, Layout::Strided { rank: 3 }).unwrap();
        assert!(
            k.source.contains("for (int d = 7; d >= 5; --d)"),
            "{}",
            k.source
        );
        assert_eq!(k.key, "binary/Add/float/strided3");
    }
}
