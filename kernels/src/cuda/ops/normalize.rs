//! Pooling, reductions, Softmax and BatchNormalization on the GPU: each is viewed as rows
//! (`[outer, axis, inner]`) or windows and runs one generated kernel.

use super::{GpuIo, GpuKernel, GpuNode};
use crate::DType;
use crate::cpu::nn::spatial::WindowAttrs;
use crate::cpu::reduce::axes::{normalize_axes, normalize_axis};
use crate::cuda::codegen::normalize::{self, ROW_BLOCK};
use crate::cuda::codegen::pool::{self, PoolKind, PoolWindow};
use crate::cuda::codegen::reduce::{self, ReduceOp};
use crate::cuda::codegen::{KernelSource, launch_shape};
use crate::cuda::error::CudaResult;
use crate::cuda::gpu::{Gpu, KernelArg};
use crate::cuda::memory::DeviceArena;

/// How a row kernel is launched.
#[derive(Debug, Clone, Copy)]
enum Grid {
    /// Grid-stride over `n` elements.
    Elements(usize),
    /// One block of [`ROW_BLOCK`] threads per row.
    Rows(usize),
}

/// A kernel taking `(x, y, extra...)`.
#[derive(Debug)]
struct RowKernel {
    source: KernelSource,
    grid: Grid,
    extra: Vec<KernelArg>,
}

impl GpuKernel for RowKernel {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        let mut args = vec![
            KernelArg::Ptr(io.input(0)?.ptr),
            KernelArg::Ptr(io.output(0)?.ptr),
        ];
        args.extend_from_slice(&self.extra);
        let shape = match self.grid {
            Grid::Elements(0) | Grid::Rows(0) => return Ok(()),
            Grid::Elements(n) => launch_shape(n, gpu.info().multiprocessors),
            Grid::Rows(rows) => (
                u32::try_from(rows).map_err(|_| {
                    crate::cuda::CudaError::Unsupported(format!("{rows} rows exceed one grid"))
                })?,
                ROW_BLOCK,
            ),
        };
        gpu.launch(&self.source, stream, shape, 0, &args)
    }
}

fn float_only<'a>(node: &GpuNode<'a>) -> CudaResult<&'a super::TensorDesc> {
    let x = node.input(0)?;
    if !matches!(x.dtype, DType::F32 | DType::F64) {
        return Err(node.unsupported(format!("element type {:?}", x.dtype)));
    }
    Ok(x)
}

pub(super) fn build_pool(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = float_only(node)?;
    let y = node.output(0)?;
    if node.outputs.len() > 1 {
        return Err(node.unsupported("MaxPool's Indices output"));
    }
    if !(3..=4).contains(&x.shape.len()) {
        return Err(node.unsupported(format!("{}-D pooling", x.shape.len() - 2)));
    }
    let attrs = node.spec.attrs;
    let ceil = attrs.int("ceil_mode", 0)? != 0;
    let window = WindowAttrs::parse(attrs)?;
    let geo = window.resolve(&x.shape[2..], None, ceil)?;
    let kind = if node.spec.op_type == "MaxPool" {
        PoolKind::Max
    } else if attrs.int("count_include_pad", 0)? != 0 {
        PoolKind::AverageIncludePad
    } else {
        PoolKind::AverageExcludePad
    };
    // 1-D pooling is 2-D pooling over a height of one.
    let two = |v: &[usize], one: usize| -> [i64; 2] {
        if v.len() == 1 {
            [one as i64, v[0] as i64]
        } else {
            [v[0] as i64, v[1] as i64]
        }
    };
    let w = PoolWindow {
        in_hw: two(&x.shape[2..], 1),
        out_hw: two(&geo.out, 1),
        kernel: two(&geo.kernel, 1),
        strides: two(&geo.strides, 1),
        dilations: two(&geo.dilations, 1),
        pad_begin: two(&geo.pad_begin, 0),
        pad_end: two(&geo.pad_end, 0),
    };
    Ok(Box::new(RowKernel {
        source: pool::source(kind, x.dtype).ok_or_else(|| node.unsupported("type"))?,
        grid: Grid::Elements(y.len()),
        extra: vec![KernelArg::I64(y.len() as i64), KernelArg::Window(w)],
    }))
}

/// A reduction over the middle of `[outer, reduced, inner]`.
fn rows(
    node: &GpuNode<'_>,
    op: ReduceOp,
    outer: usize,
    reduced: usize,
    inner: usize,
) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    let source = reduce::source(op, x.dtype)
        .ok_or_else(|| node.unsupported(format!("element type {:?}", x.dtype)))?;
    let n = outer * inner;
    Ok(Box::new(RowKernel {
        source,
        grid: Grid::Elements(n),
        extra: vec![
            KernelArg::I64(n as i64),
            KernelArg::I64(reduced as i64),
            KernelArg::I64(inner as i64),
        ],
    }))
}

pub(super) fn build_global_pool(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = float_only(node)?;
    if x.shape.len() < 3 {
        return Err(node.unsupported(format!("input {:?}", x.shape)));
    }
    let op = if node.spec.op_type == "GlobalMaxPool" {
        ReduceOp::Max
    } else {
        ReduceOp::Mean
    };
    let planes = x.shape[0] * x.shape[1];
    rows(node, op, planes, x.shape[2..].iter().product(), 1)
}

