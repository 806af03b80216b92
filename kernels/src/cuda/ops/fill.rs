//! Filling an output with one value: ConstantOfShape, and the border of a constant Pad.

use super::layout::constant_ints;
use super::{GpuIo, GpuKernel, GpuNode};
use crate::cuda::codegen::{KernelSource, copy, launch_shape};
use crate::cuda::error::CudaResult;
use crate::cuda::gpu::{Gpu, KernelArg};
use crate::cuda::host::tensor_bytes;
use crate::cuda::memory::DeviceRegion;
use crate::{DType, Tensor};

/// `n` elements set to one value, given to the kernel as its bit pattern.
#[derive(Debug)]
pub(super) struct Fill {
    source: KernelSource,
    n: usize,
    value: KernelArg,
}

impl Fill {
    /// A fill of `n` elements with the one element of `value`.
    pub(super) fn new(node: &GpuNode<'_>, value: &Tensor, n: usize) -> CudaResult<Fill> {
        let bits = tensor_bytes(value).ok_or_else(|| node.unsupported("string values"))?;
        let value = match bits.as_slice() {
            [a] => KernelArg::Bits8(*a),
            [a, b] => KernelArg::Bits16(u16::from_ne_bytes([*a, *b])),
            [a, b, c, d] => KernelArg::Bits32(u32::from_ne_bytes([*a, *b, *c, *d])),
            eight => KernelArg::I64(i64::from_ne_bytes(
                eight
                    .try_into()
                    .map_err(|_| node.unsupported("the value's element size"))?,
            )),
        };
        Ok(Fill {
            source: copy::fill_source(bits.len())
                .ok_or_else(|| node.unsupported("the value's element size"))?,
            n,
            value,
        })
    }

    /// Enqueues the fill of `y` on compute stream `stream`.
    pub(super) fn enqueue(&self, gpu: &Gpu, stream: usize, y: DeviceRegion) -> CudaResult<()> {
        if self.n == 0 {
            return Ok(());
        }
        let args = [
            KernelArg::Ptr(y.ptr),
            KernelArg::I64(self.n as i64),
            self.value,
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

impl GpuKernel for Fill {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        self.enqueue(gpu, stream, io.output(0)?)
    }
}

/// ConstantOfShape for a shape known when the plan is built.
pub(super) fn build_constant_of_shape(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let y = node.output(0)?;
    let shape = constant_ints(node, 0)?.ok_or_else(|| node.unsupported("no shape"))?;
    if shape.iter().map(|&d| d as usize).collect::<Vec<_>>() != y.shape {
        return Err(node.unsupported(format!("shape {shape:?} against output {:?}", y.shape)));
    }
    let value = match node.spec.attrs.opt_tensor("value")? {
        Some(t) => t.reshaped(&[])?,
        None => Tensor::zeros(DType::F32, &[]),
    };
    Ok(Box::new(Fill::new(node, &value, y.len())?))
}
