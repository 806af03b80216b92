//! Resize and Upsample on the GPU for `float` tensors with constant scales or sizes: the CPU
//! kernel's own passes (one axis at a time, the same taps in the same order), each a gather of
//! weighted inputs along one axis, rounded like the CPU (no fused multiply-add), so the GPU
//! computes the CPU's values exactly. Intermediate passes live in the workspace.

use super::{GpuIo, GpuKernel, GpuNode};
use crate::DType;
use crate::cpu::shape::resize::{ResizePass, parse_resize, parse_upsample};
use crate::cuda::codegen::{GRID_STRIDE_LOOP, KernelSource, launch_shape};
use crate::cuda::error::{CudaResult, driver};
use crate::cuda::gpu::{Gpu, KernelArg};
use crate::cuda::memory::{DeviceArena, DeviceRegion, aligned};

/// `y[o, j, k] = Σ_t coef[t] · x[o, idx[t], k]` over output `j`'s taps (`span[2j]` the first,
/// `span[2j + 1]` how many, negative where the output is extrapolated: `fill`).
/// Arguments: `x, y, n, out_len, in_len, inner, span, idx, coef, fill`.
fn pass_source() -> KernelSource {
    let source = format!(
        "extern \"C\" __global__ void spillway_kernel(const float* __restrict__ x, float* __restrict__ y, long long n, long long out_len, long long in_len, long long inner, const long long* __restrict__ span, const long long* __restrict__ idx, const float* __restrict__ coef, unsigned int fill) {{\n  {GRID_STRIDE_LOOP} {{\n    long long k = i % inner; long long j = (i / inner) % out_len; long long o = i / (inner * out_len);\n    long long first = span[2 * j]; long long count = span[2 * j + 1];\n    if (count < 0) {{ y[i] = __uint_as_float(fill); continue; }}\n    const float* src = x + o * in_len * inner + k;\n    float acc = 0.0f;\n    for (long long t = first; t < first + count; ++t) acc = __fadd_rn(acc, __fmul_rn(coef[t], src[idx[t] * inner]));\n    y[i] = acc;\n  }}\n}}\n"
    );
    KernelSource {
        key: "resize/float/pass".into(),
        source,
    }
}

/// One pass on the device: its tables and the shape it walks.
#[derive(Debug)]
struct DevicePass {
    /// Holds `span`, then `idx` (both `long long`), then `coef` (`float`).
    _tables: DeviceArena,
    span: DeviceRegion,
    idx: DeviceRegion,
    coef: DeviceRegion,
    outer: usize,
    in_len: usize,
    out_len: usize,
    inner: usize,
}

impl DevicePass {
    fn upload(gpu: &Gpu, pass: &ResizePass, out_len: usize) -> CudaResult<DevicePass> {
        let (mut span, mut idx, mut coef) = (Vec::new(), Vec::new(), Vec::new());
        for taps in pass.plan.nonzero_taps() {
            match taps {
                None => span.extend([0i64, -1]),
                Some(taps) => {
                    span.extend([idx.len() as i64, taps.len() as i64]);
                    for (i, c) in taps {
                        idx.push(i as i64);
                        coef.push(c as f32);
                    }
                }
            }
        }
        let bytes = |v: &[i64]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let (span, idx) = (bytes(&span), bytes(&idx));
        let coef: Vec<u8> = coef.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let at = [
            0,
            aligned(span.len()),
            aligned(span.len()) + aligned(idx.len().max(1)),
        ];
        let total = at[2] + aligned(coef.len().max(1));
        let tables = DeviceArena::new(gpu.copy_in_stream(), total)?;
        let region = |offset: usize, len: usize| {
            tables
                .region()
                .sub(offset, len.max(1))
                .ok_or_else(|| crate::cuda::error::CudaError::Unsupported("resize tables".into()))
        };
        let (span_r, idx_r, coef_r) = (
            region(at[0], span.len())?,
            region(at[1], idx.len())?,
            region(at[2], coef.len())?,
        );
        for (host, r) in [(&span, span_r), (&idx, idx_r), (&coef, coef_r)] {
            if !host.is_empty() {
                gpu.upload(host, r)?;
            }
        }
        gpu.copy_in_stream()
            .synchronize()
            .map_err(driver("uploading Resize tables"))?;
        let a = pass.axis;
        Ok(DevicePass {
            _tables: tables,
            span: span_r,
            idx: idx_r,
            coef: coef_r,
            outer: pass.shape[..a].iter().product(),
            in_len: pass.shape[a],
            out_len,
            inner: pass.shape[a + 1..].iter().product(),
        })
    }

