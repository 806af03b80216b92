//! Conv and ConvTranspose through cuDNN (ConvTranspose as the backward-data pass of the
//! convolution from its output's shape to its input's): descriptors and the algorithm are
//! chosen once, when the node's kernel is built (cuDNN's heuristics ranking, the first
//! algorithm that fits the workspace limit, kept per shape on each GPU), the workspace comes
//! from the arena, and the bias is added by a generated epilogue kernel.
//! TF32 is used only when the GPU was opened with `tf32`.

use std::ffi::c_int;

use cudarc::cudnn::result as dnn;
use cudarc::cudnn::sys;

use super::{GpuIo, GpuKernel, GpuNode, TensorDesc};
use crate::DType;
use crate::cpu::nn::conv_transpose::transposed_windows;
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
    /// The described convolution's input (`ConvTranspose`'s output).
    x: sys::cudnnTensorDescriptor_t,
    /// Its output (`ConvTranspose`'s input).
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

/// The cuDNN pass a [`CudnnConv`] runs, with its algorithm.
#[derive(Debug, Clone, Copy)]
enum Algo {
    /// `Conv`: the forward pass from `x` to `y`.
    Forward(sys::cudnnConvolutionFwdAlgo_t),
    /// `ConvTranspose`: the backward-data pass of the convolution from `y` to `x` (descriptor
    /// `x` describes that convolution's input, the node's output).
    Transposed(sys::cudnnConvolutionBwdDataAlgo_t),
}

