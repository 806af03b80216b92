//! The error of the CUDA backend.

use super::probe::CudaUnavailable;

/// Why a CUDA operation failed. Every variant carries text, not library handles, so errors
/// can be cloned into per-node reports.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CudaError {
    /// The backend cannot run on this machine.
    #[error(transparent)]
    Unavailable(#[from] CudaUnavailable),
    /// NVRTC rejected a generated kernel (a bug in the generator: the log says where).
    #[error("NVRTC could not compile kernel {key}: {log}")]
    Compile {
        /// The kernel's key.
        key: String,
        /// NVRTC's log.
        log: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver: {what} failed: {reason}")]
    Driver {
        /// What was being done.
        what: &'static str,
        /// The driver's error name and text.
        reason: String,
    },
    /// A cuBLAS call failed.
    #[error("cuBLAS: {what} failed: {reason}")]
    Cublas {
        /// What was being done.
        what: &'static str,
        /// cuBLAS's status.
        reason: String,
    },
    /// A cuDNN call failed.
    #[error("cuDNN: {what} failed: {reason}")]
    Cudnn {
        /// What was being done.
        what: &'static str,
        /// cuDNN's status.
        reason: String,
    },
    /// The node itself is invalid (the same checks as the CPU kernels).
    #[error(transparent)]
    Kernel(#[from] crate::KernelError),
    /// The operator, type or attribute has no CUDA kernel (the planner keeps such ops on
    /// the CPU; asking for one on the GPU is this error, never a silent fallback).
    #[error("no CUDA kernel: {0}")]
    Unsupported(String),
}

/// Shorthand.
pub type CudaResult<T> = std::result::Result<T, CudaError>;

/// Maps a driver error into [`CudaError::Driver`] naming `what` was being done.
pub(crate) fn driver(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> CudaError {
    move |e| CudaError::Driver {
        what,
        reason: format!("{e:?}"),
    }
}
