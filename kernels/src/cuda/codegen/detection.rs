//! The kernels of a detector's data-dependent steps whose output shapes still follow from
//! their input shapes: RoiAlign, ScatterElements and Gather with indices computed on the GPU.
//! Their indices are data, so a kernel checks each one and reports the first bad value through
//! the launch's status word ([`STATUS_DECL`]) instead of reading or writing out of bounds; the
//! engine turns a reported status into the same typed error the CPU kernel raises.

use super::copy::word;
use super::{GRID_STRIDE_LOOP, INFINITY_DECL, KernelSource, MAX_RANK, STRIDES_DECL};
use crate::DType;

/// The status word a checking kernel writes: `status[0]` a nonzero code (the first report
/// wins), `status[1..3]` the offending value as a `long long`.
pub const STATUS_DECL: &str = "__device__ void report(unsigned int* status, unsigned int code, long long value) {\n  if (atomicCAS(status, 0u, code) == 0u) { status[2] = (unsigned int)value; status[3] = (unsigned int)((unsigned long long)value >> 32); }\n}\n";

/// Status code: an index outside its axis (`[-n, n)` for Gather and ScatterElements, `[0, n)`
/// for a RoiAlign batch index).
pub const STATUS_INDEX: u32 = 1;

/// Status code: a RoiAlign roi needs more samples than the CPU kernel allows (its bins would
/// take far too long to sample).
pub const STATUS_SAMPLES: u32 = 2;

/// Samples a RoiAlign roi may take, as the CPU kernel allows.
pub const MAX_SAMPLES_PER_ROI: i64 = 1 << 26;

/// The C type of an index tensor's elements.
fn index_type(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::I32 => Some("int"),
        DType::I64 => Some("long long"),
        _ => None,
    }
}

/// RoiAlign on `float` maps, one thread per output element, sampling as ONNX Runtime's CPU
/// kernel does (ORT's `max` mode: the largest weighted corner term of any sample).
/// Arguments: `x, rois, batch (long long*), y, status, n, images, channels, height, width,
/// pooled_h, pooled_w, sampling_ratio, spatial_scale (float bits), half_pixel`.
pub fn roi_align_source(max_mode: bool) -> KernelSource {
    let (init, combine, finish) = if max_mode {
        (
            "-INFINITY",
            "acc = fmaxf(acc, fmaxf(fmaxf(w0 * p[o0], w1 * p[o1]), fmaxf(w2 * p[o2], w3 * p[o3])));",
            "acc",
        )
    } else {
        (
            "0.0f",
            "acc += w0 * p[o0] + w1 * p[o1] + w2 * p[o2] + w3 * p[o3];",
            "acc / (float)(grid_h * grid_w)",
        )
    };
    let source = format!(
        r#"{INFINITY_DECL}{STATUS_DECL}
extern "C" __global__ void spillway_kernel(const float* __restrict__ x, const float* __restrict__ rois, const long long* __restrict__ batch, float* __restrict__ y, unsigned int* status, long long n, long long images, long long channels, long long height, long long width, long long pooled_h, long long pooled_w, long long sampling_ratio, float spatial_scale, long long half_pixel) {{
  {GRID_STRIDE_LOOP} {{
    long long pw = i % pooled_w; long long ph = (i / pooled_w) % pooled_h;
    long long c = (i / (pooled_w * pooled_h)) % channels; long long r = i / (pooled_w * pooled_h * channels);
    long long b = batch[r];
    if (b < 0 || b >= images) {{ report(status, {STATUS_INDEX}u, b); y[i] = 0.0f; continue; }}
    float offset = half_pixel ? 0.5f : 0.0f;
    const float* roi = rois + r * 4;
    float start_w = roi[0] * spatial_scale - offset; float start_h = roi[1] * spatial_scale - offset;
    float end_w = roi[2] * spatial_scale - offset; float end_h = roi[3] * spatial_scale - offset;
    float roi_w = end_w - start_w; float roi_h = end_h - start_h;
    if (!half_pixel) {{ roi_w = fmaxf(roi_w, 1.0f); roi_h = fmaxf(roi_h, 1.0f); }}
    float bin_h = roi_h / (float)pooled_h; float bin_w = roi_w / (float)pooled_w;
    long long grid_h = sampling_ratio, grid_w = sampling_ratio;
    if (sampling_ratio <= 0) {{
      float gh = ceilf(roi_h / (float)pooled_h); float gw = ceilf(roi_w / (float)pooled_w);
      if (gh > {MAX_SAMPLES_PER_ROI}.0f || gw > {MAX_SAMPLES_PER_ROI}.0f) {{ report(status, {STATUS_SAMPLES}u, r); y[i] = 0.0f; continue; }}
      grid_h = gh > 0.0f ? (long long)gh : 0; grid_w = gw > 0.0f ? (long long)gw : 0;
    }}
    if (grid_h * grid_w * pooled_h * pooled_w > {MAX_SAMPLES_PER_ROI}) {{ report(status, {STATUS_SAMPLES}u, r); y[i] = 0.0f; continue; }}
    if (grid_h * grid_w == 0) {{ y[i] = 0.0f; continue; }}
    const float* p = x + (b * channels + c) * height * width;
    float fh = (float)height, fw = (float)width;
    float acc = {init};
    for (long long iy = 0; iy < grid_h; ++iy) {{
      float yy = start_h + (float)ph * bin_h + ((float)iy + 0.5f) * bin_h / (float)grid_h;
      for (long long ix = 0; ix < grid_w; ++ix) {{
        float xx = start_w + (float)pw * bin_w + ((float)ix + 0.5f) * bin_w / (float)grid_w;
        long long o0 = 0, o1 = 0, o2 = 0, o3 = 0;
        float w0 = 0.0f, w1 = 0.0f, w2 = 0.0f, w3 = 0.0f;
        if (!(yy < -1.0f || yy > fh || xx < -1.0f || xx > fw)) {{
          float sy = fmaxf(yy, 0.0f), sx = fmaxf(xx, 0.0f);
          long long y_low = (long long)sy, x_low = (long long)sx, y_high, x_high;
          if (y_low >= height - 1) {{ y_low = height - 1; y_high = y_low; sy = (float)y_low; }} else {{ y_high = y_low + 1; }}
          if (x_low >= width - 1) {{ x_low = width - 1; x_high = x_low; sx = (float)x_low; }} else {{ x_high = x_low + 1; }}
          float ly = sy - (float)y_low, lx = sx - (float)x_low;
          float hy = 1.0f - ly, hx = 1.0f - lx;
          o0 = y_low * width + x_low; o1 = y_low * width + x_high; o2 = y_high * width + x_low; o3 = y_high * width + x_high;
          w0 = hy * hx; w1 = hy * lx; w2 = ly * hx; w3 = ly * lx;
        }}
        {combine}
      }}
    }}
    y[i] = {finish};
  }}
}}
"#
    );
    KernelSource {
        key: format!("roi_align/{}", if max_mode { "max" } else { "avg" }),
        source,
    }
}

