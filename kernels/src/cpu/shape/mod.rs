//! CPU kernels: shape family — ops that move, select, reshape, convert or
//! create elements without arithmetic on them (plus Resize, Range and Trilu).
//!
//! Outputs equal to an input (Identity, Reshape of a contiguous tensor, Squeeze,
//! Unsqueeze, Flatten, Dropout) share the input's storage.

pub mod cast;
mod cast_low_precision;
pub mod concat;
pub mod constant;
pub mod depth_space;
pub mod expand;
pub mod gather;
pub mod gather_elements;
pub mod identity;
pub mod pad;
pub mod range;
pub mod reorder;
pub mod reshape;
pub mod resize;
mod resize_axis;
#[cfg(test)]
mod resize_tests;
pub mod select;
pub mod shape_of;
pub mod slice;
pub mod split;
pub mod squeeze;
pub mod tile;
pub mod transpose;
pub mod trilu;
mod util;

use crate::error::{KernelError, Result};
use crate::kernel::{Kernel, NodeSpec};

/// Op types this family implements.
pub const OPS: &[&str] = &[
    "BitCast",
    "Cast",
    "CastLike",
    "CenterCropPad",
    "Compress",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "DepthToSpace",
    "Dropout",
    "Expand",
    "EyeLike",
    "Flatten",
    "Gather",
    "GatherElements",
    "Identity",
    "OneHot",
    "Pad",
    "Range",
    "Reshape",
    "Resize",
    "ReverseSequence",
    "Shape",
    "Size",
    "Slice",
    "SpaceToDepth",
    "Split",
    "Squeeze",
    "TensorScatter",
    "Tile",
    "Transpose",
    "Trilu",
    "Unique",
    "Unsqueeze",
    "Upsample",
];

/// Builds a kernel for an op in [`OPS`].
pub fn build(spec: &NodeSpec<'_>) -> Result<Box<dyn Kernel>> {
    match spec.op_type {
        "BitCast" => reorder::build_bitcast(spec),
        "CenterCropPad" => reorder::build_center_crop_pad(spec),
        "ReverseSequence" => reorder::build_reverse_sequence(spec),
        "TensorScatter" => reorder::build_tensor_scatter(spec),
        "Unique" => reorder::build_unique(spec),
        "Cast" | "CastLike" => cast::build(spec),
        "Compress" => select::build_compress(spec),
        "Concat" => concat::build(spec),
        "Constant" => constant::build_constant(spec),
        "ConstantOfShape" => constant::build_constant_of_shape(spec),
        "DepthToSpace" | "SpaceToDepth" => depth_space::build(spec),
        "Dropout" => identity::build_dropout(spec),
        "Expand" => expand::build(spec),
        "EyeLike" => select::build_eye_like(spec),
        "OneHot" => select::build_one_hot(spec),
        "Flatten" => reshape::build_flatten(spec),
        "Gather" => gather::build(spec),
        "GatherElements" => gather_elements::build(spec),
        "Identity" => identity::build_identity(spec),
        "Pad" => pad::build(spec),
        "Range" => range::build(spec),
        "Reshape" => reshape::build_reshape(spec),
        "Resize" => resize::build_resize(spec),
        "Upsample" => resize::build_upsample(spec),

        "Shape" | "Size" => shape_of::build(spec),
        "Slice" => slice::build(spec),
        "Split" => split::build(spec),
        "Squeeze" | "Unsqueeze" => squeeze::build(spec),
        "Tile" => tile::build(spec),
        "Transpose" => transpose::build(spec),
        "Trilu" => trilu::build(spec),
        _ => Err(KernelError::UnsupportedOp {
            op_type: spec.op_type.to_string(),
            domain: spec.domain.to_string(),
        }),
    }
}
