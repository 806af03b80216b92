//! The native part of Spillway's Python package: `spillway._spillway`.
//!
//! The Python package `spillway` (`python/spillway/`) wraps these classes in onnxruntime's API
//! (`InferenceSession`, `SessionOptions`, `RunOptions`, `NodeArg`, the exception classes). What
//! is here is the part that must be native: creating a [`spillway::Session`], converting NumPy
//! arrays to and from engine tensors, and running with the GIL released.
//!
//! Only the public API of the `spillway` crate is used.

mod convert;
mod errors;
mod session;

use pyo3::prelude::*;

pub use session::NativeSession;

/// The module `spillway._spillway` (public so that the test suite can embed it in an
/// interpreter: `python/tests/pytest.rs`).
#[pymodule]
#[pyo3(name = "_spillway")]
pub fn spillway_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeSession>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("cuda_compiled", cfg!(feature = "cuda"))?;
    m.add_function(wrap_pyfunction!(placement_policies, m)?)?;
    Ok(())
}

/// The names of the placement policies `placement=` accepts.
#[pyfunction]
fn placement_policies() -> Vec<String> {
    spillway::Placement::ALL
        .iter()
        .map(|p| format!("{p:?}"))
        .collect()
}
