//! Row-wise normalizations: Softmax / LogSoftmax over one axis and the per-channel affine map
//! that BatchNormalization (inference) reduces to.
//!
//! A tensor normalized over one axis is viewed as `[outer, axis, inner]`; one block of
//! [`ROW_BLOCK`] threads handles one `(outer, inner)` row, reducing in shared memory.

use super::{GRID_STRIDE_LOOP, INFINITY_DECL, KernelSource, c_type, is_float};
use crate::DType;

/// Threads per block of the row kernels (a power of two).
pub const ROW_BLOCK: u32 = 256;

/// Softmax (or LogSoftmax) over the middle axis of `[outer, axis, inner]`, one block per row
/// (`grid = outer * inner`). Arguments: `x, y, axis_len, inner`.
pub fn softmax_source(dtype: DType, log: bool) -> Option<KernelSource> {
    if !is_float(dtype) {
        return None;
    }
    let t = c_type(dtype)?;
    let f = if dtype == DType::F32 { "f" } else { "" };
    let finish = if log {
        format!("y[base + j * inner] = v - m - log{f}(total);")
    } else {
        format!("y[base + j * inner] = exp{f}(v - m) / total;")
    };
    let source = format!(
        r#"{INFINITY_DECL}extern "C" __global__ void spillway_kernel(const {t}* __restrict__ x, {t}* __restrict__ y, long long axis_len, long long inner) {{
  __shared__ {t} scratch[{ROW_BLOCK}];
  long long row = blockIdx.x;
  long long base = (row / inner) * axis_len * inner + (row % inner);
  {t} m = -INFINITY;
  for (long long j = threadIdx.x; j < axis_len; j += blockDim.x) {{ {t} v = x[base + j * inner]; m = v > m ? v : m; }}
  scratch[threadIdx.x] = m; __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {{ if (threadIdx.x < w) {{ {t} o = scratch[threadIdx.x + w]; if (o > scratch[threadIdx.x]) scratch[threadIdx.x] = o; }} __syncthreads(); }}
  m = scratch[0]; __syncthreads();
  {t} s = 0;
  for (long long j = threadIdx.x; j < axis_len; j += blockDim.x) s += exp{f}(x[base + j * inner] - m);
  scratch[threadIdx.x] = s; __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {{ if (threadIdx.x < w) scratch[threadIdx.x] += scratch[threadIdx.x + w]; __syncthreads(); }}
  {t} total = scratch[0];
  for (long long j = threadIdx.x; j < axis_len; j += blockDim.x) {{ {t} v = x[base + j * inner]; {finish} }}
}}
"#
    );
    Some(KernelSource {
        key: format!("softmax/{t}/{}", if log { "log" } else { "plain" }),
        source,
    })
}

/// `y = x * scale[c] + shift[c]` where `c = (i / inner) % channels` (BatchNormalization in
/// inference mode, with `scale = gamma / sqrt(var + eps)` and `shift = beta - mean * scale`
/// computed on the host). Arguments: `x, scale, shift, y, n, channels, inner`.
pub fn channel_affine_source(dtype: DType) -> Option<KernelSource> {
    if !is_float(dtype) {
        return None;
    }
    let t = c_type(dtype)?;
    let source = format!(
        "extern \"C\" __global__ void spillway_kernel(const {t}* __restrict__ x, const {t}* __restrict__ scale, const {t}* __restrict__ shift, {t}* __restrict__ y, long long n, long long channels, long long inner) {{\n  {GRID_STRIDE_LOOP} {{\n    long long c = (i / inner) % channels;\n    y[i] = x[i] * scale[c] + shift[c];\n  }}\n}}\n"
    );
    Some(KernelSource {
        key: format!("channel_affine/{t}"),
        source,
    })
}

/// `y[i] += bias[(i / inner) % channels]`, then optionally Relu (a convolution's bias and
/// activation epilogue). Arguments: `bias, y, n, channels, inner`.
pub fn bias_add_source(dtype: DType, relu: bool) -> Option<KernelSource> {
    if !is_float(dtype) {
        return None;
    }
    let t = c_type(dtype)?;
    let activation = if relu { "v = v < 0 ? 0 : v;" } else { "" };
    let source = format!(
        "extern \"C\" __global__ void spillway_kernel(const {t}* __restrict__ bias, {t}* __restrict__ y, long long n, long long channels, long long inner) {{\n  {GRID_STRIDE_LOOP} {{\n    {t} v = y[i] + bias[(i / inner) % channels]; {activation}\n    y[i] = v;\n  }}\n}}\n"
    );
    Some(KernelSource {
        key: format!("bias_add/{t}/{}", if relu { "relu" } else { "plain" }),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_only_for_floats() {
        assert!(softmax_source(DType::I64, false).is_none());
        let k = softmax_source(DType::F32, true).unwrap();
        assert!(k.source.contains("logf(total)"), "{}", k.source);
        assert_ne!(k.key, softmax_source(DType::F32, false).unwrap().key);
    }
}
