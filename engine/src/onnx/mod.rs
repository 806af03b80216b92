//! ONNX model loading.

pub mod proto;
