//! `OrtModelMetadata`: a copy of [`spillway::ModelMetadata`]; every string it returns is
//! allocated with the caller's allocator.

use std::ffi::c_char;

use ort_sys::{OrtAllocator, OrtModelMetadata, OrtStatusPtr};
use spillway::ModelMetadata;

use crate::handle::{self, Handle};
use crate::memory::alloc_str;
use crate::status::{Result, Status, guard, guard_value};

impl Handle for ModelMetadata {
    type Sys = OrtModelMetadata;
    const WHAT: &'static str = "model metadata";
}

/// Writes `value` into `out` with ONNX Runtime's two-call protocol: `*size` is the capacity of
/// `out` (or `out` is null to ask for it) and becomes the length with the NUL.
///
/// # Safety
/// `size` is readable and writable; a non-null `out` holds `*size` writable bytes.
pub(crate) unsafe fn write_sized_string(value: &str, out: *mut c_char, size: *mut usize) -> Result {
    if size.is_null() {
        return Err(Status::invalid("the size pointer is null"));
    }
    let needed = value.len() + 1;
    // SAFETY: the caller's contract on `size`.
    let capacity = unsafe { *size };
    unsafe { handle::write(size, needed)? };
    if out.is_null() {
        return Ok(());
    }
    if capacity < needed {
        return Err(Status::invalid(format!(
            "a buffer of {capacity} bytes for a value of {needed}"
        )));
    }
    // SAFETY: `out` holds at least `needed` writable bytes (checked against the capacity).
    let out = unsafe { handle::slice_mut(out.cast::<u8>(), needed, "out")? };
    out[..value.len()].copy_from_slice(value.as_bytes());
    out[value.len()] = 0;
    Ok(())
}

/// Runs a string getter of entry `name`.
///
/// # Safety
/// `metadata` is live metadata of this crate, `allocator` valid, `out` writable.
unsafe fn get_string(
    name: &str,
    metadata: *const OrtModelMetadata,
    allocator: *mut OrtAllocator,
    out: *mut *mut c_char,
    field: impl FnOnce(&ModelMetadata) -> &str,
) -> OrtStatusPtr {
    guard(name, || {
        // SAFETY: the caller's contract.
        let metadata = unsafe { handle::get::<ModelMetadata>(metadata)? };
        unsafe { handle::write(out, alloc_str(allocator, field(metadata))?) }
    })
}

/// `ModelMetadataGetProducerName`.
pub(crate) unsafe extern "system" fn ModelMetadataGetProducerName(
    m: *const OrtModelMetadata,
    a: *mut OrtAllocator,
    out: *mut *mut c_char,
) -> OrtStatusPtr {
    // SAFETY: the API's contract, as `get_string` requires.
    unsafe {
        get_string("ModelMetadataGetProducerName", m, a, out, |m| {
            &m.producer_name
        })
    }
}

/// `ModelMetadataGetGraphName`.
pub(crate) unsafe extern "system" fn ModelMetadataGetGraphName(
    m: *const OrtModelMetadata,
    a: *mut OrtAllocator,
    out: *mut *mut c_char,
) -> OrtStatusPtr {
    // SAFETY: the API's contract, as `get_string` requires.
    unsafe { get_string("ModelMetadataGetGraphName", m, a, out, |m| &m.graph_name) }
}

/// `ModelMetadataGetDomain`.
pub(crate) unsafe extern "system" fn ModelMetadataGetDomain(
    m: *const OrtModelMetadata,
    a: *mut OrtAllocator,
    out: *mut *mut c_char,
) -> OrtStatusPtr {
    // SAFETY: the API's contract, as `get_string` requires.
    unsafe { get_string("ModelMetadataGetDomain", m, a, out, |m| &m.domain) }
}

