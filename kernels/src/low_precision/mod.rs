//! The low-precision element types: float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0),
//! float4 E2M1 and the 4- and 2-bit integers (INT4, UINT4, INT2, UINT2).
//!
//! # Storage
//!
//! In memory every element takes one byte: a `Copy` newtype per format holding its code
//! ([`F8E4M3Fn`]`(u8)`, …, [`I4`]`(i8)` holding the value -8..=7). One byte per element
//! keeps these tensors ordinary `ndarray` arrays, so the data-movement kernels (Reshape,
//! Transpose, Concat, Gather, Slice, …) handle them like any other type, and indexing never
//! has to split a byte. ONNX stores the 4-bit types two per byte and the 2-bit types four
//! per byte; [`packing`] unpacks them when a tensor is loaded, and [`packing::pack`] is the
//! inverse for anything that writes tensors out (nothing in Spillway does yet).
//!
//! These types have no arithmetic kernels: ONNX defines them only for casts, quantization
//! and data movement, so arithmetic kernels reject them with
//! [`KernelError::UnsupportedDType`](crate::KernelError::UnsupportedDType). Equality of two
//! elements is equality of codes (so NaN equals the same NaN code, and -0 differs from +0).

mod e8m0;
mod minifloat;
pub mod packing;
mod small_int;
mod tensor_codes;
mod types;

pub use e8m0::E8M0Rounding;
pub use tensor_codes::{codes, from_codes, values};
pub use types::{
    F4E2M1, F8E4M3Fn, F8E4M3FnUz, F8E5M2, F8E5M2FnUz, F8E8M0, I2, I4, LowPrecision, U2, U4,
};
