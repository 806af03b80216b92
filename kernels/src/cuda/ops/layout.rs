//! Data movement on the GPU: Transpose and Concat as strided copies, and the shape-only
//! operators (Reshape, Flatten, Squeeze, Unsqueeze, Identity) as one device-to-device copy
//! (the engine may alias them instead).

use super::{GpuIo, GpuKernel, GpuNode};
use crate::cpu::reduce::axes::normalize_axis;
use crate::cuda::codegen::{KernelSource, Strides, contiguous_strides, copy, launch_shape};
use crate::cuda::error::{CudaResult, driver};
use crate::cuda::gpu::{Gpu, KernelArg};

/// One strided copy: from input `input` (at element `src_offset`) to the output (at element
/// `dst_offset`), over the iteration shape in `strides`.
#[derive(Debug, Clone)]
struct Piece {
    input: usize,
    src_offset: usize,
    dst_offset: usize,
    n: usize,
    strides: Strides,
}

/// A sequence of strided copies into one output.
#[derive(Debug)]
struct StridedCopies {
    source: KernelSource,
    element_bytes: usize,
    pieces: Vec<Piece>,
}

impl GpuKernel for StridedCopies {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        let y = io.output(0)?;
        for p in self.pieces.iter().filter(|p| p.n > 0) {
            let args = [
                KernelArg::Ptr(io.input(p.input)?.ptr + (p.src_offset * self.element_bytes) as u64),
                KernelArg::Ptr(y.ptr + (p.dst_offset * self.element_bytes) as u64),
                KernelArg::I64(p.n as i64),
                KernelArg::Strides(p.strides),
            ];
            gpu.launch(
                &self.source,
                stream,
                launch_shape(p.n, gpu.info().multiprocessors),
                0,
                &args,
            )?;
        }
        Ok(())
    }
}

fn copier(node: &GpuNode<'_>, rank: usize) -> CudaResult<(KernelSource, usize)> {
    let bytes = node.output(0)?.dtype.size_of();
    let source = copy::strided_copy_source(bytes, rank.max(1))
        .ok_or_else(|| node.unsupported(format!("{bytes}-byte elements")))?;
    Ok((source, bytes))
}

pub(super) fn build_transpose(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    let y = node.output(0)?;
    let rank = x.shape.len();
    let perm: Vec<usize> = match node.spec.attrs.opt_ints("perm")? {
        Some(p) => p
            .iter()
            .map(|&a| normalize_axis(a, rank))
            .collect::<Result<_, _>>()?,
        None => (0..rank).rev().collect(),
    };
    let src = contiguous_strides(&x.shape);
    // Walk the output in order; output dimension d reads input dimension perm[d].
    let src_strides: Vec<i64> = perm.iter().map(|&p| src[p]).collect();
    let strides = Strides::new(&y.shape, &[&src_strides, &contiguous_strides(&y.shape)])
        .ok_or_else(|| node.unsupported(format!("rank {rank}")))?;
    let (source, element_bytes) = copier(node, rank)?;
    Ok(Box::new(StridedCopies {
        source,
        element_bytes,
        pieces: vec![Piece {
            input: 0,
            src_offset: 0,
            dst_offset: 0,
            n: y.len(),
            strides,
        }],
    }))
}

pub(super) fn build_concat(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let y = node.output(0)?;
    let rank = y.shape.len();
    let axis = normalize_axis(node.spec.attrs.int("axis", 0)?, rank)?;
    let dst = contiguous_strides(&y.shape);
    let mut pieces = Vec::new();
    let mut at = 0usize;
    for (i, input) in node.inputs.iter().enumerate() {
        let Some(x) = input else { continue };
        let strides = Strides::new(&x.shape, &[&contiguous_strides(&x.shape), &dst])
            .ok_or_else(|| node.unsupported(format!("rank {rank}")))?;
        pieces.push(Piece {
            input: i,
            src_offset: 0,
            dst_offset: at * dst[axis] as usize,
            n: x.len(),
            strides,
        });
        at += x.shape.get(axis).copied().unwrap_or(0);
    }
    let (source, element_bytes) = copier(node, rank)?;
    Ok(Box::new(StridedCopies {
        source,
        element_bytes,
        pieces,
    }))
}

/// A shape-only operator: the output's bytes are the input's.
#[derive(Debug)]
struct Alias {
    bytes: usize,
}

pub(super) fn build_alias(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    Ok(Box::new(Alias {
        bytes: node.output(0)?.bytes(),
    }))
}

impl GpuKernel for Alias {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        let (x, y) = (io.input(0)?, io.output(0)?);
        if x.ptr == y.ptr || self.bytes == 0 {
            return Ok(());
        }
        gpu.context()
            .bind_to_thread()
            .map_err(driver("binding the context"))?;
        // SAFETY: both regions hold at least `bytes` (the plan sizes them); the stream
        // orders the copy after the producer.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                y.ptr,
                x.ptr,
                self.bytes,
                gpu.stream(stream).cu_stream(),
            )
        }
        .map_err(driver("copying device to device"))
    }
}
