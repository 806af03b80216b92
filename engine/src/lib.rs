//! Spillway: an ONNX inference engine that runs one inference across the CPU and GPUs.

pub mod onnx;
