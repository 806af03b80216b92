//! `OrtStatus`: the error every entry returns, and the guard that turns a Rust error or a panic
//! into one, so that nothing unwinds across `extern "C"`.

use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use ort_sys::{OrtErrorCode, OrtStatus, OrtStatusPtr};

/// What an `OrtStatus` handle points to: a code and a message (`CreateStatus`, or a failed entry).
#[derive(Debug)]
pub(crate) struct Status {
    code: OrtErrorCode,
    message: CString,
}

impl Status {
    /// A status with `code` and `message` (interior NULs become spaces).
    pub(crate) fn new(code: OrtErrorCode, message: impl Into<String>) -> Self {
        let message = message.into().replace('\0', " ");
        Status {
            code,
            message: CString::new(message).unwrap_or_default(),
        }
    }

    /// `ORT_INVALID_ARGUMENT` with `message`.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Status::new(OrtErrorCode::ORT_INVALID_ARGUMENT, message)
    }

    /// `ORT_FAIL` with `message`.
    pub(crate) fn fail(message: impl Into<String>) -> Self {
        Status::new(OrtErrorCode::ORT_FAIL, message)
    }

    /// The handle `ort` receives; it owns the status until `ReleaseStatus`.
    pub(crate) fn into_raw(self) -> OrtStatusPtr {
        OrtStatusPtr(Box::into_raw(Box::new(self)).cast::<OrtStatus>())
    }

    /// The code.
    pub(crate) fn code(&self) -> OrtErrorCode {
        self.code
    }

    /// The message, NUL-terminated.
    pub(crate) fn message(&self) -> &CStr {
        &self.message
    }

    /// The same status with `prefix: ` before its message.
    fn prefixed(self, prefix: &str) -> Self {
        Status::new(
            self.code,
            format!("{prefix}: {}", self.message.to_string_lossy()),
        )
    }
}

impl From<spillway::Error> for Status {
    fn from(e: spillway::Error) -> Self {
        use spillway::Error as E;
        let code = match &e {
            E::Io { .. } => OrtErrorCode::ORT_NO_SUCHFILE,
            E::Decode(_) => OrtErrorCode::ORT_INVALID_PROTOBUF,
            E::InvalidModel(_) | E::InvalidNode { .. } => OrtErrorCode::ORT_INVALID_GRAPH,
            E::Unsupported { .. } => OrtErrorCode::ORT_NOT_IMPLEMENTED,
            E::MissingInput(_)
            | E::UnknownInput { .. }
            | E::InputDType { .. }
            | E::InputShape { .. }
            | E::InputKind { .. }
            | E::OutputKind { .. }
            | E::UnknownOutput { .. }
            | E::Config(_) => OrtErrorCode::ORT_INVALID_ARGUMENT,
            E::DeviceUnavailable { .. } | E::Gpu { .. } => OrtErrorCode::ORT_EP_FAIL,
            E::Kernel { .. } | E::ResourceLimit(_) => OrtErrorCode::ORT_RUNTIME_EXCEPTION,
            _ => OrtErrorCode::ORT_FAIL,
        };
        Status::new(code, e.to_string())
    }
}

/// What an entry's body returns.
pub(crate) type Result<T = ()> = std::result::Result<T, Status>;

/// Runs the body of entry `name`: `Ok` is a null status (success); an error, or a panic (a bug),
/// is a status whose message starts with `name`.
pub(crate) fn guard(name: &str, body: impl FnOnce() -> Result) -> OrtStatusPtr {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => OrtStatusPtr::default(),
        Ok(Err(status)) => status.prefixed(name).into_raw(),
        Err(payload) => Status::fail(format!(
            "{name} panicked: {} (a bug in spillway-ort: please report it)",
            panic_message(&*payload)
        ))
        .into_raw(),
    }
}

/// Runs the body of entry `name` that has no status to return (`Release*`, getters returning a
/// value): a panic is swallowed and `fallback` returned.
pub(crate) fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// The message a panic was raised with.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}

/// The status of an `OrtApi` entry Spillway does not implement: `ORT_NOT_IMPLEMENTED`, naming it.
pub(crate) fn not_implemented(name: &str) -> OrtStatusPtr {
    Status::new(
        OrtErrorCode::ORT_NOT_IMPLEMENTED,
        format!("{name} is not implemented by Spillway's ort backend (spillway-ort)"),
    )
    .into_raw()
}

/// `CreateStatus`: a status with the caller's code and message (copied).
pub(crate) unsafe extern "system" fn CreateStatus(
    code: OrtErrorCode,
    msg: *const c_char,
) -> OrtStatusPtr {
    guard_value(OrtStatusPtr::default(), || {
        let message = if msg.is_null() {
            String::new()
        } else {
            // SAFETY: the caller passes a NUL-terminated string (the API's contract), checked
            // non-null above.
            unsafe { CStr::from_ptr(msg) }
                .to_string_lossy()
                .into_owned()
        };
        Status::new(code, message).into_raw()
    })
}

/// `GetErrorCode`.
pub(crate) unsafe extern "system" fn GetErrorCode(status: *const OrtStatus) -> OrtErrorCode {
    // SAFETY: a non-null status is one this crate created with `Status::into_raw` and has not
    // been released (the API's contract).
    match unsafe { status.cast::<Status>().as_ref() } {
        Some(s) => s.code(),
        None => OrtErrorCode::ORT_OK,
    }
}

/// `GetErrorMessage`: valid until the status is released.
pub(crate) unsafe extern "system" fn GetErrorMessage(status: *const OrtStatus) -> *const c_char {
    // SAFETY: as in `GetErrorCode`.
    match unsafe { status.cast::<Status>().as_ref() } {
        Some(s) => s.message().as_ptr(),
        None => c"".as_ptr(),
    }
}

/// `ReleaseStatus`.
pub(crate) unsafe extern "system" fn ReleaseStatus(status: *mut OrtStatus) {
    if !status.is_null() {
        // SAFETY: a non-null status came from `Status::into_raw` (a `Box<Status>`) and is
        // released once (the API's contract).
        drop(unsafe { Box::from_raw(status.cast::<Status>()) });
    }
}
