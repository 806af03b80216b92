//! Operators on the GPU. A [`GpuKernel`] is built once per node for fixed input and output
//! shapes (the engine's shape inference gives them), choosing everything that depends on
//! shapes — the broadcast layout, the cuDNN algorithm, the workspace size — at build time;
//! launching it only enqueues work on a stream and never waits.

mod conv;
mod detection;
mod elementwise;
mod fill;
mod gather;
mod layout;
mod matmul;
mod normalize;
mod pad;
mod resize;

use std::fmt::Debug;

use super::error::{CudaError, CudaResult};
use super::gpu::Gpu;
use super::memory::DeviceRegion;
use crate::{DType, NodeSpec, Tensor};

/// Element type and shape of a value on the GPU (stored contiguously, row-major).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDesc {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
}

impl TensorDesc {
    /// A description.
    pub fn new(dtype: DType, shape: &[usize]) -> TensorDesc {
        TensorDesc {
            dtype,
            shape: shape.to_vec(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes it occupies.
    pub fn bytes(&self) -> usize {
        self.len() * self.dtype.size_of()
    }
}

/// Where a launch reads and writes.
#[derive(Debug, Clone, Copy)]
pub struct GpuIo<'a> {
    /// One region per declared input (`None` for an omitted optional one).
    pub inputs: &'a [Option<DeviceRegion>],
    /// One region per output, each exactly the output's size or larger.
    pub outputs: &'a [DeviceRegion],
    /// Scratch of [`GpuKernel::workspace_bytes`] bytes (when nonzero).
    pub workspace: Option<DeviceRegion>,
    /// The launch's status word, [`STATUS_BYTES`] zeroed bytes, for a kernel that
    /// [`GpuKernel::reports_status`].
    pub status: Option<DeviceRegion>,
}

/// Bytes of a launch's status word: a `u32` code (0 while all is well), 4 bytes of padding,
/// then the offending value as an `i64` (see [`crate::cuda::codegen::detection`]).
pub const STATUS_BYTES: usize = 16;

/// A status word read back from the GPU: `Some((code, value))` when the kernel reported one.
pub fn read_status(bytes: &[u8]) -> Option<(u32, i64)> {
    let code = u32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?);
    let value = i64::from_ne_bytes(bytes.get(8..16)?.try_into().ok()?);
    (code != 0).then_some((code, value))
}

impl GpuIo<'_> {
    /// Input `index`, which must be present.
    pub fn input(&self, index: usize) -> CudaResult<DeviceRegion> {
        self.inputs
            .get(index)
            .copied()
            .flatten()
            .ok_or_else(|| CudaError::Unsupported(format!("input {index} is missing")))
    }

    /// The status word.
    pub fn status(&self) -> CudaResult<DeviceRegion> {
        self.status
            .ok_or_else(|| CudaError::Unsupported("the launch has no status word".into()))
    }

    /// Output `index`.
    pub fn output(&self, index: usize) -> CudaResult<DeviceRegion> {
        self.outputs
            .get(index)
            .copied()
            .ok_or_else(|| CudaError::Unsupported(format!("output {index} is missing")))
    }
}

/// One node's operator on the GPU.
pub trait GpuKernel: Send + Sync + Debug {
    /// Scratch bytes a launch needs (from the arena).
    fn workspace_bytes(&self) -> usize {
        0
    }

    /// Whether launches check values the data gives (indices) and report a bad one in the
    /// status word ([`GpuIo::status`]), which the caller reads after the run and turns into
    /// [`GpuKernel::status_error`].
    fn reports_status(&self) -> bool {
        false
    }

    /// The error the status `code` (nonzero) with offending `value` stands for.
    fn status_error(&self, code: u32, value: i64) -> CudaError {
        CudaError::Unsupported(format!("status {code} (value {value})"))
    }

    /// Enqueues the operator on compute stream `stream` of `gpu`.
    fn launch(&self, gpu: &Gpu, stream: usize, io: &GpuIo<'_>) -> CudaResult<()>;
}

/// What a GPU kernel is built from: the node, its input and output descriptions, and the
/// host values of inputs that are constant (initializers), which some operators need at
/// build time (Clip bounds, BatchNormalization statistics, Reshape targets).
#[derive(Debug, Clone, Copy)]
pub struct GpuNode<'a> {
    /// Op type, opset and attributes.
    pub spec: &'a NodeSpec<'a>,
    /// Input descriptions (`None` for omitted optional inputs).
    pub inputs: &'a [Option<TensorDesc>],
    /// Output descriptions.
    pub outputs: &'a [TensorDesc],
    /// Host values of constant inputs.
    pub constants: &'a [Option<&'a Tensor>],
}