/// A convolution with its chosen algorithm.
#[derive(Debug)]
struct CudnnConv {
    desc: Descriptors,
    algo: Algo,
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

/// Padding, strides, dilations (as cuDNN ints, one per spatial dim) and group count of a
/// convolution.
struct Window {
    pads: Vec<c_int>,
    strides: Vec<c_int>,
    dilations: Vec<c_int>,
    group: usize,
}

/// `values` as cuDNN ints.
fn ints<T: Copy + Into<i64>>(values: &[T]) -> CudaResult<Vec<c_int>> {
    values
        .iter()
        .map(|&v| {
            let v: i64 = v.into();
            c_int::try_from(v).map_err(|_| CudaError::Unsupported(format!("{v} exceeds int")))
        })
        .collect()
}

/// Dims, strides and the like as `i64`s (`usize` has no `Into<i64>`).
fn wide(values: &[usize]) -> Vec<i64> {
    values.iter().map(|&n| n as i64).collect()
}

/// `Conv`'s window on `x` with weights `w`.
fn forward_window(node: &GpuNode<'_>, x: &TensorDesc, w: &TensorDesc) -> CudaResult<Window> {
    let attrs = node.spec.attrs;
    let geo = WindowAttrs::parse(attrs)?.resolve(&x.shape[2..], Some(&w.shape[2..]), false)?;
    if geo.pad_begin != geo.pad_end {
        return Err(node.unsupported(format!(
            "asymmetric pads {:?}/{:?}",
            geo.pad_begin, geo.pad_end
        )));
    }
    Ok(Window {
        pads: ints(&wide(&geo.pad_begin))?,
        strides: ints(&wide(&geo.strides))?,
        dilations: ints(&wide(&geo.dilations))?,
        group: attrs.int("group", 1)? as usize,
    })
}

/// `ConvTranspose`'s window on `x` with weights `w`, producing `y`. cuDNN runs it as the
/// backward-data pass of the convolution that maps `y`'s shape to `x`'s, so that convolution
/// must exist: symmetric pads, and an `output_padding` that the forward pass rounds away.
fn transposed_window(
    node: &GpuNode<'_>,
    x: &TensorDesc,
    w: &TensorDesc,
    y: &TensorDesc,
) -> CudaResult<Window> {
    let (image, kernel) = (&x.shape[2..], &w.shape[2..]);
    let (win, group) = transposed_windows(node.spec, image, kernel)?;
    if win.pad_begin != win.pad_end || win.pad_begin.iter().any(|&p| p < 0) {
        return Err(node.unsupported(format!(
            "pads {:?}/{:?} (cuDNN needs them symmetric)",
            win.pad_begin, win.pad_end
        )));
    }
    if win.out != y.shape[2..] || y.shape[1] != w.shape[1] * group {
        return Err(node.unsupported(format!("output {:?} for X {:?}", y.shape, x.shape)));
    }
    for i in 0..image.len() {
        let span = win.out[i] as i64 + 2 * win.pad_begin[i]
            - (kernel[i] as i64 - 1) * win.dilations[i] as i64
            - 1;
        if span < 0 || span / win.strides[i] as i64 + 1 != image[i] as i64 {
            return Err(node.unsupported(format!(
                "output size {:?} is not one cuDNN's forward pass maps back to {:?}",
                win.out, image
            )));
        }
    }
    Ok(Window {
        pads: ints(&win.pad_begin)?,
        strides: ints(&wide(&win.strides))?,
        dilations: ints(&wide(&win.dilations))?,
        group,
    })
}

/// Descriptors of a convolution between `x` and `y` (for `ConvTranspose`: its input and
/// output, which are the described convolution's output and input).
fn describe(
    gpu: &Gpu,
    forward_in: &[c_int],
    w: &[c_int],
    forward_out: &[c_int],
    window: &Window,
) -> CudaResult<Descriptors> {
    let f32_type = sys::cudnnDataType_t::CUDNN_DATA_FLOAT;
    // SAFETY: fresh descriptors set from checked, consistent shapes; freed by `Descriptors`.
    unsafe {
        let desc = Descriptors {
            x: dnn::create_tensor_descriptor().map_err(dnn_err("creating a descriptor"))?,
            y: dnn::create_tensor_descriptor().map_err(dnn_err("creating a descriptor"))?,
            w: dnn::create_filter_descriptor().map_err(dnn_err("creating a descriptor"))?,
            conv: dnn::create_convolution_descriptor().map_err(dnn_err("creating a descriptor"))?,
        };
        let set = dnn_err("describing the convolution");
        for (t, d) in [(desc.x, forward_in), (desc.y, forward_out)] {
            dnn::set_tensornd_descriptor(
                t,
                f32_type,
                d.len() as c_int,
                d.as_ptr(),
                contiguous(d).as_ptr(),
            )
            .map_err(&set)?;
        }
        dnn::set_filternd_descriptor(
            desc.w,
            f32_type,
            sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
            w.len() as c_int,
            w.as_ptr(),
        )
        .map_err(&set)?;
        dnn::set_convolutionnd_descriptor(
            desc.conv,
            window.pads.len() as c_int,
            window.pads.as_ptr(),
            window.strides.as_ptr(),
            window.dilations.as_ptr(),
            sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
            f32_type,
        )
        .map_err(&set)?;
        dnn::set_convolution_group_count(desc.conv, window.group as i32).map_err(&set)?;
        let math = if gpu.options().tf32 {
            sys::cudnnMathType_t::CUDNN_DEFAULT_MATH
        } else {
            sys::cudnnMathType_t::CUDNN_FMA_MATH
        };
        dnn::set_convolution_math_type(desc.conv, math).map_err(&set)?;
        Ok(desc)
    }
}

/// cuDNN's heuristic ranking of the algorithms for one pass (forward, or backward-data).
trait Ranking: Copy {
    /// The pass's algorithm type.
    type Algo: Copy;

    /// A result slot before cuDNN fills it.
    fn empty() -> Self;

    /// The ranked algorithm, whether it runs, and the workspace it asks for.
    fn result(&self) -> (Self::Algo, sys::cudnnStatus_t, usize);

    /// Ranks the algorithms for `desc` into `found`, setting `returned`.
    ///
    /// # Safety
    /// `handle` and the descriptors must be live.
    unsafe fn rank(
        handle: sys::cudnnHandle_t,
        desc: &Descriptors,
        found: &mut [Self],
        returned: &mut c_int,
    ) -> Result<(), dnn::CudnnError>;

