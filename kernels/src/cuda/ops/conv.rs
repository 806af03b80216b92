//! Conv through cuDNN: descriptors and the algorithm are chosen once, when the node's kernel
//! is built (cuDNN's heuristics ranking, the first algorithm that fits the workspace limit),
//! the workspace comes from the arena, and the bias is added by a generated epilogue kernel.
//! TF32 is used only when the GPU was opened with `tf32`.

use std::ffi::c_int;

use cudarc::cudnn::result as dnn;
use cudarc::cudnn::sys;

use super::{GpuIo, GpuKernel, GpuNode};
use crate::DType;
use crate::cpu::nn::spatial::WindowAttrs;
use crate::cuda::codegen::{KernelSource, launch_shape, normalize};
use crate::cuda::error::{CudaError, CudaResult};
use crate::cuda::gpu::{Gpu, KernelArg};

/// Largest workspace an algorithm may ask for.
const WORKSPACE_LIMIT: usize = 1 << 30;

fn dnn_err(what: &'static str) -> impl Fn(dnn::CudnnError) -> CudaError {
    move |e| CudaError::Cudnn {
        what,
        reason: format!("{e:?}"),
    }
}

/// The cuDNN descriptors of one convolution, destroyed with it.
#[derive(Debug)]
struct Descriptors {
    x: sys::cudnnTensorDescriptor_t,
    y: sys::cudnnTensorDescriptor_t,
    w: sys::cudnnFilterDescriptor_t,
    conv: sys::cudnnConvolutionDescriptor_t,
}

// SAFETY: descriptors are host-side settings, written only while the kernel is built and
// read-only afterwards; cuDNN allows using them from any thread.
unsafe impl Send for Descriptors {}
// SAFETY: as above.
unsafe impl Sync for Descriptors {}

impl Drop for Descriptors {
    fn drop(&mut self) {
        // SAFETY: each was created once by cuDNN and is destroyed once.
        unsafe {
            dnn::destroy_tensor_descriptor(self.x).ok();
            dnn::destroy_tensor_descriptor(self.y).ok();
            dnn::destroy_filter_descriptor(self.w).ok();
            dnn::destroy_convolution_descriptor(self.conv).ok();
        }
    }
}

/// A convolution with its chosen algorithm.
#[derive(Debug)]
struct CudnnConv {
    desc: Descriptors,
    algo: sys::cudnnConvolutionFwdAlgo_t,
    workspace: usize,
    bias: Option<(KernelSource, usize, usize, usize)>,
}

fn contiguous(shape: &[c_int]) -> Vec<c_int> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// `shape` as cuDNN dims, a 1-D convolution's tensors given a unit height (cuDNN wants 4-D
/// or more).
fn dims(shape: &[usize]) -> CudaResult<Vec<c_int>> {
    let mut d: Vec<c_int> = shape
        .iter()
        .map(|&n| c_int::try_from(n))
        .collect::<Result<_, _>>()
        .map_err(|_| CudaError::Unsupported(format!("Conv shape {shape:?} exceeds cuDNN's int")))?;
    if d.len() == 3 {
        d.insert(2, 1);
    }
    Ok(d)
}

