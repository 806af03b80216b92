//! Spillway behind the [`ort`](https://docs.rs/ort) crate's API: [`api`] is an
//! `ort_sys::OrtApi` table (ONNX Runtime's C API, version 31) implemented on
//! [`spillway::Session`], so an unchanged `ort` program runs on Spillway after one call:
//!
//! ```no_run
//! ort::set_api(spillway_ort::api()); // before any other `ort` call
//! let env = ort::init().build()?;
//! let mut session = ort::session::Session::builder(&env)?.commit_from_file("model.onnx")?;
//! # Ok::<(), ort::Error>(())
//! ```
//!
//! What is implemented: environments, session options (intra- and inter-op threads, execution
//! mode, optimization level, configuration entries, the CUDA and CPU execution providers),
//! sessions from a file or bytes, `Run` (from many threads at once: Spillway's `run` takes
//! `&self`), I/O bindings, input and output names and types, model metadata, run options, tensors
//! of every element type Spillway has except the packed 4- and 2-bit ones (strings through
//! ONNX Runtime's string entries), sequences of tensors, memory infos and the host allocator.
//! [`IMPLEMENTED`] lists the entries. Every other entry returns an `OrtStatus` error with code
//! `ORT_NOT_IMPLEMENTED` that names it; no entry panics across `extern "C"` (each body runs
//! under `catch_unwind`, and a panic becomes an error status).
//!
//! What differs from ONNX Runtime:
//! - The CUDA execution provider puts a Spillway GPU among the session's devices without
//!   fallback: with no usable GPU (or a build without the `cuda` feature), session creation
//!   fails with the reason instead of running on the CPU.
//! - Values live in host memory; a memory info for device memory is refused where a value would
//!   be placed there.
//! - Maps, sparse tensors, custom operators, LoRA adapters, the model editor, training and
//!   profiling entries are not implemented. A run cannot be interrupted once started: the
//!   terminate flag of the run options is checked before it starts.
//!
//! # Handles and who owns them
//!
//! Every opaque `Ort*` pointer this crate hands out is a `Box` of one of its Rust types, turned
//! into a raw pointer. The rules are ONNX Runtime's:
//! - A handle returned through a `Create*` entry (or a `Get*` entry documented to return a new
//!   object: `GetTypeInfo`, `SessionGetInputTypeInfo`, `GetTensorTypeAndShape`, `GetValue`,
//!   `SessionGetModelMetadata`, …) is owned by the caller, who gives it back exactly once through
//!   the matching `Release*` entry. `Run` creates one value per empty output slot.
//! - A pointer returned by a `Cast*`, `*GetName`, `GetTensorMemoryInfo`,
//!   `GetTensorMutableData`, `GetSymbolicDimensions` or similar entry is borrowed from the
//!   handle it came from and valid while that handle lives and is not changed.
//! - Strings and arrays returned together with an `OrtAllocator` argument are allocated with
//!   that allocator; the caller frees them with it.
//! - The CPU memory info and the default allocator are shared statics: releasing them does
//!   nothing.
//! - A tensor made over the caller's buffer (`CreateTensorWithDataAsOrtValue`) borrows it: the
//!   buffer must outlive the value. A run copies such inputs into Spillway tensors; tensors this
//!   crate allocates are shared with the run without a copy, and writing into them afterwards
//!   copies first if a run's output still shares their memory.
//! - Handles may be used from several threads as ONNX Runtime allows: a session is shared by
//!   concurrent `Run` calls; other handles are not mutated concurrently.
//!
//! # Following `ort` releases
//!
//! The table is `ort-sys`'s `OrtApi` for the `ort` version the workspace pins (`=2.0.0-rc.15`,
//! API 31). On a new `ort` release: bump `ort-sys` here and `ort` in the dev-dependencies and in
//! `tests/Cargo.toml` together, regenerate the stand-ins with
//! `ort/scripts/gen_unimplemented.py > ort/src/unimplemented.rs` (the compiler then points at
//! any implemented entry whose signature changed), and run this crate's tests.

// The entries keep the C API's names.
#![allow(non_snake_case)]

mod api;
mod binding;
mod env;
mod handle;
mod memory;
mod metadata;
mod options;
mod run_options;
mod sequence;
mod session;
mod status;
mod strings;
mod types;
#[rustfmt::skip]
mod unimplemented;
mod value;

pub use api::IMPLEMENTED;

/// The `OrtApi` table to pass to `ort::set_api` before any other `ort` call.
pub fn api() -> ort_sys::OrtApi {
    api::table()
}