pub(super) fn build_reduce(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let op = match node.spec.op_type {
        "ReduceSum" => ReduceOp::Sum,
        "ReduceMean" => ReduceOp::Mean,
        "ReduceMax" => ReduceOp::Max,
        "ReduceMin" => ReduceOp::Min,
        "ReduceProd" => ReduceOp::Prod,
        "ReduceL1" => ReduceOp::L1,
        "ReduceL2" => ReduceOp::L2,
        "ReduceSumSquare" => ReduceOp::SumSquare,
        "ReduceLogSum" => ReduceOp::LogSum,
        "ReduceLogSumExp" => ReduceOp::LogSumExp,
        other => return Err(node.unsupported(format!("{other} is not a reduction"))),
    };
    let x = node.input(0)?;
    let rank = x.shape.len();
    let attrs = node.spec.attrs;
    let axes_from_input = node.spec.opset >= 18 || (op == ReduceOp::Sum && node.spec.opset >= 13);
    let axes: Vec<i64> = if axes_from_input {
        match (
            node.inputs.get(1).is_some_and(Option::is_some),
            node.constant(1),
        ) {
            (false, _) => Vec::new(),
            (true, Some(t)) => t.to_i64_vec()?,
            (true, None) => return Err(node.unsupported("axes that are not constants")),
        }
    } else {
        attrs.opt_ints("axes")?.unwrap_or_default()
    };
    let axes = if axes.is_empty() {
        if attrs.int("noop_with_empty_axes", 0)? != 0 {
            return Err(node.unsupported("noop_with_empty_axes"));
        }
        (0..rank).collect()
    } else {
        normalize_axes(&axes, rank)?
    };
    let (first, last) = match (axes.first(), axes.last()) {
        (Some(&f), Some(&l)) if l - f + 1 == axes.len() => (f, l),
        (None, _) | (_, None) => (0, rank.saturating_sub(1)),
        _ => return Err(node.unsupported(format!("non-adjacent axes {axes:?}"))),
    };
    let outer = x.shape[..first].iter().product();
    let reduced = x.shape[first..=last.min(rank.saturating_sub(1))]
        .iter()
        .product();
    let inner = x.shape[(last + 1).min(rank)..].iter().product();
    rows(node, op, outer, reduced, inner)
}

pub(super) fn build_softmax(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = float_only(node)?;
    let rank = x.shape.len();
    let opset = node.spec.opset;
    let axis = normalize_axis(
        node.spec
            .attrs
            .int("axis", if opset < 13 { 1 } else { -1 })?,
        rank,
    )?;
    let outer: usize = x.shape[..axis].iter().product();
    let (axis_len, inner) = if opset < 13 {
        (x.shape[axis..].iter().product(), 1)
    } else {
        (x.shape[axis], x.shape[axis + 1..].iter().product())
    };
    let log = node.spec.op_type == "LogSoftmax";
    Ok(Box::new(RowKernel {
        source: normalize::softmax_source(x.dtype, log).ok_or_else(|| node.unsupported("type"))?,
        grid: Grid::Rows(outer * inner),
        extra: vec![
            KernelArg::I64(axis_len as i64),
            KernelArg::I64(inner as i64),
        ],
    }))
}

/// BatchNormalization (inference) as `y = x·scale[c] + shift[c]`, the per-channel factors
/// computed on the host from the constant statistics and uploaded once.
#[derive(Debug)]
struct BatchNorm {
    source: KernelSource,
    params: DeviceArena,
    channels: usize,
    n: usize,
    inner: usize,
}

pub(super) fn build_batch_norm(gpu: &Gpu, node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    if x.dtype != DType::F32 || x.shape.len() < 2 {
        return Err(node.unsupported(format!("{:?} {:?}", x.dtype, x.shape)));
    }
    if node.outputs.len() > 1 || node.spec.attrs.int("training_mode", 0)? != 0 {
        return Err(node.unsupported("training mode"));
    }
    let channels = x.shape[1];
    let mut stats = Vec::with_capacity(4);
    for i in 1..5 {
        let t = node
            .constant(i)
            .ok_or_else(|| node.unsupported("statistics that are not constants"))?;
        let v = t.to_f64_vec()?;
        if v.len() != channels {
            return Err(node.unsupported(format!(
                "input {i} has {} values for {channels} channels",
                v.len()
            )));
        }
        stats.push(v);
    }
    let eps = node.spec.attrs.float("epsilon", 1e-5)? as f64;
    let mut host = Vec::with_capacity(8 * channels);
    let scale: Vec<f32> = (0..channels)
        .map(|c| (stats[0][c] / (stats[3][c] + eps).sqrt()) as f32)
        .collect();
    let shift: Vec<f32> = (0..channels)
        .map(|c| (stats[1][c] - stats[2][c] * scale[c] as f64) as f32)
        .collect();
    for v in scale.iter().chain(&shift) {
        host.extend_from_slice(&v.to_ne_bytes());
    }
    let params = DeviceArena::new(gpu.copy_in_stream(), host.len())?;
    gpu.upload(&host, params.region())?;
    gpu.copy_in_stream()
        .synchronize()
        .map_err(crate::cuda::error::driver(
            "uploading BatchNormalization factors",
        ))?;
    Ok(Box::new(BatchNorm {
        source: normalize::channel_affine_source(DType::F32)
            .ok_or_else(|| node.unsupported("type"))?,
        params,
        channels,
        n: x.len(),
        inner: x.shape[2..].iter().product(),
    }))
}

impl GpuKernel for BatchNorm {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        let p = self.params.region();
        let args = [
            KernelArg::Ptr(io.input(0)?.ptr),
            KernelArg::Ptr(p.ptr),
            KernelArg::Ptr(p.ptr + (4 * self.channels) as u64),
            KernelArg::Ptr(io.output(0)?.ptr),
            KernelArg::I64(self.n as i64),
            KernelArg::I64(self.channels as i64),
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
