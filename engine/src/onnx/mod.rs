//! ONNX model loading: protobuf decoding (zero-copy from an mmap), tensors, and the
//! translation of names into the dense ids of [`crate::graph`].

mod attributes;
mod load;
pub mod proto;
mod tensor;

pub use load::{load_bytes, load_file};
pub use tensor::decode_tensor;
