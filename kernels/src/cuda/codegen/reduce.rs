//! Reductions over the middle axis of `[outer, reduced, inner]` (ReduceSum, ReduceMean,
//! ReduceMax, …, GlobalAveragePool and GlobalMaxPool): one thread per output element, the
//! accumulator in the element type (double for float inputs of the sum-like reductions would
//! differ from the CPU, which accumulates in the element type too).

use super::{GRID_STRIDE_LOOP, INFINITY_DECL, KernelSource, c_type, is_float};
use crate::DType;

/// A reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Arithmetic mean.
    Mean,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Product.
    Prod,
    /// Sum of absolute values.
    L1,
    /// Square root of the sum of squares.
    L2,
    /// Sum of squares.
    SumSquare,
    /// Log of the sum.
    LogSum,
    /// Log of the sum of exponentials (computed stably around the maximum).
    LogSumExp,
}

impl ReduceOp {
    /// Every reduction (the compile check builds each).
    pub const ALL: [ReduceOp; 10] = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Prod,
        ReduceOp::L1,
        ReduceOp::L2,
        ReduceOp::SumSquare,
        ReduceOp::LogSum,
        ReduceOp::LogSumExp,
    ];
}

/// One thread per `(outer, inner)` output. Arguments: `x, y, n_out, reduced, inner`.
pub fn source(op: ReduceOp, dtype: DType) -> Option<KernelSource> {
    let t = c_type(dtype)?;
    let float = is_float(dtype);
    if dtype == DType::Bool {
        return None;
    }
    let f = if dtype == DType::F32 { "f" } else { "" };
    let (init, step, finish) = match op {
        ReduceOp::Sum => ("0".to_string(), "acc += v;".to_string(), "acc".to_string()),
        ReduceOp::Mean => (
            "0".into(),
            "acc += v;".into(),
            format!("acc / ({t})reduced"),
        ),
        ReduceOp::Max if float => (
            "-INFINITY".into(),
            "acc = (v != v || v > acc) ? v : acc;".into(),
            "acc".into(),
        ),
        ReduceOp::Min if float => (
            "INFINITY".into(),
            "acc = (v != v || v < acc) ? v : acc;".into(),
            "acc".into(),
        ),
        ReduceOp::Max => (
            "x[base]".into(),
            "acc = v > acc ? v : acc;".into(),
            "acc".into(),
        ),
        ReduceOp::Min => (
            "x[base]".into(),
            "acc = v < acc ? v : acc;".into(),
            "acc".into(),
        ),
        ReduceOp::Prod => ("1".into(), "acc *= v;".into(), "acc".into()),
        ReduceOp::L1 => ("0".into(), "acc += v < 0 ? -v : v;".into(), "acc".into()),
        ReduceOp::SumSquare => ("0".into(), "acc += v * v;".into(), "acc".into()),
        _ if !float => return None,
        ReduceOp::L2 => ("0".into(), "acc += v * v;".into(), format!("sqrt{f}(acc)")),
        ReduceOp::LogSum => ("0".into(), "acc += v;".into(), format!("log{f}(acc)")),
        ReduceOp::LogSumExp => (
            "0".into(),
            format!("acc += exp{f}(v - m);"),
            format!("m + log{f}(acc)"),
        ),
    };
    let max_pass = if op == ReduceOp::LogSumExp {
        format!(
            "{t} m = -INFINITY; for (long long j = 0; j < reduced; ++j) {{ {t} v = x[base + j * inner]; m = v > m ? v : m; }}\n    if (m == -INFINITY || m == INFINITY) m = 0;\n    "
        )
    } else {
        String::new()
    };
    let source = format!(
        "{INFINITY_DECL}extern \"C\" __global__ void spillway_kernel(const {t}* __restrict__ x, {t}* __restrict__ y, long long n, long long reduced, long long inner) {{\n  {GRID_STRIDE_LOOP} {{\n    long long base = (i / inner) * reduced * inner + (i % inner);\n    {max_pass}{t} acc = {init};\n    for (long long j = 0; j < reduced; ++j) {{ {t} v = x[base + j * inner]; {step} }}\n    y[i] = ({t})({finish});\n  }}\n}}\n"
    );
    Some(KernelSource {
        key: format!("reduce/{op:?}/{t}"),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_only_reductions_refuse_integers() {
        assert!(source(ReduceOp::L2, DType::I64).is_none());
        assert!(source(ReduceOp::Sum, DType::I64).is_some());
        assert!(source(ReduceOp::Sum, DType::Bool).is_none());
        assert!(
            source(ReduceOp::LogSumExp, DType::F32)
                .unwrap()
                .source
                .contains("logf")
        );
    }
}
