//! ONNX model loading: protobuf decoding (zero-copy from an mmap), tensors, sequences and
//! optionals, and the translation of names into the dense ids of [`crate::graph`].

mod attributes;
mod load;
pub mod proto;
mod tensor;
#[cfg(feature = "internals")]
mod value;

pub use load::{load_bytes, load_file};
#[cfg(feature = "internals")]
pub use tensor::decode_tensor;
#[cfg(feature = "internals")]
pub use value::{decode_optional, decode_sequence, decode_value_bytes};
