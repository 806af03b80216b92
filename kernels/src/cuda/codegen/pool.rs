//! Max and average pooling over two spatial dimensions (1-D pooling runs with height 1):
//! one thread per output element, any padding (asymmetric included), dilations and
//! `ceil_mode` — the geometry comes resolved from the CPU kernels' `WindowAttrs`, so both
//! devices agree on every output shape.

use super::{GRID_STRIDE_LOOP, INFINITY_DECL, KernelSource, c_type, is_float};
use crate::DType;

/// The window of one pooling node, in the order the kernel takes it as arguments.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolWindow {
    /// Input height, width.
    pub in_hw: [i64; 2],
    /// Output height, width.
    pub out_hw: [i64; 2],
    /// Kernel height, width.
    pub kernel: [i64; 2],
    /// Strides.
    pub strides: [i64; 2],
    /// Dilations.
    pub dilations: [i64; 2],
    /// Padding before (top, left).
    pub pad_begin: [i64; 2],
    /// Padding after (bottom, right).
    pub pad_end: [i64; 2],
}

/// The CUDA C declaration matching [`PoolWindow`].
const WINDOW_DECL: &str = "struct Window { long long in_hw[2]; long long out_hw[2]; long long kernel[2]; long long strides[2]; long long dilations[2]; long long pad_begin[2]; long long pad_end[2]; };\n";

/// The pooling kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolKind {
    /// Maximum over the in-image window cells.
    Max,
    /// Mean over the in-image cells.
    AverageExcludePad,
    /// Mean over the cells inside image plus padding (ONNX `count_include_pad = 1`).
    AverageIncludePad,
}

/// Arguments: `x, y, n_out, w` (`n_out = N * C * out_h * out_w`).
pub fn source(kind: PoolKind, dtype: DType) -> Option<KernelSource> {
    if !is_float(dtype) {
        return None;
    }
    let t = c_type(dtype)?;
    let (init, step, finish) = match kind {
        PoolKind::Max => ("-INFINITY", "acc = (v != v || v > acc) ? v : acc;", "acc"),
        PoolKind::AverageExcludePad => ("0", "acc += v;", "acc / (T)inside"),
        PoolKind::AverageIncludePad => ("0", "acc += v;", "acc / (T)padded"),
    };
    let source = format!(
        r#"{INFINITY_DECL}{WINDOW_DECL}typedef {t} T;
extern "C" __global__ void spillway_kernel(const T* __restrict__ x, T* __restrict__ y, long long n, Window w) {{
  {GRID_STRIDE_LOOP} {{
    long long ow = i % w.out_hw[1]; long long oh = (i / w.out_hw[1]) % w.out_hw[0]; long long plane = i / (w.out_hw[0] * w.out_hw[1]);
    const T* src = x + plane * w.in_hw[0] * w.in_hw[1];
    T acc = {init}; long long inside = 0; long long padded = 0;
    for (long long kh = 0; kh < w.kernel[0]; ++kh) {{
      long long h = oh * w.strides[0] + kh * w.dilations[0] - w.pad_begin[0];
      if (h >= w.in_hw[0] + w.pad_end[0]) continue;
      for (long long kw = 0; kw < w.kernel[1]; ++kw) {{
        long long c = ow * w.strides[1] + kw * w.dilations[1] - w.pad_begin[1];
        if (c >= w.in_hw[1] + w.pad_end[1]) continue;
        ++padded;
        if (h < 0 || c < 0 || h >= w.in_hw[0] || c >= w.in_hw[1]) continue;
        ++inside;
        T v = src[h * w.in_hw[1] + c];
        {step}
      }}
    }}
    y[i] = {finish};
  }}
}}
"#
    );
    Some(KernelSource {
        key: format!("pool/{kind:?}/{t}"),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_is_float_only() {
        assert!(source(PoolKind::Max, DType::I64).is_none());
        let k = source(PoolKind::AverageIncludePad, DType::F32).unwrap();
        assert!(k.source.contains("acc / (T)padded"), "{}", k.source);
    }
}
