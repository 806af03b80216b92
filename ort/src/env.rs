//! `OrtEnv` and the process-level entries: threading options, telemetry, logging levels, the
//! build string and the list of execution providers.

use std::ffi::{CString, c_char, c_int, c_void};

use ort_sys::{
    OrtCustomCreateThreadFn, OrtCustomJoinThreadFn, OrtEnv, OrtLoggingFunction, OrtLoggingLevel,
    OrtStatusPtr, OrtThreadingOptions,
};

use crate::handle::{self, Handle};
use crate::status::{Status, guard, guard_value};

/// What an `OrtEnv` handle points to. Spillway has no process-wide state to keep: sessions are
/// independent; the name is kept for messages.
#[derive(Debug)]
pub(crate) struct Env {
    _name: String,
}

impl Handle for Env {
    type Sys = OrtEnv;
    const WHAT: &'static str = "environment";
}

/// Makes an environment handle named by `logid`.
///
/// # Safety
/// `logid` is null or NUL-terminated; `out` is writable.
unsafe fn create(logid: *const c_char, out: *mut *mut OrtEnv) -> crate::status::Result {
    let name = if logid.is_null() {
        String::new()
    } else {
        // SAFETY: the caller's contract.
        unsafe { handle::str(logid, "logid")? }.to_string()
    };
    // SAFETY: the caller's contract.
    unsafe { handle::write(out, Env { _name: name }.into_raw()) }
}

/// `CreateEnv`.
pub(crate) unsafe extern "system" fn CreateEnv(
    _level: OrtLoggingLevel,
    logid: *const c_char,
    out: *mut *mut OrtEnv,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `logid` and `out`.
    guard("CreateEnv", || unsafe { create(logid, out) })
}

/// `CreateEnvWithCustomLogger`: Spillway reports through `tracing`, not through the logger.
pub(crate) unsafe extern "system" fn CreateEnvWithCustomLogger(
    _logger: OrtLoggingFunction,
    _param: *mut c_void,
    _level: OrtLoggingLevel,
    logid: *const c_char,
    out: *mut *mut OrtEnv,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `logid` and `out`.
    guard("CreateEnvWithCustomLogger", || unsafe {
        create(logid, out)
    })
}

/// `CreateEnvWithGlobalThreadPools`: each Spillway session sizes its own threads.
pub(crate) unsafe extern "system" fn CreateEnvWithGlobalThreadPools(
    _level: OrtLoggingLevel,
    logid: *const c_char,
    _options: *const OrtThreadingOptions,
    out: *mut *mut OrtEnv,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `logid` and `out`.
    guard("CreateEnvWithGlobalThreadPools", || unsafe {
        create(logid, out)
    })
}

/// `CreateEnvWithCustomLoggerAndGlobalThreadPools`.
pub(crate) unsafe extern "system" fn CreateEnvWithCustomLoggerAndGlobalThreadPools(
    _logger: OrtLoggingFunction,
    _param: *mut c_void,
    _level: OrtLoggingLevel,
    logid: *const c_char,
    _options: *const OrtThreadingOptions,
    out: *mut *mut OrtEnv,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `logid` and `out`.
    guard("CreateEnvWithCustomLoggerAndGlobalThreadPools", || unsafe {
        create(logid, out)
    })
}

/// `ReleaseEnv`.
pub(crate) unsafe extern "system" fn ReleaseEnv(env: *mut OrtEnv) {
    // SAFETY: null or an environment of this crate, released once.
    guard_value((), || unsafe { handle::release::<Env>(env) })
}

/// `EnableTelemetryEvents` / `DisableTelemetryEvents`: Spillway sends no telemetry; accepted.
pub(crate) unsafe extern "system" fn TelemetryEvents(_env: *const OrtEnv) -> OrtStatusPtr {
    OrtStatusPtr::default()
}

/// `UpdateEnvWithCustomLogLevel`: accepted (Spillway logs through `tracing`).
pub(crate) unsafe extern "system" fn UpdateEnvWithCustomLogLevel(
    _env: *mut OrtEnv,
    _level: OrtLoggingLevel,
) -> OrtStatusPtr {
    OrtStatusPtr::default()
}

/// What an `OrtThreadingOptions` handle points to: accepted and ignored (every Spillway
/// session has its own thread budget).
#[derive(Debug, Default)]
pub(crate) struct ThreadingOptions;

impl Handle for ThreadingOptions {
    type Sys = OrtThreadingOptions;
    const WHAT: &'static str = "threading options";
}

