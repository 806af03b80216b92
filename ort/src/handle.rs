//! Handles: how a Rust object of this crate becomes the opaque `Ort*` pointer `ort` holds, and
//! the checked conversions back (null pointers and bad strings are errors, not crashes).

use std::ffi::{CStr, c_char};

use crate::status::{Result, Status};

/// A Rust type that stands behind one opaque `ort_sys` handle type. The handle is a
/// `Box<Self>` turned into a raw pointer and cast; see the crate documentation for who owns it.
pub(crate) trait Handle: Sized {
    /// The `ort_sys` type the pointer is declared as.
    type Sys;
    /// What the handle is called in error messages.
    const WHAT: &'static str;

    /// Moves `self` to the heap and returns the handle; the receiver owns it until its
    /// `Release*` entry.
    fn into_raw(self) -> *mut Self::Sys {
        Box::into_raw(Box::new(self)).cast()
    }
}

/// Borrows the object behind `ptr`.
///
/// # Safety
/// `ptr` is null or a handle of type `T` made by [`Handle::into_raw`] and not yet released, and
/// nothing mutates it for `'a`.
pub(crate) unsafe fn get<'a, T: Handle>(ptr: *const T::Sys) -> Result<&'a T> {
    // SAFETY: the caller's contract: null or a live `Box<T>`.
    unsafe { ptr.cast::<T>().as_ref() }
        .ok_or_else(|| Status::invalid(format!("the {} is null", T::WHAT)))
}

/// Borrows the object behind `ptr` mutably.
///
/// # Safety
/// As [`get`], and nothing else uses the object for `'a`.
pub(crate) unsafe fn get_mut<'a, T: Handle>(ptr: *mut T::Sys) -> Result<&'a mut T> {
    // SAFETY: the caller's contract: null or a live, unaliased `Box<T>`.
    unsafe { ptr.cast::<T>().as_mut() }
        .ok_or_else(|| Status::invalid(format!("the {} is null", T::WHAT)))
}

/// Drops the object behind `ptr` (nothing for null).
///
/// # Safety
/// `ptr` is null or a handle of type `T` made by [`Handle::into_raw`], released once.
pub(crate) unsafe fn release<T: Handle>(ptr: *mut T::Sys) {
    if !ptr.is_null() {
        // SAFETY: the caller's contract: a `Box<T>` released once.
        drop(unsafe { Box::from_raw(ptr.cast::<T>()) });
    }
}

/// Writes `value` to the out-parameter `out`.
///
/// # Safety
/// `out` is null or valid for a write of `T`.
pub(crate) unsafe fn write<T>(out: *mut T, value: T) -> Result {
    if out.is_null() {
        return Err(Status::invalid("the output pointer is null"));
    }
    // SAFETY: non-null and writable (the caller's contract); `write` does not read or drop the
    // old contents, which may be uninitialized.
    unsafe { out.write(value) };
    Ok(())
}

/// The UTF-8 string at `ptr`; `what` names it in errors.
///
/// # Safety
/// `ptr` is null or a NUL-terminated string that lives for `'a`.
pub(crate) unsafe fn str<'a>(ptr: *const c_char, what: &str) -> Result<&'a str> {
    if ptr.is_null() {
        return Err(Status::invalid(format!("{what} is null")));
    }
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|_| Status::invalid(format!("{what} is not UTF-8")))
}

/// The `len` elements at `ptr` (an empty slice for `len == 0`, whatever `ptr` is).
///
/// # Safety
/// When `len > 0`, `ptr` is null or points to `len` initialized elements that live for `'a`.
pub(crate) unsafe fn slice<'a, T>(ptr: *const T, len: usize, what: &str) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Status::invalid(format!("{what} is null")));
    }
    // SAFETY: non-null, `len` initialized elements (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The `len` elements at `ptr`, writable (empty for `len == 0`).
///
/// # Safety
/// When `len > 0`, `ptr` is null or points to `len` writable elements, unaliased for `'a`.
pub(crate) unsafe fn slice_mut<'a, T>(ptr: *mut T, len: usize, what: &str) -> Result<&'a mut [T]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(Status::invalid(format!("{what} is null")));
    }
    // SAFETY: non-null, `len` writable unaliased elements (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}
