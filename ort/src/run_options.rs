//! `OrtRunOptions`: a run's tag, log levels, configuration entries and terminate flag.

use std::collections::BTreeMap;
use std::ffi::{CString, c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};

use ort_sys::{OrtErrorCode, OrtRunOptions, OrtStatusPtr, os_char};

use crate::handle::{self, Handle};
use crate::status::{Result, Status, guard, guard_value};

/// What an `OrtRunOptions` handle points to.
#[derive(Debug, Default)]
pub(crate) struct RunOptions {
    tag: CString,
    verbosity: c_int,
    severity: c_int,
    terminate: AtomicBool,
    config: BTreeMap<String, CString>,
}

impl Handle for RunOptions {
    type Sys = OrtRunOptions;
    const WHAT: &'static str = "run options";
}

impl RunOptions {
    /// Fails when the terminate flag is set: a Spillway run cannot be stopped once started, so
    /// the flag is honoured before the run begins.
    pub(crate) fn check_terminate(&self) -> Result {
        if self.terminate.load(Ordering::Acquire) {
            return Err(Status::new(
                OrtErrorCode::ORT_FAIL,
                "Exiting due to terminate flag being set to true",
            ));
        }
        Ok(())
    }
}

/// Runs `f` on the options behind `options`.
///
/// # Safety
/// `options` is null or live run options nothing else mutates during the call.
unsafe fn with(
    name: &str,
    options: *mut OrtRunOptions,
    f: impl FnOnce(&mut RunOptions) -> Result,
) -> OrtStatusPtr {
    // SAFETY: the caller's contract.
    guard(name, || {
        f(unsafe { handle::get_mut::<RunOptions>(options)? })
    })
}

/// `CreateRunOptions`.
pub(crate) unsafe extern "system" fn CreateRunOptions(
    out: *mut *mut OrtRunOptions,
) -> OrtStatusPtr {
    // SAFETY: `out` is writable (the API's contract).
    guard("CreateRunOptions", || unsafe {
        handle::write(out, RunOptions::default().into_raw())
    })
}

/// `ReleaseRunOptions`.
pub(crate) unsafe extern "system" fn ReleaseRunOptions(options: *mut OrtRunOptions) {
    // SAFETY: null or run options of this crate, released once.
    guard_value((), || unsafe { handle::release::<RunOptions>(options) })
}

/// `RunOptionsSetRunLogVerbosityLevel`.
pub(crate) unsafe extern "system" fn RunOptionsSetRunLogVerbosityLevel(
    options: *mut OrtRunOptions,
    level: c_int,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `options`.
    unsafe {
        with("RunOptionsSetRunLogVerbosityLevel", options, |o| {
            o.verbosity = level;
            Ok(())
        })
    }
}

/// `RunOptionsSetRunLogSeverityLevel`.
pub(crate) unsafe extern "system" fn RunOptionsSetRunLogSeverityLevel(
    options: *mut OrtRunOptions,
    level: c_int,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `options`.
    unsafe {
        with("RunOptionsSetRunLogSeverityLevel", options, |o| {
            o.severity = level;
            Ok(())
        })
    }
}

/// `RunOptionsGetRunLogVerbosityLevel`.
pub(crate) unsafe extern "system" fn RunOptionsGetRunLogVerbosityLevel(
    options: *const OrtRunOptions,
    out: *mut c_int,
) -> OrtStatusPtr {
    guard("RunOptionsGetRunLogVerbosityLevel", || {
        // SAFETY: live run options and a writable `out` (the API's contract).
        unsafe { handle::write(out, handle::get::<RunOptions>(options)?.verbosity) }
    })
}

/// `RunOptionsGetRunLogSeverityLevel`.
pub(crate) unsafe extern "system" fn RunOptionsGetRunLogSeverityLevel(
    options: *const OrtRunOptions,
    out: *mut c_int,
) -> OrtStatusPtr {
    guard("RunOptionsGetRunLogSeverityLevel", || {
        // SAFETY: as above.
        unsafe { handle::write(out, handle::get::<RunOptions>(options)?.severity) }
    })
}

