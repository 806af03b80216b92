//! Gather on the GPU: constant indices are checked on the host and uploaded once; indices
//! computed on the GPU are checked by the kernel, which reports a bad one through the launch's
//! status word.

use super::detection::index_status;
use super::layout::constant_ints;
use super::{GpuIo, GpuKernel, GpuNode};
use crate::cpu::reduce::axes::normalize_axis;
use crate::cpu::shape::gather::checked_indices;
use crate::cuda::codegen::detection::checked_gather_source;
use crate::cuda::codegen::{KernelSource, copy, launch_shape};
use crate::cuda::error::{CudaError, CudaResult, driver};
use crate::cuda::gpu::{Gpu, KernelArg};
use crate::cuda::memory::DeviceArena;

/// Gather with constant indices, checked and made non-negative on the host and uploaded once.
#[derive(Debug)]
struct Gather {
    source: KernelSource,
    indices: DeviceArena,
    n: usize,
    axis_dim: usize,
    count: usize,
    inner: usize,
}

pub(super) fn build_gather(gpu: &Gpu, node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    let y = node.output(0)?;
    let axis = normalize_axis(node.spec.attrs.int("axis", 0)?, x.shape.len())?;
    if node.constant(1).is_none() {
        return build_checked_gather(node, axis);
    }
    let raw = constant_ints(node, 1)?.ok_or_else(|| node.unsupported("indices are missing"))?;
    let indices = checked_indices(&raw, x.shape[axis])?;
    let mut host = Vec::with_capacity(8 * indices.len().max(1));
    for &i in &indices {
        host.extend_from_slice(&(i as i64).to_ne_bytes());
    }
    let arena = DeviceArena::new(gpu.copy_in_stream(), host.len())?;
    gpu.upload(&host, arena.region())?;
    gpu.copy_in_stream()
        .synchronize()
        .map_err(driver("uploading Gather indices"))?;
    let bytes = x.dtype.size_of();
    Ok(Box::new(Gather {
        source: copy::gather_source(bytes)
            .ok_or_else(|| node.unsupported(format!("{bytes}-byte elements")))?,
        indices: arena,
        n: y.len(),
        axis_dim: x.shape[axis],
        count: indices.len(),
        inner: x.shape[axis + 1..].iter().product(),
    }))
}

impl GpuKernel for Gather {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        if self.n == 0 {
            return Ok(());
        }
        let args = [
            KernelArg::Ptr(io.input(0)?.ptr),
            KernelArg::Ptr(self.indices.region().ptr),
            KernelArg::Ptr(io.output(0)?.ptr),
            KernelArg::I64(self.n as i64),
            KernelArg::I64(self.axis_dim as i64),
            KernelArg::I64(self.count as i64),
            KernelArg::I64(self.inner as i64),
        ];
        gpu.launch(
            &self.source,
            stream,
            launch_shape(self.n, gpu.info().multiprocessors),
            0,
            &args,
        )
    }
}

/// Gather with indices computed on the GPU, checked by the kernel.
#[derive(Debug)]
struct CheckedGather {
    source: KernelSource,
    n: usize,
    axis_dim: usize,
    count: usize,
    inner: usize,
}

fn build_checked_gather(node: &GpuNode<'_>, axis: usize) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    let indices = node.input(1)?;
    let y = node.output(0)?;
    let bytes = x.dtype.size_of();
    let source = checked_gather_source(bytes, indices.dtype).ok_or_else(|| {
        node.unsupported(format!(
            "{bytes}-byte elements with {:?} indices",
            indices.dtype
        ))
    })?;
    Ok(Box::new(CheckedGather {
        source,
        n: y.len(),
        axis_dim: x.shape[axis],
        count: indices.len(),
        inner: x.shape[axis + 1..].iter().product(),
    }))
}

impl GpuKernel for CheckedGather {
    fn reports_status(&self) -> bool {
        true
    }

    fn status_error(&self, code: u32, value: i64) -> CudaError {
        index_status("Gather indices", code, value, self.axis_dim)
    }

    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        if self.n == 0 {
            return Ok(());
        }
        let args = [
            KernelArg::Ptr(io.input(0)?.ptr),
            KernelArg::Ptr(io.input(1)?.ptr),
            KernelArg::Ptr(io.output(0)?.ptr),
            KernelArg::Ptr(io.status()?.ptr),
            KernelArg::I64(self.n as i64),
            KernelArg::I64(self.axis_dim as i64),
            KernelArg::I64(self.count as i64),
            KernelArg::I64(self.inner as i64),
        ];
        gpu.launch(
            &self.source,
            stream,
            launch_shape(self.n, gpu.info().multiprocessors),
            0,
            &args,
        )
    }
}