impl<'a> GpuNode<'a> {
    /// Input `index`'s description.
    pub fn input(&self, index: usize) -> CudaResult<&'a TensorDesc> {
        self.inputs
            .get(index)
            .and_then(Option::as_ref)
            .ok_or_else(|| CudaError::Unsupported(format!("input {index} is missing")))
    }

    /// Output `index`'s description.
    pub fn output(&self, index: usize) -> CudaResult<&'a TensorDesc> {
        self.outputs
            .get(index)
            .ok_or_else(|| CudaError::Unsupported(format!("output {index} is missing")))
    }

    /// The host value of input `index` when it is a constant.
    pub fn constant(&self, index: usize) -> Option<&'a Tensor> {
        self.constants.get(index).copied().flatten()
    }

    /// An error saying this node has no GPU kernel, and why.
    pub fn unsupported(&self, why: impl std::fmt::Display) -> CudaError {
        CudaError::Unsupported(format!("{} on the GPU: {why}", self.spec.op_type))
    }
}

/// The op types with a GPU kernel besides the unary maps (`crate::cpu::unary::OPS`) and the
/// binary operators ([`elementwise::BINARY`]).
const OTHER_OPS: &[&str] = &[
    "Cast",
    "Where",
    "Conv",
    "ConvTranspose",
    "MatMul",
    "Gemm",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "BatchNormalization",
    "Softmax",
    "LogSoftmax",
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceSumSquare",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "Transpose",
    "Concat",
    "Split",
    "Slice",
    "Expand",
    "Gather",
    "RoiAlign",
    "ScatterElements",
    "Scatter",
    "ConstantOfShape",
    "Pad",
    "Resize",
    "Upsample",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Identity",
];

/// The op types with a GPU kernel (for some types and attributes; [`build`] says exactly).
pub fn gpu_ops() -> Vec<&'static str> {
    let unary = crate::cpu::unary::OPS.iter().copied();
    let binary = elementwise::BINARY.iter().map(|(name, _)| *name);
    unary
        .chain(binary)
        .chain(OTHER_OPS.iter().copied())
        .collect()
}

/// Builds the GPU kernel of `node`, or says why there is none (the placement keeps such a
/// node on the CPU).
pub fn build(gpu: &Gpu, node: &GpuNode<'_>) -> CudaResult<Box<dyn GpuKernel>> {
    let op = node.spec.op_type;
    // The CPU kernel's builder checks every attribute; the GPU kernel accepts nothing less.
    crate::cpu::build(node.spec)?;
    if !node.spec.domain.is_empty() && node.spec.domain != "ai.onnx" {
        return Err(node.unsupported(format!("domain '{}'", node.spec.domain)));
    }
    match op {
        "Clip" => elementwise::build_clip(node),
        "Cast" => elementwise::build_cast(node),
        "Where" => elementwise::build_where(node),
        "Conv" | "ConvTranspose" => conv::build(gpu, node),
        "MatMul" => matmul::build_matmul(node),
        "Gemm" => matmul::build_gemm(node),
        "MaxPool" | "AveragePool" => normalize::build_pool(node),
        "GlobalAveragePool" | "GlobalMaxPool" => normalize::build_global_pool(node),
        "BatchNormalization" => normalize::build_batch_norm(gpu, node),
        "Softmax" | "LogSoftmax" => normalize::build_softmax(node),
        _ if op.starts_with("Reduce") => normalize::build_reduce(node),
        "Transpose" => layout::build_transpose(node),
        "Concat" => layout::build_concat(node),
        "Split" => layout::build_split(node),
        "Slice" => layout::build_slice(node),
        "Expand" => layout::build_expand(node),
        "Gather" => gather::build_gather(gpu, node),
        "RoiAlign" => detection::build_roi_align(node),
        "ScatterElements" | "Scatter" => detection::build_scatter_elements(node),
        "ConstantOfShape" => fill::build_constant_of_shape(node),
        "Pad" => pad::build_pad(node),
        "Resize" | "Upsample" => resize::build_resize(gpu, node),
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" | "Identity" => layout::build_alias(node),
        _ if elementwise::binary_op(op).is_some() => elementwise::build_binary(node),
        _ if crate::cpu::unary::OPS.contains(&op) => elementwise::build_unary(node),
        _ => Err(node.unsupported("no GPU kernel for this operator")),
    }
}