/// `RunOptionsSetRunTag`.
pub(crate) unsafe extern "system" fn RunOptionsSetRunTag(
    options: *mut OrtRunOptions,
    tag: *const c_char,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `options` and `tag`.
    unsafe {
        with("RunOptionsSetRunTag", options, |o| {
            o.tag = CString::new(handle::str(tag, "tag")?).unwrap_or_default();
            Ok(())
        })
    }
}

/// `RunOptionsGetRunTag`: borrowed from the options.
pub(crate) unsafe extern "system" fn RunOptionsGetRunTag(
    options: *const OrtRunOptions,
    out: *mut *const c_char,
) -> OrtStatusPtr {
    guard("RunOptionsGetRunTag", || {
        // SAFETY: as in `RunOptionsGetRunLogVerbosityLevel`.
        unsafe { handle::write(out, handle::get::<RunOptions>(options)?.tag.as_ptr()) }
    })
}

/// `RunOptionsSetTerminate`: runs started with these options afterwards fail at once.
pub(crate) unsafe extern "system" fn RunOptionsSetTerminate(
    options: *mut OrtRunOptions,
) -> OrtStatusPtr {
    guard("RunOptionsSetTerminate", || {
        // SAFETY: live run options; the flag is atomic, so a shared borrow is enough while a
        // run on another thread reads it.
        unsafe { handle::get::<RunOptions>(options)? }
            .terminate
            .store(true, Ordering::Release);
        Ok(())
    })
}

/// `RunOptionsUnsetTerminate`.
pub(crate) unsafe extern "system" fn RunOptionsUnsetTerminate(
    options: *mut OrtRunOptions,
) -> OrtStatusPtr {
    guard("RunOptionsUnsetTerminate", || {
        // SAFETY: as in `RunOptionsSetTerminate`.
        unsafe { handle::get::<RunOptions>(options)? }
            .terminate
            .store(false, Ordering::Release);
        Ok(())
    })
}

/// `AddRunConfigEntry`: kept (readable back); Spillway acts on none of ONNX Runtime's keys.
pub(crate) unsafe extern "system" fn AddRunConfigEntry(
    options: *mut OrtRunOptions,
    key: *const c_char,
    value: *const c_char,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on every argument.
    unsafe {
        with("AddRunConfigEntry", options, |o| {
            let (k, v) = (handle::str(key, "key")?, handle::str(value, "value")?);
            o.config
                .insert(k.to_string(), CString::new(v).unwrap_or_default());
            Ok(())
        })
    }
}

/// `GetRunConfigEntry`: borrowed from the options; null when absent.
pub(crate) unsafe extern "system" fn GetRunConfigEntry(
    options: *const OrtRunOptions,
    key: *const c_char,
) -> *const c_char {
    guard_value(std::ptr::null(), || {
        // SAFETY: live run options and a NUL-terminated key (the API's contract).
        let (Ok(options), Ok(key)) = (unsafe { handle::get::<RunOptions>(options) }, unsafe {
            handle::str(key, "key")
        }) else {
            return std::ptr::null();
        };
        options
            .config
            .get(key)
            .map_or(std::ptr::null(), |v| v.as_ptr())
    })
}

/// `RunOptionsEnableProfiling`: refused (Spillway's per-run trace is a Rust API).
pub(crate) unsafe extern "system" fn RunOptionsEnableProfiling(
    _options: *mut OrtRunOptions,
    _prefix: *const os_char,
) -> OrtStatusPtr {
    crate::status::not_implemented("RunOptionsEnableProfiling")
}

/// `RunOptionsDisableProfiling`: accepted (profiling is never on).
pub(crate) unsafe extern "system" fn RunOptionsDisableProfiling(
    _options: *mut OrtRunOptions,
) -> OrtStatusPtr {
    OrtStatusPtr::default()
}
