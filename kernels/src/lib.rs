//! Tensors, element types and operator kernels for Spillway.
//!
//! This crate knows nothing about graphs: a kernel is built from a [`NodeSpec`]
//! (op type, opset, attributes) and run on a slice of input [`Tensor`]s.

pub mod attrs;
pub mod buffer_pool;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod dtype;
pub mod error;
pub mod kernel;
pub mod knobs;
pub mod limits;
pub mod low_precision;
pub mod options;
pub mod output_buffer;
pub mod tensor;
#[cfg(test)]
mod test_values;
#[doc(hidden)]
pub mod testing;

pub use attrs::{AttrValue, Attributes};
pub use dtype::{DType, Element};
pub use error::KernelError;
pub use kernel::{Kernel, NodeSpec};
pub use options::KernelOptions;
pub use tensor::Tensor;
