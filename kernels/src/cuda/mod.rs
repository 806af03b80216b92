//! The CUDA backend (feature `cuda`): cuDNN for convolution and pooling, cuBLAS for matrix
//! products, and NVRTC-compiled kernels for the rest, all through cudarc with every library
//! loaded at run time.
//!
//! Nothing here panics when CUDA is missing: [`probe::probe`] checks the driver, each library
//! and the GPUs first and says what is missing as a [`probe::CudaUnavailable`].

pub mod codegen;
pub mod compile;
pub mod error;
pub mod gpu;
pub mod host;
pub mod libraries;
pub mod memory;
pub mod ops;
pub mod probe;

/// The cudarc this backend is built on (for timing events and raw calls in tools).
pub use cudarc;
pub use error::{CudaError, CudaResult};
pub use gpu::{Gpu, GpuOptions};
pub use memory::{DeviceArena, DeviceRegion};
pub use probe::{CudaSystem, CudaUnavailable, GpuInfo, probe};
