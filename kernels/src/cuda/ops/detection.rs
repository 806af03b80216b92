//! A detector's RoI pooling on the GPU: RoiAlign and ScatterElements (with ConstantOfShape,
//! [`super::fill`]), so that
//! the features pooled for the boxes a region proposal network kept never leave the GPU.
//! RoiAlign and ScatterElements read indices that are data; they check every one and report
//! a bad one through the launch's status word (see [`crate::cuda::codegen::detection`]).

use super::{GpuIo, GpuKernel, GpuNode};
use crate::cpu::reduce::axes::normalize_axis;
use crate::cuda::codegen::detection::{
    STATUS_INDEX, STATUS_SAMPLES, ScatterReduction, roi_align_source, scatter_elements_source,
};
use crate::cuda::codegen::{KernelSource, MAX_RANK, Strides, contiguous_strides, launch_shape};
use crate::cuda::error::{CudaError, CudaResult};
use crate::cuda::gpu::{Gpu, KernelArg};
use crate::{DType, KernelError};

/// The error a checking kernel's status `code` stands for, `value` the offending value.
pub(super) fn index_status(op: &str, code: u32, value: i64, axis_dim: usize) -> CudaError {
    match code {
        STATUS_INDEX => CudaError::Kernel(KernelError::InvalidValue(format!(
            "{op}: index {value} is outside the axis of {axis_dim}"
        ))),
        STATUS_SAMPLES => CudaError::Kernel(KernelError::InvalidValue(format!(
            "{op}: roi {value} needs more samples per bin than supported"
        ))),
        other => CudaError::Unsupported(format!("{op}: unknown status {other}")),
    }
}

/// RoiAlign on `float` maps (the CPU kernel's sampling, see [`roi_align_source`]).
#[derive(Debug)]
struct RoiAlign {
    source: KernelSource,
    n: usize,
    images: usize,
    geometry: [usize; 3],
    pooled: [usize; 2],
    sampling_ratio: i64,
    spatial_scale: f32,
    half_pixel: bool,
}

pub(super) fn build_roi_align(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    let rois = node.input(1)?;
    let batch = node.input(2)?;
    let y = node.output(0)?;
    if x.dtype != DType::F32 || rois.dtype != DType::F32 || batch.dtype != DType::I64 {
        return Err(node.unsupported(format!(
            "{:?} maps, {:?} rois and {:?} batch indices (float, float, int64 only)",
            x.dtype, rois.dtype, batch.dtype
        )));
    }
    let [images, channels, height, width] = x.shape[..] else {
        return Err(node.unsupported(format!("X of shape {:?}", x.shape)));
    };
    let attrs = node.spec.attrs;
    let half_pixel = node.spec.opset >= 16
        && attrs.string("coordinate_transformation_mode", "half_pixel")? == "half_pixel";
    let max_mode = attrs.string("mode", "avg")? == "max";
    let sampling_ratio = attrs.int("sampling_ratio", 0)?;
    if sampling_ratio > 1 << 13 {
        return Err(node.unsupported(format!("sampling_ratio {sampling_ratio}")));
    }
    let pooled = [y.shape[2], y.shape[3]];
    if !y.is_empty() && (height == 0 || width == 0) {
        return Err(node.unsupported("an empty feature map"));
    }
    Ok(Box::new(RoiAlign {
        source: roi_align_source(max_mode),
        n: y.len(),
        images,
        geometry: [channels, height, width],
        pooled,
        sampling_ratio,
        spatial_scale: attrs.float("spatial_scale", 1.0)?,
        half_pixel,
    }))
}

impl GpuKernel for RoiAlign {
    fn reports_status(&self) -> bool {
        true
    }

    fn status_error(&self, code: u32, value: i64) -> CudaError {
        index_status("RoiAlign batch_indices", code, value, self.images)
    }

    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        if self.n == 0 {
            return Ok(());
        }
        let [channels, height, width] = self.geometry;
        let args = [
            KernelArg::Ptr(io.input(0)?.ptr),
            KernelArg::Ptr(io.input(1)?.ptr),
            KernelArg::Ptr(io.input(2)?.ptr),
            KernelArg::Ptr(io.output(0)?.ptr),
            KernelArg::Ptr(io.status()?.ptr),
            KernelArg::I64(self.n as i64),
            KernelArg::I64(self.images as i64),
            KernelArg::I64(channels as i64),
            KernelArg::I64(height as i64),
            KernelArg::I64(width as i64),
            KernelArg::I64(self.pooled[0] as i64),
            KernelArg::I64(self.pooled[1] as i64),
            KernelArg::I64(self.sampling_ratio),
            KernelArg::Bits32(self.spatial_scale.to_bits()),
            KernelArg::I64(i64::from(self.half_pixel)),
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

/// ScatterElements: the data copied into the output, then one thread per update.
#[derive(Debug)]
struct ScatterElements {
    source: KernelSource,
    data_bytes: usize,
    updates: usize,
    strides: Strides,
    axis: usize,
    axis_dim: usize,
}

pub(super) fn build_scatter_elements(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let data = node.input(0)?;
    let indices = node.input(1)?;
    let updates = node.input(2)?;
    let rank = data.shape.len();
    if rank == 0 || rank > MAX_RANK || indices.shape != updates.shape {
        return Err(node.unsupported(format!(
            "data {:?}, indices {:?}, updates {:?}",
            data.shape, indices.shape, updates.shape
        )));
    }
    let axis = normalize_axis(node.spec.attrs.int("axis", 0)?, rank)?;
    let reduction = node.spec.attrs.string("reduction", "none")?;
    let reduction = ScatterReduction::from_onnx(&reduction)
        .ok_or_else(|| node.unsupported(format!("reduction '{reduction}'")))?;
    let source =
        scatter_elements_source(data.dtype, indices.dtype, reduction).ok_or_else(|| {
            node.unsupported(format!(
                "{:?} data with {:?} indices and reduction {reduction:?}",
                data.dtype, indices.dtype
            ))
        })?;
    let strides = Strides::new(&indices.shape, &[&contiguous_strides(&data.shape)])
        .ok_or_else(|| node.unsupported("the rank"))?;
    Ok(Box::new(ScatterElements {
        source,
        data_bytes: data.bytes(),
        updates: updates.len(),
        strides,
        axis: MAX_RANK - rank + axis,
        axis_dim: data.shape[axis],
    }))
}

impl GpuKernel for ScatterElements {
    fn reports_status(&self) -> bool {
        true
    }

    fn status_error(&self, code: u32, value: i64) -> CudaError {
        index_status("ScatterElements indices", code, value, self.axis_dim)
    }

    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        let (data, y) = (io.input(0)?, io.output(0)?);
        if self.data_bytes > 0 && data.ptr != y.ptr {
            gpu.copy_device(data, y, self.data_bytes, stream)?;
        }
        if self.updates == 0 {
            return Ok(());
        }
        let args = [
            KernelArg::Ptr(io.input(2)?.ptr),
            KernelArg::Ptr(io.input(1)?.ptr),
            KernelArg::Ptr(y.ptr),
            KernelArg::Ptr(io.status()?.ptr),
            KernelArg::I64(self.updates as i64),
            KernelArg::Strides(self.strides),
            KernelArg::I64(self.axis as i64),
            KernelArg::I64(self.axis_dim as i64),
        ];
        gpu.launch(
            &self.source,
            stream,
            launch_shape(self.updates, gpu.info().multiprocessors),
            0,
            &args,
        )
    }
}
