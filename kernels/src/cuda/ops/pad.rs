//! Pad in `constant` mode on the GPU: a fill of the output, then a strided copy of the input
//! into its interior (negative pads crop: only the input's surviving part is copied).

use super::fill::Fill;
use super::layout::{Piece, StridedCopies, constant_ints, copies};
use super::{GpuIo, GpuKernel, GpuNode};
use crate::Tensor;
use crate::cuda::codegen::{Strides, contiguous_strides};
use crate::cuda::error::CudaResult;
use crate::cuda::gpu::Gpu;

/// Pad in `constant` mode: fill the output with the value, then copy the input into its
/// interior.
#[derive(Debug)]
struct ConstantPad {
    fill: Fill,
    copies: StridedCopies,
}

pub(super) fn build_pad(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    let y = node.output(0)?;
    let attrs = node.spec.attrs;
    if attrs.string("mode", "constant")? != "constant" {
        return Err(node.unsupported("edge, reflect and wrap modes"));
    }
    let rank = x.shape.len();
    let (pads, value, axes) = if node.spec.opset < 11 {
        let v = Tensor::scalar(attrs.float("value", 0.0)?);
        (attrs.ints("pads")?, Some(v), None)
    } else {
        let pads = constant_ints(node, 1)?.ok_or_else(|| node.unsupported("pads are missing"))?;
        let present = node.inputs.get(2).is_some_and(Option::is_some);
        if present && node.constant(2).is_none() {
            return Err(node.unsupported("a constant_value that is not a constant"));
        }
        (
            pads,
            node.constant(2).filter(|t| !t.is_empty()).cloned(),
            constant_ints(node, 3)?,
        )
    };
    let axes = match axes {
        Some(a) => crate::cpu::reduce::axes::normalize_axes(&a, rank)?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(node.unsupported(format!("pads {pads:?} for {} axes", axes.len())));
    }
    // Per axis: padding before and after; a negative one crops the input instead.
    let mut begin = vec![0i64; rank];
    let mut end = vec![0i64; rank];
    for (i, &ax) in axes.iter().enumerate() {
        begin[ax] = pads[i];
        end[ax] = pads[axes.len() + i];
    }
    let value = match value {
        Some(v) => crate::cpu::shape::cast::cast_tensor(&v, x.dtype)?,
        None => Tensor::zeros(x.dtype, &[]),
    };
    // The part of the input that survives the crops, and where it lands in the output.
    let kept: Vec<usize> = (0..rank)
        .map(|d| (x.shape[d] as i64 + begin[d].min(0) + end[d].min(0)).max(0) as usize)
        .collect();
    let src = contiguous_strides(&x.shape);
    let dst = contiguous_strides(&y.shape);
    let offset = |pads: &dyn Fn(usize) -> i64, strides: &[i64]| -> usize {
        (0..rank)
            .map(|d| pads(d) as usize * strides[d] as usize)
            .sum()
    };
    let src_offset = offset(&|d| (-begin[d]).max(0), &src);
    let dst_offset = offset(&|d| begin[d].max(0), &dst);
    let strides = Strides::new(&kept, &[&src, &dst])
        .ok_or_else(|| node.unsupported(format!("rank {rank}")))?;
    let interior = Piece {
        input: 0,
        output: 0,
        src_offset,
        dst_offset,
        n: kept.iter().product(),
        strides,
    };
    let copies = copies(node, rank, vec![interior])?;
    Ok(Box::new(ConstantPad {
        fill: Fill::new(node, &value, y.len())?,
        copies,
    }))
}

impl GpuKernel for ConstantPad {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        self.fill.enqueue(gpu, stream, io.output(0)?)?;
        self.copies.launch(gpu, stream, io)
    }
}