pub(super) fn build(gpu: &Gpu, node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let spec = node.spec;
    spec.attrs.only(crate::cpu::nn::conv::ATTRIBUTES)?;
    let x = node.input(0)?;
    let w = node.input(1)?;
    let y = node.output(0)?;
    if x.dtype != DType::F32 || w.dtype != DType::F32 {
        return Err(node.unsupported(format!("element type {:?}", x.dtype)));
    }
    if !(3..=5).contains(&x.shape.len()) || w.shape.len() != x.shape.len() {
        return Err(node.unsupported(format!("X {:?}, W {:?}", x.shape, w.shape)));
    }
    let group = spec.attrs.int("group", 1)?;
    let geo = WindowAttrs::parse(spec.attrs)?.resolve(&x.shape[2..], Some(&w.shape[2..]), false)?;
    if geo.pad_begin != geo.pad_end {
        return Err(node.unsupported(format!(
            "asymmetric pads {:?}/{:?}",
            geo.pad_begin, geo.pad_end
        )));
    }
    let mut pads: Vec<c_int> = geo.pad_begin.iter().map(|&p| p as c_int).collect();
    let mut strides: Vec<c_int> = geo.strides.iter().map(|&p| p as c_int).collect();
    let mut dilations: Vec<c_int> = geo.dilations.iter().map(|&p| p as c_int).collect();
    if x.shape.len() == 3 {
        pads.insert(0, 0);
        strides.insert(0, 1);
        dilations.insert(0, 1);
    }
    let (xd, wd, yd) = (dims(&x.shape)?, dims(&w.shape)?, dims(&y.shape)?);
    let f32_type = sys::cudnnDataType_t::CUDNN_DATA_FLOAT;
    // SAFETY: fresh descriptors set from checked, consistent shapes; freed by `Descriptors`.
    let desc = unsafe {
        let desc = Descriptors {
            x: dnn::create_tensor_descriptor().map_err(dnn_err("creating a descriptor"))?,
            y: dnn::create_tensor_descriptor().map_err(dnn_err("creating a descriptor"))?,
            w: dnn::create_filter_descriptor().map_err(dnn_err("creating a descriptor"))?,
            conv: dnn::create_convolution_descriptor().map_err(dnn_err("creating a descriptor"))?,
        };
        let set = dnn_err("describing the convolution");
        dnn::set_tensornd_descriptor(
            desc.x,
            f32_type,
            xd.len() as c_int,
            xd.as_ptr(),
            contiguous(&xd).as_ptr(),
        )
        .map_err(&set)?;
        dnn::set_tensornd_descriptor(
            desc.y,
            f32_type,
            yd.len() as c_int,
            yd.as_ptr(),
            contiguous(&yd).as_ptr(),
        )
        .map_err(&set)?;
        dnn::set_filternd_descriptor(
            desc.w,
            f32_type,
            sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
            wd.len() as c_int,
            wd.as_ptr(),
        )
        .map_err(&set)?;
        dnn::set_convolutionnd_descriptor(
            desc.conv,
            pads.len() as c_int,
            pads.as_ptr(),
            strides.as_ptr(),
            dilations.as_ptr(),
            sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
            f32_type,
        )
        .map_err(&set)?;
        dnn::set_convolution_group_count(desc.conv, group as i32).map_err(&set)?;
        let math = if gpu.options().tf32 {
            sys::cudnnMathType_t::CUDNN_DEFAULT_MATH
        } else {
            sys::cudnnMathType_t::CUDNN_FMA_MATH
        };
        dnn::set_convolution_math_type(desc.conv, math).map_err(&set)?;
        desc
    };
    let handle = gpu.dnn(0);
    let mut found = [sys::cudnnConvolutionFwdAlgoPerf_t {
        algo: sys::cudnnConvolutionFwdAlgo_t::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
        status: sys::cudnnStatus_t::CUDNN_STATUS_NOT_SUPPORTED,
        time: 0.0,
        memory: 0,
        determinism: sys::cudnnDeterminism_t::CUDNN_NON_DETERMINISTIC,
        mathType: sys::cudnnMathType_t::CUDNN_DEFAULT_MATH,
        reserved: [0; 3],
    }; 8];
    let mut returned: c_int = 0;
    // SAFETY: the descriptors are valid and `found` has room for the 8 results asked for.
    unsafe {
        dnn::get_convolution_forward_algorithm(
            handle.0,
            desc.x,
            desc.w,
            desc.conv,
            desc.y,
            found.len() as c_int,
            &mut returned,
            found.as_mut_ptr(),
        )
    }
    .map_err(dnn_err("choosing an algorithm"))?;
    let choice = found[..returned.max(0) as usize]
        .iter()
        .find(|p| {
            p.status == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS && p.memory <= WORKSPACE_LIMIT
        })
        .ok_or_else(|| node.unsupported("cuDNN offers no algorithm for this shape"))?;
    // SAFETY: as above.
    let workspace = unsafe {
        dnn::get_convolution_forward_workspace_size(
            handle.0,
            desc.x,
            desc.w,
            desc.conv,
            desc.y,
            choice.algo,
        )
    }
    .map_err(dnn_err("sizing the workspace"))?;
    drop(handle);
    let bias = match node.inputs.get(2).and_then(Option::as_ref) {
        Some(b) if b.shape == [y.shape[1]] => Some((
            normalize::bias_add_source(DType::F32, false)
                .ok_or_else(|| node.unsupported("bias type"))?,
            y.len(),
            y.shape[1],
            y.shape[2..].iter().product(),
        )),
        Some(b) => return Err(node.unsupported(format!("bias shape {:?}", b.shape))),
        None => None,
    };
    Ok(Box::new(CudnnConv {
        desc,
        algo: choice.algo,
        workspace,
        bias,
    }))
}

impl GpuKernel for CudnnConv {
    fn workspace_bytes(&self) -> usize {
        self.workspace
    }

    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()> {
        let (x, w, y) = (io.input(0)?, io.input(1)?, io.output(0)?);
        let (workspace_ptr, workspace_len) = match io.workspace {
            Some(ws) if ws.bytes >= self.workspace => (ws.ptr, self.workspace),
            _ if self.workspace == 0 => (0, 0),
            _ => {
                return Err(CudaError::Unsupported(format!(
                    "Conv needs a {}-byte workspace",
                    self.workspace
                )));
            }
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        // cuDNN runs in the calling thread's current context.
        gpu.context()
            .bind_to_thread()
            .map_err(crate::cuda::error::driver("binding the context"))?;
        let handle = gpu.dnn(stream);
        // SAFETY: the regions hold tensors of the described shapes (the engine's plan sizes
        // them); the handle is bound to `stream`.
        unsafe {
            dnn::convolution_forward(
                handle.0,
                (&alpha as *const f32).cast(),
                self.desc.x,
                x.ptr as *const _,
                self.desc.w,
                w.ptr as *const _,
                self.desc.conv,
                self.algo,
                workspace_ptr as *mut _,
                workspace_len,
                (&beta as *const f32).cast(),
                self.desc.y,
                y.ptr as *mut _,
            )
        }
        .map_err(dnn_err("running the convolution"))?;
        drop(handle);
        if let Some((source, n, channels, inner)) = &self.bias {
            let args = [
                KernelArg::Ptr(io.input(2)?.ptr),
                KernelArg::Ptr(y.ptr),
                KernelArg::I64(*n as i64),
                KernelArg::I64(*channels as i64),
                KernelArg::I64(*inner as i64),
            ];
            gpu.launch(
                source,
                stream,
                launch_shape(*n, gpu.info().multiprocessors),
                0,
                &args,
            )?;
        }
        Ok(())
    }
}