/// `CreateThreadingOptions`.
pub(crate) unsafe extern "system" fn CreateThreadingOptions(
    out: *mut *mut OrtThreadingOptions,
) -> OrtStatusPtr {
    // SAFETY: `out` is writable (the API's contract).
    guard("CreateThreadingOptions", || unsafe {
        handle::write(out, ThreadingOptions.into_raw())
    })
}

/// `ReleaseThreadingOptions`.
pub(crate) unsafe extern "system" fn ReleaseThreadingOptions(options: *mut OrtThreadingOptions) {
    // SAFETY: null or threading options of this crate, released once.
    guard_value((), || unsafe {
        handle::release::<ThreadingOptions>(options)
    })
}

/// `SetGlobalIntraOpNumThreads` / `SetGlobalInterOpNumThreads` / `SetGlobalSpinControl`:
/// accepted; a session's own thread settings apply.
pub(crate) unsafe extern "system" fn SetGlobalNumber(
    _options: *mut OrtThreadingOptions,
    _value: c_int,
) -> OrtStatusPtr {
    OrtStatusPtr::default()
}

/// `SetGlobalDenormalAsZero`: accepted.
pub(crate) unsafe extern "system" fn SetGlobalDenormalAsZero(
    _options: *mut OrtThreadingOptions,
) -> OrtStatusPtr {
    OrtStatusPtr::default()
}

/// `SetGlobalIntraOpThreadAffinity`: refused (Spillway pins threads per session).
pub(crate) unsafe extern "system" fn SetGlobalIntraOpThreadAffinity(
    _options: *mut OrtThreadingOptions,
    _affinity: *const c_char,
) -> OrtStatusPtr {
    crate::status::not_implemented("SetGlobalIntraOpThreadAffinity")
}

/// `SetGlobalCustomCreateThreadFn`: refused (Spillway makes its own threads).
pub(crate) unsafe extern "system" fn SetGlobalCustomCreateThreadFn(
    _options: *mut OrtThreadingOptions,
    _f: OrtCustomCreateThreadFn,
) -> OrtStatusPtr {
    crate::status::not_implemented("SetGlobalCustomCreateThreadFn")
}

/// `SetGlobalCustomJoinThreadFn`: refused.
pub(crate) unsafe extern "system" fn SetGlobalCustomJoinThreadFn(
    _options: *mut OrtThreadingOptions,
    _f: OrtCustomJoinThreadFn,
) -> OrtStatusPtr {
    crate::status::not_implemented("SetGlobalCustomJoinThreadFn")
}

/// `GetBuildInfoString`.
pub(crate) unsafe extern "system" fn GetBuildInfoString() -> *const c_char {
    concat!("Spillway ", env!("CARGO_PKG_VERSION"), " (spillway-ort)\0")
        .as_ptr()
        .cast()
}

/// The execution providers `GetAvailableProviders` lists. CUDA is listed whatever the machine
/// has: asking for it makes session creation fail with the reason when no GPU can run it
/// (never a silent CPU fallback).
const PROVIDERS: [&str; 2] = ["CUDAExecutionProvider", "CPUExecutionProvider"];

/// `GetAvailableProviders`: an array of strings, freed by `ReleaseAvailableProviders`.
pub(crate) unsafe extern "system" fn GetAvailableProviders(
    out: *mut *mut *mut c_char,
    count: *mut c_int,
) -> OrtStatusPtr {
    guard("GetAvailableProviders", || {
        let names: Box<[*mut c_char]> = PROVIDERS
            .iter()
            .map(|p| CString::new(*p).unwrap_or_default().into_raw())
            .collect();
        let len = names.len() as c_int;
        let ptr = Box::into_raw(names).cast::<*mut c_char>();
        // SAFETY: both outs are writable (the API's contract).
        unsafe {
            handle::write(count, len)?;
            handle::write(out, ptr)
        }
    })
}

/// `ReleaseAvailableProviders`.
pub(crate) unsafe extern "system" fn ReleaseAvailableProviders(
    ptr: *mut *mut c_char,
    count: c_int,
) -> OrtStatusPtr {
    guard("ReleaseAvailableProviders", || {
        if ptr.is_null() {
            return Ok(());
        }
        if count as usize != PROVIDERS.len() {
            return Err(Status::invalid(
                "the count is not the one GetAvailableProviders gave",
            ));
        }
        // SAFETY: `ptr` is the boxed slice `GetAvailableProviders` made, of `count` strings
        // from `CString::into_raw`, released once.
        unsafe {
            let names = Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, count as usize));
            for &name in names.iter() {
                drop(CString::from_raw(name));
            }
        }
        Ok(())
    })
}
