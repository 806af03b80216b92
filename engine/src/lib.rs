//! Spillway: an ONNX inference engine that runs one inference across the CPU and GPUs.
//!
//! ```no_run
//! use spillway::{Session, inputs};
//! use ndarray::Array4;
//!
//! let session = Session::builder().commit_from_file("model.onnx")?;
//! let image = Array4::<f32>::zeros((1, 3, 224, 224));
//! let outputs = session.run(inputs!["data" => image])?;
//! let scores = outputs[0].view::<f32>()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod device;
pub mod error;
mod io;
mod metadata;
pub mod profile;
mod session;
pub mod value;

// The engine's internals: private, or public under the `internals` feature for the project's
// own tests, benches and fuzzers (hidden from the documentation and outside the API's stability
// promise). What a user needs of them is re-exported below.
macro_rules! internal_modules {
    ($($(#[$attr:meta])* $name:ident;)*) => {$(
        $(#[$attr])*
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $name;
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}
internal_modules! {
    exec;
    #[cfg(feature = "cuda")]
    gpu;
    graph;
    // The CPU side of CPU + GPU runs.
    #[cfg(any(feature = "cuda", feature = "internals"))]
    hybrid;
    memory;
    onnx;
    plan;
}

pub use device::{CopyCost, Device, Devices};
pub use error::{Error, Result};
pub use exec::kernel_pool::ThreadOptions;
pub use exec::{QueueKind, RunLimits, RunOptions, RunStats, TraceEvent, chrome_trace_json};
pub use graph::{Dim, ValueInfo, ValueType};
pub use io::{IntoTensor, SessionOutputs, tensor_from_npy};
pub use metadata::ModelMetadata;
pub use session::{
    ActivationLayout, OptimizationLevel, PlacementReport, RunReport, Session, SessionBuilder,
};
/// Every environment variable Spillway reads (deployment paths and diagnostics), in one place.
pub use spillway_kernels::knobs;
pub use spillway_kernels::options as kernel_options;
pub use spillway_kernels::{DType, KernelOptions, Tensor};
pub use value::{Sequence, Value};

/// Every op type the engine runs in the default (`ai.onnx`) domain, sorted: the CPU kernels,
/// control flow (`If`, `Loop`) and the sequence and optional operators.
pub fn supported_ops() -> Vec<&'static str> {
    let mut ops = spillway_kernels::cpu::supported_ops();
    ops.extend(["If", "Loop"]);
    ops.extend(exec::value_ops::VALUE_OPS.iter().copied());
    ops.sort_unstable();
    ops.dedup();
    ops
}

/// The operators the engine runs outside the default domain, as `(domain, op type)`, sorted:
/// ONNX Runtime's `com.microsoft` contrib ops that transformer models use, which the engine
/// lowers into standard operators at load.
pub fn supported_contrib_ops() -> Vec<(&'static str, &'static str)> {
    graph::contrib::LOWERED_OPS
        .iter()
        .map(|&op| (graph::contrib::DOMAIN, op))
        .collect()
}
pub use spillway_placement::Policy as Placement;

/// The README's Rust example, compiled and run as a doctest.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctest;
