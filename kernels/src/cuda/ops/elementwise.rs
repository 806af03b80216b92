//! Elementwise operators on the GPU: the unary maps, Clip, Cast, the broadcast binary
//! operators and Where, each one NVRTC kernel launched over the output.

use super::{GpuIo, GpuKernel, GpuNode};
use crate::cpu::unary::{self, Domain};
use crate::cuda::codegen::binary::{self, BinaryOp, Layout};
use crate::cuda::codegen::{self, KernelSource, Strides, broadcast_strides, launch_shape};
use crate::cuda::error::CudaResult;
use crate::cuda::gpu::{Gpu, KernelArg};
use crate::{DType, Tensor};

/// A kernel over `n` output elements taking `(inputs..., output, n[, strides])`.
#[derive(Debug)]
struct Elementwise {
    source: KernelSource,
    inputs: usize,
    n: usize,
    strides: Option<Strides>,
}

impl GpuKernel for Elementwise {
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        if self.n == 0 {
            return Ok(());
        }
        let mut args = Vec::with_capacity(self.inputs + 3);
        for i in 0..self.inputs {
            args.push(KernelArg::Ptr(io.input(i)?.ptr));
        }
        args.push(KernelArg::Ptr(io.output(0)?.ptr));
        args.push(KernelArg::I64(self.n as i64));
        if let Some(s) = self.strides {
            args.push(KernelArg::Strides(s));
        }
        let shape = launch_shape(self.n, gpu.info().multiprocessors);
        gpu.launch(&self.source, stream, shape, 0, &args)
    }
}

/// The binary operators by ONNX op type.
pub(super) const BINARY: &[(&str, BinaryOp)] = &[
    ("Add", BinaryOp::Add),
    ("Sub", BinaryOp::Sub),
    ("Mul", BinaryOp::Mul),
    ("Div", BinaryOp::Div),
    ("Pow", BinaryOp::Pow),
    ("Max", BinaryOp::Max),
    ("Min", BinaryOp::Min),
    ("Mod", BinaryOp::Mod),
    ("PRelu", BinaryOp::PRelu),
    ("Equal", BinaryOp::Equal),
    ("Greater", BinaryOp::Greater),
    ("GreaterOrEqual", BinaryOp::GreaterOrEqual),
    ("Less", BinaryOp::Less),
    ("LessOrEqual", BinaryOp::LessOrEqual),
    ("And", BinaryOp::And),
    ("Or", BinaryOp::Or),
    ("Xor", BinaryOp::Xor),
];

/// The binary operator of an ONNX op type.
pub(super) fn binary_op(op_type: &str) -> Option<BinaryOp> {
    BINARY
        .iter()
        .find(|(name, _)| *name == op_type)
        .map(|(_, op)| *op)
}

pub(super) fn build_unary(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let (op, domain) = unary::parse(node.spec)?;
    let x = node.input(0)?;
    let source = match domain {
        Domain::Bool if x.dtype == DType::Bool => Some(codegen::unary::not_source()),
        Domain::Bool => None,
        Domain::Float | Domain::Numeric => codegen::unary::source(op, x.dtype),
    }
    .ok_or_else(|| node.unsupported(format!("element type {:?}", x.dtype)))?;
    Ok(Box::new(Elementwise {
        source,
        inputs: 1,
        n: x.len(),
        strides: None,
    }))
}

/// A scalar bound of Clip from a constant input (`Some(None)` when the input is absent).
fn scalar(t: Option<&Tensor>) -> Option<Option<f64>> {
    let Some(t) = t else {
        return Some(None);
    };
    match t.to_f64_vec().ok()?.as_slice() {
        [v] => Some(Some(*v)),
        _ => None,
    }
}

pub(super) fn build_clip(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    let (min, max) = if node.spec.opset < 11 {
        (
            Some(node.spec.attrs.float("min", f32::MIN)? as f64),
            Some(node.spec.attrs.float("max", f32::MAX)? as f64),
        )
    } else {
        let bound = |i: usize| {
            let present = node.inputs.get(i).is_some_and(Option::is_some);
            if present && node.constant(i).is_none() {
                return Err(node.unsupported("bounds that are not constants"));
            }
            scalar(node.constant(i)).ok_or_else(|| node.unsupported("a bound that is not a scalar"))
        };
        (bound(1)?, bound(2)?)
    };
    let source = codegen::unary::clip_source(x.dtype, min, max)
        .ok_or_else(|| node.unsupported(format!("element type {:?}", x.dtype)))?;
    Ok(Box::new(Elementwise {
        source,
        inputs: 1,
        n: x.len(),
        strides: None,
    }))
}

pub(super) fn build_cast(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let x = node.input(0)?;
    let y = node.output(0)?;
    let source = codegen::unary::cast_source(x.dtype, y.dtype)
        .ok_or_else(|| node.unsupported(format!("from {:?} to {:?}", x.dtype, y.dtype)))?;
    Ok(Box::new(Elementwise {
        source,
        inputs: 1,
        n: x.len(),
        strides: None,
    }))
}

/// The strides of every input broadcast to the output, or an error naming the shapes.
fn strides_for(node: &GpuNode<'_>, count: usize) -> CudaResult<(Strides, bool)> {
    let out = &node.output(0)?.shape;
    let mut all = Vec::with_capacity(count);
    let mut same = true;
    for i in 0..count {
        let shape = &node.input(i)?.shape;
        same &= shape == out;
        all.push(
            broadcast_strides(shape, out).ok_or_else(|| {
                node.unsupported(format!("{shape:?} does not broadcast to {out:?}"))
            })?,
        );
    }
    let refs: Vec<&[i64]> = all.iter().map(Vec::as_slice).collect();
    let strides = Strides::new(out, &refs)
        .ok_or_else(|| node.unsupported(format!("rank {} is above 8", out.len())))?;
    Ok((strides, same))
}

pub(super) fn build_binary(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let mut op = binary_op(node.spec.op_type).ok_or_else(|| node.unsupported("not binary"))?;
    if op == BinaryOp::Mod && node.spec.attrs.int("fmod", 0)? == 1 {
        op = BinaryOp::Fmod;
    }
    if matches!(op, BinaryOp::Max | BinaryOp::Min) && node.inputs.len() != 2 {
        return Err(node.unsupported("Max/Min of other than two inputs"));
    }
    let a = node.input(0)?;
    let b = node.input(1)?;
    if a.dtype != b.dtype {
        return Err(node.unsupported(format!("mixed types {:?} and {:?}", a.dtype, b.dtype)));
    }
    let out = node.output(0)?;
    let (strides, same) = strides_for(node, 2)?;
    let layout = if same {
        Layout::Same
    } else {
        Layout::Strided {
            rank: out.shape.len(),
        }
    };
    let source = binary::source(op, a.dtype, layout)
        .ok_or_else(|| node.unsupported(format!("element type {:?}", a.dtype)))?;
    Ok(Box::new(Elementwise {
        source,
        inputs: 2,
        n: out.len(),
        strides: (!same).then_some(strides),
    }))
}

pub(super) fn build_where(node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let out = node.output(0)?;
    let (strides, _) = strides_for(node, 3)?;
    let source = binary::where_source(out.dtype, out.shape.len())
        .ok_or_else(|| node.unsupported(format!("element type {:?}", out.dtype)))?;
    Ok(Box::new(Elementwise {
        source,
        inputs: 3,
        n: out.len(),
        strides: Some(strides),
    }))
}
