//! Rust types generated from the vendored `onnx.proto` and `onnx-data.proto` (prost).
#![allow(missing_docs, clippy::all, clippy::pedantic)]

include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