/// `ModelMetadataGetDescription`.
pub(crate) unsafe extern "system" fn ModelMetadataGetDescription(
    m: *const OrtModelMetadata,
    a: *mut OrtAllocator,
    out: *mut *mut c_char,
) -> OrtStatusPtr {
    // SAFETY: the API's contract, as `get_string` requires.
    unsafe { get_string("ModelMetadataGetDescription", m, a, out, |m| &m.description) }
}

/// `ModelMetadataGetGraphDescription`.
pub(crate) unsafe extern "system" fn ModelMetadataGetGraphDescription(
    m: *const OrtModelMetadata,
    a: *mut OrtAllocator,
    out: *mut *mut c_char,
) -> OrtStatusPtr {
    // SAFETY: the API's contract, as `get_string` requires.
    unsafe {
        get_string("ModelMetadataGetGraphDescription", m, a, out, |m| {
            &m.graph_description
        })
    }
}

/// `ModelMetadataGetVersion`.
pub(crate) unsafe extern "system" fn ModelMetadataGetVersion(
    m: *const OrtModelMetadata,
    out: *mut i64,
) -> OrtStatusPtr {
    guard("ModelMetadataGetVersion", || {
        // SAFETY: live metadata and a writable `out` (the API's contract).
        unsafe { handle::write(out, handle::get::<ModelMetadata>(m)?.model_version) }
    })
}

/// `ModelMetadataLookupCustomMetadataMap`: null when the key is absent.
pub(crate) unsafe extern "system" fn ModelMetadataLookupCustomMetadataMap(
    m: *const OrtModelMetadata,
    a: *mut OrtAllocator,
    key: *const c_char,
    out: *mut *mut c_char,
) -> OrtStatusPtr {
    guard("ModelMetadataLookupCustomMetadataMap", || {
        // SAFETY: live metadata, a valid allocator, a NUL-terminated key, a writable `out`.
        let metadata = unsafe { handle::get::<ModelMetadata>(m)? };
        let key = unsafe { handle::str(key, "key")? };
        let value = match metadata.custom.get(key) {
            Some(v) => unsafe { alloc_str(a, v)? },
            None => std::ptr::null_mut(),
        };
        // SAFETY: the out-parameter is writable (the API's contract).
        unsafe { handle::write(out, value) }
    })
}

/// `ModelMetadataGetCustomMetadataMapKeys`: an array of strings, all (and the array) allocated
/// with the caller's allocator; null and 0 when there are none.
pub(crate) unsafe extern "system" fn ModelMetadataGetCustomMetadataMapKeys(
    m: *const OrtModelMetadata,
    a: *mut OrtAllocator,
    keys: *mut *mut *mut c_char,
    count: *mut i64,
) -> OrtStatusPtr {
    guard("ModelMetadataGetCustomMetadataMapKeys", || {
        // SAFETY: live metadata, a valid allocator, writable outs (the API's contract).
        let metadata = unsafe { handle::get::<ModelMetadata>(m)? };
        let n = metadata.custom.len();
        if n == 0 {
            return unsafe {
                handle::write(keys, std::ptr::null_mut())?;
                handle::write(count, 0)
            };
        }
        let array =
            // SAFETY: a valid allocator (the API's contract).
            unsafe { crate::memory::alloc_with(a, n * std::mem::size_of::<*mut c_char>())? }
                .cast::<*mut c_char>();
        for (i, key) in metadata.custom.keys().enumerate() {
            // SAFETY: `array` holds `n` pointer slots; `i < n`.
            unsafe { array.add(i).write(alloc_str(a, key)?) };
        }
        unsafe {
            handle::write(keys, array)?;
            handle::write(count, n as i64)
        }
    })
}

/// `ReleaseModelMetadata`.
pub(crate) unsafe extern "system" fn ReleaseModelMetadata(m: *mut OrtModelMetadata) {
    // SAFETY: null or metadata of this crate, released once.
    guard_value((), || unsafe { handle::release::<ModelMetadata>(m) })
}