    /// The workspace `algo` needs for `desc`.
    ///
    /// # Safety
    /// As for [`Ranking::rank`].
    unsafe fn workspace(
        handle: sys::cudnnHandle_t,
        desc: &Descriptors,
        algo: Self::Algo,
    ) -> Result<usize, dnn::CudnnError>;
}

/// Implements [`Ranking`] for the results type `$perf` of algorithms `$algo` (`$first` fills
/// empty slots), ranked by `$rank` and sized by `$size`, which both take the descriptors
/// `$desc` of `$d` in that order.
macro_rules! ranking {
    ($perf:ty, $algo:ty, $first:expr, $rank:path, $size:path, |$d:ident| $($desc:expr),+) => {
        impl Ranking for $perf {
            type Algo = $algo;

            fn empty() -> Self {
                Self {
                    algo: $first,
                    status: sys::cudnnStatus_t::CUDNN_STATUS_NOT_SUPPORTED,
                    time: 0.0,
                    memory: 0,
                    determinism: sys::cudnnDeterminism_t::CUDNN_NON_DETERMINISTIC,
                    mathType: sys::cudnnMathType_t::CUDNN_DEFAULT_MATH,
                    reserved: [0; 3],
                }
            }

            fn result(&self) -> (Self::Algo, sys::cudnnStatus_t, usize) {
                (self.algo, self.status, self.memory)
            }

            unsafe fn rank(
                handle: sys::cudnnHandle_t,
                $d: &Descriptors,
                found: &mut [Self],
                returned: &mut c_int,
            ) -> Result<(), dnn::CudnnError> {
                let n = found.len() as c_int;
                // SAFETY: the caller's; `found` has room for the `n` results asked for.
                unsafe { $rank(handle, $($desc),+, n, returned, found.as_mut_ptr()) }
            }

            unsafe fn workspace(
                handle: sys::cudnnHandle_t,
                $d: &Descriptors,
                algo: Self::Algo,
            ) -> Result<usize, dnn::CudnnError> {
                // SAFETY: the caller's.
                unsafe { $size(handle, $($desc),+, algo) }
            }
        }
    };
}

ranking!(
    sys::cudnnConvolutionFwdAlgoPerf_t,
    sys::cudnnConvolutionFwdAlgo_t,
    sys::cudnnConvolutionFwdAlgo_t::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
    dnn::get_convolution_forward_algorithm,
    dnn::get_convolution_forward_workspace_size,
    |d| d.x,
    d.w,
    d.conv,
    d.y
);

// The backward-data pass: `desc.y` is the gradient's side (`ConvTranspose`'s input).
ranking!(
    sys::cudnnConvolutionBwdDataAlgoPerf_t,
    sys::cudnnConvolutionBwdDataAlgo_t,
    sys::cudnnConvolutionBwdDataAlgo_t::CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
    dnn::get_convolution_backward_data_algorithm,
    dnn::get_convolution_backward_data_workspace_size,
    |d| d.w,
    d.y,
    d.conv,
    d.x
);

/// The first of cuDNN's heuristically ranked algorithms for `desc` that runs within the
/// workspace limit, and its workspace; chosen once per shape on each GPU (`key`).
///
/// cuDNN's measured search (`cudnnFindConvolutionForwardAlgorithm`) was tried for the forward
/// pass and not kept: on an H200 its choices made whole-model CUDA Graph replays 1.4–1.7×
/// slower than the heuristics' (see `benches/results/gpu-2026-11-26-h200.md`).
fn choose<R: Ranking>(
    gpu: &Gpu,
    node: &GpuNode<'_>,
    desc: &Descriptors,
    key: &str,
) -> CudaResult<(R::Algo, usize)>
where
    R::Algo: Send + Sync + 'static,
{
    gpu.cached(key, || {
        let handle = gpu.dnn(0);
        let mut found = [R::empty(); 8];
        let mut returned: c_int = 0;
        // SAFETY: the handle and descriptors are live.
        unsafe { R::rank(handle.0, desc, &mut found, &mut returned) }
            .map_err(dnn_err("choosing an algorithm"))?;
        let algo = found[..returned.max(0) as usize]
            .iter()
            .map(R::result)
            .find(|&(_, status, memory)| {
                status == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS && memory <= WORKSPACE_LIMIT
            })
            .ok_or_else(|| node.unsupported("cuDNN offers no algorithm for this shape"))?
            .0;
        // SAFETY: as above.
        let workspace = unsafe { R::workspace(handle.0, desc, algo) }
            .map_err(dnn_err("sizing the workspace"))?;
        Ok((algo, workspace))
    })
}

/// Builds `Conv` or `ConvTranspose`.
pub(super) fn build(gpu: &Gpu, node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let spec = node.spec;
    // Attributes were checked by the CPU kernel's builder (`ops::build`).
    let transposed = spec.op_type == "ConvTranspose";
    let x = node.input(0)?;
    let w = node.input(1)?;
    let y = node.output(0)?;
    if x.dtype != DType::F32 || w.dtype != DType::F32 {
        return Err(node.unsupported(format!("element type {:?}", x.dtype)));
    }
    if !(3..=5).contains(&x.shape.len()) || w.shape.len() != x.shape.len() {
        return Err(node.unsupported(format!("X {:?}, W {:?}", x.shape, w.shape)));
    }
    let mut window = if transposed {
        transposed_window(node, x, w, y)?
    } else {
        forward_window(node, x, w)?
    };
    if x.shape.len() == 3 {
        window.pads.insert(0, 0);
        window.strides.insert(0, 1);
        window.dilations.insert(0, 1);
    }
    let (xd, wd, yd) = (dims(&x.shape)?, dims(&w.shape)?, dims(&y.shape)?);
    let (forward_in, forward_out) = if transposed {
        // The described convolution runs from `y`'s shape to `x`'s.
        (&yd, &xd)
    } else {
        (&xd, &yd)
    };
    let desc = describe(gpu, forward_in, &wd, forward_out, &window)?;
    let key = format!(
        "{} {xd:?} {wd:?} {yd:?} pads {:?} strides {:?} dilations {:?} group {} tf32 {}",
        spec.op_type,
        window.pads,
        window.strides,
        window.dilations,
        window.group,
        gpu.options().tf32
    );
    let (algo, workspace) = if transposed {
        let (algo, workspace) =
            choose::<sys::cudnnConvolutionBwdDataAlgoPerf_t>(gpu, node, &desc, &key)?;
        (Algo::Transposed(algo), workspace)
    } else {
        let (algo, workspace) =
            choose::<sys::cudnnConvolutionFwdAlgoPerf_t>(gpu, node, &desc, &key)?;
        (Algo::Forward(algo), workspace)
    };
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
        algo,
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
        let (alpha, beta) = ((&alpha as *const f32).cast(), (&beta as *const f32).cast());
        let workspace = workspace_ptr as *mut _;
        // SAFETY: the regions hold tensors of the described shapes (the engine's plan sizes
        // them); the handle is bound to `stream`.
        unsafe {
            match self.algo {
                Algo::Forward(algo) => dnn::convolution_forward(
                    handle.0,
                    alpha,
                    self.desc.x,
                    x.ptr as *const _,
                    self.desc.w,
                    w.ptr as *const _,
                    self.desc.conv,
                    algo,
                    workspace,
                    workspace_len,
                    beta,
                    self.desc.y,
                    y.ptr as *mut _,
                ),
                // The node's input is the gradient side (`desc.y`), its output `desc.x`.
                Algo::Transposed(algo) => dnn::convolution_backward_data(
                    handle.0,
                    alpha,
                    self.desc.w,
                    w.ptr as *const _,
                    self.desc.y,
                    x.ptr as *const _,
                    self.desc.conv,
                    algo,
                    workspace,
                    workspace_len,
                    beta,
                    self.desc.x,
                    y.ptr as *mut _,
                ),
            }
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