    fn output_len(&self) -> usize {
        self.outer * self.out_len * self.inner
    }
}

/// A resize: its passes, each into the workspace but the last, which writes the output.
#[derive(Debug)]
struct Resize {
    source: KernelSource,
    passes: Vec<DevicePass>,
    fill: u32,
    /// Workspace offsets of the two intermediate buffers.
    scratch: [usize; 2],
    workspace: usize,
}

pub(super) fn build_resize(gpu: &Gpu, node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    let y = node.output(0)?;
    if x.dtype != DType::F32 {
        return Err(node.unsupported(format!("{} tensors (float only)", x.dtype)));
    }
    let resize = if node.spec.op_type == "Upsample" {
        parse_upsample(node.spec)?
    } else {
        parse_resize(node.spec)?
    };
    // Scales, sizes and roi must be constants: the passes are fixed when the plan is built.
    let mut constants = Vec::with_capacity(node.inputs.len());
    for i in 0..node.inputs.len() {
        let present = node.inputs[i].is_some();
        if i > 0 && present && node.constant(i).is_none() {
            return Err(node.unsupported(format!("input {i} is not a constant")));
        }
        constants.push(node.constant(i));
    }
    let (out_shape, passes, extrapolation) = resize.plan_for(&constants, &x.shape, true)?;
    if out_shape != y.shape {
        return Err(node.unsupported(format!(
            "output shape {:?}, the plan says {:?}",
            out_shape, y.shape
        )));
    }
    if passes.is_empty() {
        return Err(node.unsupported("a resize that changes nothing"));
    }
    let device = passes
        .iter()
        .map(|pass| DevicePass::upload(gpu, pass, out_shape[pass.axis]))
        .collect::<CudaResult<Vec<_>>>()?;
    let largest = device
        .iter()
        .rev()
        .skip(1)
        .map(|p| aligned(4 * p.output_len().max(1)))
        .max()
        .unwrap_or(0);
    Ok(Box::new(Resize {
        source: pass_source(),
        passes: device,
        fill: (extrapolation as f32).to_bits(),
        scratch: [0, largest],
        workspace: if passes.len() > 1 { 2 * largest } else { 0 },
    }))
}

impl GpuKernel for Resize {
    fn workspace_bytes(&self) -> usize {
        self.workspace
    }

    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        let y = io.output(0)?;
        let mut from = io.input(0)?;
        for (i, pass) in self.passes.iter().enumerate() {
            let n = pass.output_len();
            let to = if i + 1 == self.passes.len() {
                y
            } else {
                let scratch = io.workspace.ok_or_else(|| {
                    crate::cuda::error::CudaError::Unsupported("no workspace".into())
                })?;
                scratch
                    .sub(self.scratch[i % 2], 4 * n.max(1))
                    .ok_or_else(|| crate::cuda::error::CudaError::Unsupported("workspace".into()))?
            };
            if n > 0 {
                let args = [
                    KernelArg::Ptr(from.ptr),
                    KernelArg::Ptr(to.ptr),
                    KernelArg::I64(n as i64),
                    KernelArg::I64(pass.out_len as i64),
                    KernelArg::I64(pass.in_len as i64),
                    KernelArg::I64(pass.inner as i64),
                    KernelArg::Ptr(pass.span.ptr),
                    KernelArg::Ptr(pass.idx.ptr),
                    KernelArg::Ptr(pass.coef.ptr),
                    KernelArg::Bits32(self.fill),
                ];
                gpu.launch(
                    &self.source,
                    stream,
                    launch_shape(n, gpu.info().multiprocessors),
                    0,
                    &args,
                )?;
            }
            from = to;
        }
        Ok(())
    }
}
