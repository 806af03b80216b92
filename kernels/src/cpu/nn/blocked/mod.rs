//! Kernels on images in blocks of 16 channels (NCHW16c), ONNX Runtime's layout for
//! convolutional networks on AVX-512 CPUs. On AVX2 a block is two vectors of 8 (ONNX
//! Runtime blocks 8 channels there): the convolutions' position tiles store a panel of 16
//! channels as one block, and the pools and the depthwise convolution are written once for
//! both instruction sets over `vector16::Vector16`. A blocked tensor is an ordinary 5-D tensor
//! `[N, C / 16, H, W, 16]`: the graph pass that chooses the layout gives the blocked values
//! those shapes, so shape inference, the memory plan and `Concat` along axis 1 need nothing
//! new. In this layout a convolution's position tile stores each accumulator as it is (in
//! channel planes it is transposed first), and a pool combines whole vectors of channels
//! (in planes, rows of 7 or 14 outputs fill vectors poorly).
//!
//! The ops live in their own domain, [`DOMAIN`]:
//! - `Conv`: `FusedConv`'s inputs and attributes (group 1, 2-D) with `X` planar or blocked,
//!   `Z` blocked, and `Y` blocked (or planar when `blocked_output` is 0); or, with one group
//!   per channel (depthwise, no `Z`), `X` and `Y` blocked;
//! - `MaxPool`, `AveragePool`: 2-D, no `Indices` output, no dilations;
//! - `GlobalAveragePool`: a blocked `X`, a planar `[N, C, 1, 1]` `Y`;
//! - `ReorderOutput`: blocked to planar;
//! - `Concat`: blocked images along the channels, each input's live channels in the
//!   attribute `channels`;
//! - `Pad`: a constant (`value`) around a blocked image's height and width (`pads`: top,
//!   left, bottom, right; negative ones crop).
//!
//! A value of `C` channels, `C` not a multiple of 16, is stored in `⌈C / 16⌉` blocks, the last
//! one padded (ONNX Runtime pads its blocks likewise). The padding lanes are written (zeros
//! where the inputs are finite) but never read into a live channel: the convolutions take the
//! live channels from their weights, `GlobalAveragePool` and `ReorderOutput` from their
//! attribute `channels`, and the other ops compute each lane alone.

mod concat;
mod conv;
mod depthwise;
mod pad;
mod pool;
mod reorder;
pub(crate) mod vector16;

pub use conv::BlockedConv;
pub use depthwise::BlockedDepthwise;

use super::packed_gemm::Isa;
use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec, input};
use crate::{DType, Tensor};

/// The domain of the blocked ops.
pub const DOMAIN: &str = "spillway.nchw16c";

/// Channels per block.
pub const BLOCK: usize = 16;

/// The op types of [`DOMAIN`].
pub const OPS: &[&str] = &[
    "Conv",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "ReorderOutput",
    "Concat",
    "Pad",
];

/// The channels blocks of `c` live channels store: `c` rounded up to whole blocks (the last
/// one's lanes past `c` are padding).
pub fn stored_channels(c: usize) -> usize {
    c.div_ceil(BLOCK) * BLOCK
}

/// True when this CPU runs the blocked kernels: the packed GEMM has an instruction set here
/// (AVX-512F, or AVX2 with FMA, where a block is two vectors).
pub fn available() -> bool {
    Isa::detect().is_some()
}

/// Builds the kernel of a [`DOMAIN`] node.
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    match spec.op_type {
        "Conv" => conv::build(spec),
        "MaxPool" | "AveragePool" => pool::build(spec),
        "GlobalAveragePool" => pool::build_global(spec),
        "ReorderOutput" => reorder::build(spec),
        "Concat" => concat::build(spec),
        "Pad" => pad::build(spec),
        other => Err(KernelError::UnsupportedOp {
            op_type: other.into(),
            domain: DOMAIN.into(),
        }),
    }
}

/// `[N, C, H, W]` of a blocked `[N, C / 16, H, W, 16]` shape, `C` counting every lane of
/// every block (the live channels are fewer when the last block is padded), or an error
/// naming the operand (`what`).
fn unblocked(shape: &[usize], what: &str) -> Result<[usize; 4]> {
    match *shape {
        [n, blocks, h, w, BLOCK] => Ok([n, blocks * BLOCK, h, w]),
        _ => Err(KernelError::Shape(format!(
            "{what} must be blocked [N, C/16, H, W, 16], got {shape:?}"
        ))),
    }
}

/// The attribute `channels` of a node that gives planes from blocks: how many of the blocks'
/// channels are live (`None`: all of them).
fn live_channels_attr(spec: &NodeSpec<'_>) -> Result<Option<usize>> {
    match spec.attrs.opt_int("channels")? {
        None => Ok(None),
        Some(c) => usize::try_from(c)
            .map(Some)
            .map_err(|_| KernelError::UnsupportedAttribute {
                name: "channels".into(),
                reason: format!("must be at least 0, got {c}"),
            }),
    }
}

/// The live channels of blocks holding `stored` channels: `channels` when given (it must fill
/// all of them but the last block's padding), else `stored`.
fn live_channels(channels: Option<usize>, stored: usize) -> Result<usize> {
    match channels {
        None => Ok(stored),
        Some(c) if stored_channels(c) == stored => Ok(c),
        Some(c) => Err(KernelError::Shape(format!(
            "{c} channels do not fill blocks of {stored} channels but for the last block's padding"
        ))),
    }
}

/// `X` and `W` of a blocked convolution, after checking that there are at most `names.len()`
/// inputs (`names` lists them for the error) and that all are `f32`.
fn conv_inputs<'a>(
    inputs: &[Option<&'a Tensor>],
    what: &str,
    names: &[&str],
) -> Result<(&'a Tensor, &'a Tensor)> {
    if inputs.len() > names.len() {
        return Err(KernelError::Arity(format!(
            "the blocked {what} takes at most {} inputs ({}), got {}",
            names.len(),
            names.join(", "),
            inputs.len()
        )));
    }
    for (index, t) in inputs.iter().enumerate() {
        if let Some(t) = t.filter(|t| t.dtype() != DType::F32) {
            return Err(KernelError::UnsupportedDType {
                index,
                dtype: t.dtype(),
            });
        }
    }
    Ok((input(inputs, 0)?, input(inputs, 1)?))
}

/// The optional bias `B` (input 2) of a blocked convolution of `m` output channels, checked
/// to be `[m]`.
fn conv_bias<'a>(
    inputs: &[Option<&'a Tensor>],
    m: usize,
) -> Result<Option<std::borrow::Cow<'a, [f32]>>> {
    crate::kernel::opt_input(inputs, 2)
        .map(|b| match b.shape() == [m] {
            true => crate::cpu::nn::common::contiguous::<f32>(b),
            false => Err(KernelError::Shape(format!(
                "B has shape {:?}, expected [{m}]",
                b.shape()
            ))),
        })
        .transpose()
}

/// Fails unless the CPU runs the blocked kernels.
fn require_blocked(op: &str) -> Result<()> {
    match available() {
        true => Ok(()),
        false => Err(KernelError::UnsupportedOp {
            op_type: format!(
                "{op} (blocked kernels need AVX-512F or AVX2 with FMA, which this CPU lacks)"
            ),
            domain: DOMAIN.into(),
        }),
    }
}

#[cfg(test)]
mod tests;