/// The reductions ScatterElements combines an update with on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScatterReduction {
    /// Overwrite (ONNX's `none`: indices must not repeat, so the order does not matter).
    Replace,
    /// `add`.
    Add,
    /// `mul`.
    Mul,
    /// `max`.
    Max,
    /// `min`.
    Min,
}

impl ScatterReduction {
    /// The reduction named by ONNX's `reduction` attribute.
    pub fn from_onnx(name: &str) -> Option<ScatterReduction> {
        Some(match name {
            "none" => ScatterReduction::Replace,
            "add" => ScatterReduction::Add,
            "mul" => ScatterReduction::Mul,
            "max" => ScatterReduction::Max,
            "min" => ScatterReduction::Min,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            ScatterReduction::Replace => "none",
            ScatterReduction::Add => "add",
            ScatterReduction::Mul => "mul",
            ScatterReduction::Max => "max",
            ScatterReduction::Min => "min",
        }
    }
}

/// ScatterElements' updates into an output already holding a copy of the data, one thread per
/// update: the update's position in `indices`' shape (`s.dims`) gives the target's offset
/// (`s.strides[0]`, the data's strides) with the axis coordinate replaced by the index.
/// `none` works on any element size; the reductions on `float` only (a compare-and-swap loop,
/// so updates of one target combine in an unspecified order).
/// Arguments: `updates, indices, y, status, n, s, axis (padded to MAX_RANK), axis_dim`.
pub fn scatter_elements_source(
    element: DType,
    indices: DType,
    reduction: ScatterReduction,
) -> Option<KernelSource> {
    let index = index_type(indices)?;
    let (w, store) = match reduction {
        ScatterReduction::Replace => (word(element.size_of())?, "y[o] = updates[i];".to_string()),
        _ if element == DType::F32 => {
            let combine = match reduction {
                ScatterReduction::Add => "old + u",
                ScatterReduction::Mul => "old * u",
                ScatterReduction::Max => "fmaxf(old, u)",
                _ => "fminf(old, u)",
            };
            (
                "float",
                format!(
                    "unsigned int* t = (unsigned int*)(y + o); float u = updates[i]; unsigned int seen = *t, prev;\n    do {{ prev = seen; float old = __uint_as_float(prev); seen = atomicCAS(t, prev, __float_as_uint({combine})); }} while (seen != prev);"
                ),
            )
        }
        _ => return None,
    };
    let last = MAX_RANK - 1;
    let source = format!(
        r#"{STRIDES_DECL}{STATUS_DECL}
extern "C" __global__ void spillway_kernel(const {w}* __restrict__ updates, const {index}* __restrict__ indices, {w}* y, unsigned int* status, long long n, Strides s, long long axis, long long axis_dim) {{
  {GRID_STRIDE_LOOP} {{
    long long r = i, o = 0, at = 0;
    #pragma unroll
    for (int d = {last}; d >= 0; --d) {{ long long c = r % s.dims[d]; r /= s.dims[d]; o += c * s.strides[0][d]; if (d == axis) at = c; }}
    long long k = (long long)indices[i];
    if (k < -axis_dim || k >= axis_dim) {{ report(status, {STATUS_INDEX}u, k); continue; }}
    if (k < 0) k += axis_dim;
    o += (k - at) * s.strides[0][axis];
    {store}
  }}
}}
"#
    );
    Some(KernelSource {
        key: format!(
            "scatter_elements/{}/{}/{index}",
            reduction.name(),
            if reduction == ScatterReduction::Replace {
                format!("{}", element.size_of())
            } else {
                "float".to_string()
            }
        ),
        source,
    })
}

/// Gather along one axis with indices read on the GPU, each checked against the axis: the
/// data viewed as `[outer, axis_dim, inner]`, the output as `[outer, count, inner]`.
/// Arguments: `x, indices, y, status, n, axis_dim, count, inner`.
pub fn checked_gather_source(element_bytes: usize, indices: DType) -> Option<KernelSource> {
    let w = word(element_bytes)?;
    let index = index_type(indices)?;
    let source = format!(
        r#"{STATUS_DECL}
extern "C" __global__ void spillway_kernel(const {w}* __restrict__ x, const {index}* __restrict__ indices, {w}* __restrict__ y, unsigned int* status, long long n, long long axis_dim, long long count, long long inner) {{
  {GRID_STRIDE_LOOP} {{
    long long k = i % inner; long long j = (i / inner) % count; long long o = i / (inner * count);
    long long at = (long long)indices[j];
    if (at < -axis_dim || at >= axis_dim) {{ report(status, {STATUS_INDEX}u, at); y[i] = 0; continue; }}
    if (at < 0) at += axis_dim;
    y[i] = x[(o * axis_dim + at) * inner + k];
  }}
}}
"#
    );
    Some(KernelSource {
        key: format!("gather_checked/{element_bytes}/{index}"),
        source,
    })
}

/// Every source of this module, for the NVRTC compile check.
pub fn all_sources() -> Vec<KernelSource> {
    let mut all = vec![roi_align_source(false), roi_align_source(true)];
    for indices in [DType::I32, DType::I64] {
        for bytes in [1, 2, 4, 8] {
            all.extend(checked_gather_source(bytes, indices));
        }
        for element in [DType::U8, DType::I16, DType::F32, DType::I64] {
            all.extend(scatter_elements_source(
                element,
                indices,
                ScatterReduction::Replace,
            ));
        }
        for reduction in [
            ScatterReduction::Add,
            ScatterReduction::Mul,
            ScatterReduction::Max,
            ScatterReduction::Min,
        ] {
            all.extend(scatter_elements_source(DType::F32, indices, reduction));
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_other_than_none_are_float_only() {
        assert!(scatter_elements_source(DType::F32, DType::I64, ScatterReduction::Add).is_some());
        assert!(scatter_elements_source(DType::I64, DType::I64, ScatterReduction::Add).is_none());
        assert!(
            scatter_elements_source(DType::I64, DType::I32, ScatterReduction::Replace).is_some()
        );
        assert!(
            scatter_elements_source(DType::F32, DType::F32, ScatterReduction::Replace).is_none()
        );
        let keys: std::collections::HashSet<String> =
            all_sources().into_iter().map(|k| k.key).collect();
        assert_eq!(keys.len(), all_sources().len(), "a key names two sources");
    }
}
