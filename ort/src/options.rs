//! `OrtSessionOptions`: threads, optimization level, execution mode, configuration entries and
//! execution providers, turned into a Spillway [`spillway::SessionBuilder`] at session creation.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int};

use ort_sys::{
    ExecutionMode, GraphOptimizationLevel, OrtCUDAProviderOptions, OrtCUDAProviderOptionsV2,
    OrtErrorCode, OrtExecutionProviderDevicePolicy, OrtSessionOptions, OrtStatusPtr,
};
use spillway::{Devices, OptimizationLevel, SessionBuilder};

use crate::handle::{self, Handle};
use crate::status::{Result, Status, guard, guard_value};

/// What an `OrtSessionOptions` handle points to.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionOptions {
    intra_threads: Option<usize>,
    inter_threads: Option<usize>,
    parallel: bool,
    optimization: Option<GraphOptimizationLevel>,
    /// The CUDA device asked for through an execution provider, if any.
    cuda: Option<u32>,
    config: BTreeMap<String, String>,
}

impl Handle for SessionOptions {
    type Sys = OrtSessionOptions;
    const WHAT: &'static str = "session options";
}

impl SessionOptions {
    /// The Spillway builder these options describe. A CUDA provider becomes a GPU among the
    /// session's devices with fallback off, so a missing GPU fails session creation with the
    /// reason instead of running on the CPU.
    pub(crate) fn builder(&self) -> SessionBuilder {
        let mut builder = spillway::Session::builder().with_optimization(match self.optimization {
            Some(GraphOptimizationLevel::ORT_DISABLE_ALL) => OptimizationLevel::Disabled,
            Some(GraphOptimizationLevel::ORT_ENABLE_BASIC) => OptimizationLevel::Basic,
            _ => OptimizationLevel::All,
        });
        if let Some(n) = self.intra_threads {
            builder = builder.with_intra_op_threads(n);
        }
        // ONNX Runtime takes whatever thread counts it is given; so does this front-end.
        if self.intra_threads.is_some() || self.inter_threads.is_some() {
            builder = builder.allow_oversubscription(true);
        }
        let mut devices = Devices::cpu().allow_fallback(false);
        if self.parallel
            && let Some(lanes) = self.inter_threads.filter(|&n| n > 1)
        {
            devices = devices.with_cpu_lanes(lanes);
        }
        if let Some(ordinal) = self.cuda {
            devices = devices.with_cuda(ordinal, 1);
        }
        builder.with_devices(devices)
    }
}

/// Reads `len` key/value string pairs.
///
/// # Safety
/// `keys` and `values` hold `len` NUL-terminated strings each.
unsafe fn pairs(
    keys: *const *const c_char,
    values: *const *const c_char,
    len: usize,
) -> Result<Vec<(String, String)>> {
    // SAFETY: the caller's contract.
    let (keys, values) = unsafe {
        (
            handle::slice(keys, len, "keys")?,
            handle::slice(values, len, "values")?,
        )
    };
    keys.iter()
        .zip(values)
        .map(|(&k, &v)| {
            // SAFETY: each is a NUL-terminated string (the caller's contract).
            let (k, v) = unsafe { (handle::str(k, "a key")?, handle::str(v, "a value")?) };
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}

/// `CreateSessionOptions`.
pub(crate) unsafe extern "system" fn CreateSessionOptions(
    out: *mut *mut OrtSessionOptions,
) -> OrtStatusPtr {
    // SAFETY: `out` is writable (the API's contract).
    guard("CreateSessionOptions", || unsafe {
        handle::write(out, SessionOptions::default().into_raw())
    })
}

/// `CloneSessionOptions`.
pub(crate) unsafe extern "system" fn CloneSessionOptions(
    options: *const OrtSessionOptions,
    out: *mut *mut OrtSessionOptions,
) -> OrtStatusPtr {
    guard("CloneSessionOptions", || {
        // SAFETY: live session options and a writable `out` (the API's contract).
        let options = unsafe { handle::get::<SessionOptions>(options)? }.clone();
        unsafe { handle::write(out, options.into_raw()) }
    })
}

/// `ReleaseSessionOptions`.
pub(crate) unsafe extern "system" fn ReleaseSessionOptions(options: *mut OrtSessionOptions) {
    // SAFETY: null or session options of this crate, released once.
    guard_value((), || unsafe { handle::release::<SessionOptions>(options) })
}

/// Runs `f` on the options behind `options`.
///
/// # Safety
/// `options` is null or live session options nothing else uses during the call.
unsafe fn with(
    name: &str,
    options: *mut OrtSessionOptions,
    f: impl FnOnce(&mut SessionOptions) -> Result,
) -> OrtStatusPtr {
    // SAFETY: the caller's contract.
    guard(name, || {
        f(unsafe { handle::get_mut::<SessionOptions>(options)? })
    })
}

/// `SetIntraOpNumThreads`: Spillway's intra-op threads (0: the default).
pub(crate) unsafe extern "system" fn SetIntraOpNumThreads(
    options: *mut OrtSessionOptions,
    n: c_int,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `options`.
    unsafe {
        with("SetIntraOpNumThreads", options, |o| {
            o.intra_threads = usize::try_from(n).ok().filter(|&n| n > 0);
            Ok(())
        })
    }
}

/// `SetInterOpNumThreads`: CPU lanes, in parallel execution mode (0: the default).
pub(crate) unsafe extern "system" fn SetInterOpNumThreads(
    options: *mut OrtSessionOptions,
    n: c_int,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `options`.
    unsafe {
        with("SetInterOpNumThreads", options, |o| {
            o.inter_threads = usize::try_from(n).ok().filter(|&n| n > 0);
            Ok(())
        })
    }
}

/// `SetSessionExecutionMode`: parallel mode runs on as many CPU lanes as inter-op threads.
pub(crate) unsafe extern "system" fn SetSessionExecutionMode(
    options: *mut OrtSessionOptions,
    mode: ExecutionMode,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `options`.
    unsafe {
        with("SetSessionExecutionMode", options, |o| {
            o.parallel = matches!(mode, ExecutionMode::ORT_PARALLEL);
            Ok(())
        })
    }
}

/// `SetSessionGraphOptimizationLevel`: disabled → `Disabled`, basic → `Basic`, the others →
/// `All`.
pub(crate) unsafe extern "system" fn SetSessionGraphOptimizationLevel(
    options: *mut OrtSessionOptions,
    level: GraphOptimizationLevel,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `options`.
    unsafe {
        with("SetSessionGraphOptimizationLevel", options, |o| {
            o.optimization = Some(level);
            Ok(())
        })
    }
}

/// Entries that tune ONNX Runtime's memory and threads (`EnableMemPattern`,
/// `DisableCpuMemArena`, `DisablePerSessionThreads`, `DisableProfiling`, …): accepted, as
/// Spillway plans its memory and threads itself.
pub(crate) unsafe extern "system" fn AcceptOptions(
    _options: *mut OrtSessionOptions,
) -> OrtStatusPtr {
    OrtStatusPtr::default()
}

/// `SetSessionLogVerbosityLevel` / `SetSessionLogSeverityLevel`: accepted (Spillway logs
/// through `tracing`).
pub(crate) unsafe extern "system" fn AcceptLogLevel(
    _options: *mut OrtSessionOptions,
    _level: c_int,
) -> OrtStatusPtr {
    OrtStatusPtr::default()
}

/// `SetSessionLogId`: accepted.
pub(crate) unsafe extern "system" fn SetSessionLogId(
    _options: *mut OrtSessionOptions,
    _id: *const c_char,
) -> OrtStatusPtr {
    OrtStatusPtr::default()
}

/// `SetDeterministicCompute`: accepted (Spillway's CPU kernels are deterministic).
pub(crate) unsafe extern "system" fn SetDeterministicCompute(
    _options: *mut OrtSessionOptions,
    _value: bool,
) -> OrtStatusPtr {
    OrtStatusPtr::default()
}

/// `SessionOptionsSetEpSelectionPolicy`: accepted; only explicitly appended providers count.
pub(crate) unsafe extern "system" fn SessionOptionsSetEpSelectionPolicy(
    _options: *mut OrtSessionOptions,
    _policy: OrtExecutionProviderDevicePolicy,
) -> OrtStatusPtr {
    OrtStatusPtr::default()
}

/// `AddSessionConfigEntry`: kept (readable back); Spillway acts on none of ONNX Runtime's keys.
pub(crate) unsafe extern "system" fn AddSessionConfigEntry(
    options: *mut OrtSessionOptions,
    key: *const c_char,
    value: *const c_char,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on `options`, `key` and `value`.
    unsafe {
        with("AddSessionConfigEntry", options, |o| {
            let (k, v) = (handle::str(key, "key")?, handle::str(value, "value")?);
            o.config.insert(k.to_string(), v.to_string());
            Ok(())
        })
    }
}

/// `HasSessionConfigEntry`.
pub(crate) unsafe extern "system" fn HasSessionConfigEntry(
    options: *const OrtSessionOptions,
    key: *const c_char,
    out: *mut c_int,
) -> OrtStatusPtr {
    guard("HasSessionConfigEntry", || {
        // SAFETY: live options, a NUL-terminated key, a writable `out` (the API's contract).
        let options = unsafe { handle::get::<SessionOptions>(options)? };
        let key = unsafe { handle::str(key, "key")? };
        unsafe { handle::write(out, options.config.contains_key(key) as c_int) }
    })
}

/// `GetSessionConfigEntry`: ONNX Runtime's two-call protocol (size, then bytes).
pub(crate) unsafe extern "system" fn GetSessionConfigEntry(
    options: *const OrtSessionOptions,
    key: *const c_char,
    out: *mut c_char,
    size: *mut usize,
) -> OrtStatusPtr {
    guard("GetSessionConfigEntry", || {
        // SAFETY: as in `HasSessionConfigEntry`; `size` is readable and writable, `out` holds
        // `*size` bytes when non-null.
        let options = unsafe { handle::get::<SessionOptions>(options)? };
        let key = unsafe { handle::str(key, "key")? };
        let value = options.config.get(key).ok_or_else(|| {
            Status::new(
                OrtErrorCode::ORT_INVALID_ARGUMENT,
                format!("no config entry '{key}'"),
            )
        })?;
        // SAFETY: `size` and `out` are as `write_sized_string` requires (the API's contract).
        unsafe { crate::metadata::write_sized_string(value, out, size) }
    })
}

/// `AddFreeDimensionOverride` / `AddFreeDimensionOverrideByName`: refused (Spillway binds
/// symbolic dimensions from each run's inputs).
pub(crate) unsafe extern "system" fn AddFreeDimensionOverrideByName(
    _options: *mut OrtSessionOptions,
    _name: *const c_char,
    _value: i64,
) -> OrtStatusPtr {
    crate::status::not_implemented("AddFreeDimensionOverrideByName")
}

/// Adds an execution provider by name (`SessionOptionsAppendExecutionProvider`): CUDA (with its
/// `device_id`) and CPU; any other is an error naming it.
fn append_provider(o: &mut SessionOptions, name: &str, options: &[(String, String)]) -> Result {
    match name {
        "CUDAExecutionProvider" | "CUDA" => {
            o.cuda = Some(device_id(options)?);
            Ok(())
        }
        "CPUExecutionProvider" | "CPU" => Ok(()),
        other => Err(Status::new(
            OrtErrorCode::ORT_NOT_IMPLEMENTED,
            format!(
                "execution provider '{other}' is not available in Spillway \
                 (CUDAExecutionProvider and CPUExecutionProvider are)"
            ),
        )),
    }
}

/// The `device_id` of a provider's options (0 when absent).
fn device_id(options: &[(String, String)]) -> Result<u32> {
    match options.iter().rev().find(|(k, _)| k == "device_id") {
        None => Ok(0),
        Some((_, v)) => v
            .parse()
            .map_err(|_| Status::invalid(format!("device_id '{v}' is not a device ordinal"))),
    }
}

/// `SessionOptionsAppendExecutionProvider`.
pub(crate) unsafe extern "system" fn SessionOptionsAppendExecutionProvider(
    options: *mut OrtSessionOptions,
    name: *const c_char,
    keys: *const *const c_char,
    values: *const *const c_char,
    len: usize,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on every argument.
    unsafe {
        with("SessionOptionsAppendExecutionProvider", options, |o| {
            let name = handle::str(name, "provider name")?;
            append_provider(o, name, &pairs(keys, values, len)?)
        })
    }
}

/// What an `OrtCUDAProviderOptionsV2` handle points to: the key/value options given.
#[derive(Debug, Default)]
pub(crate) struct CudaOptions {
    entries: Vec<(String, String)>,
}

impl Handle for CudaOptions {
    type Sys = OrtCUDAProviderOptionsV2;
    const WHAT: &'static str = "CUDA provider options";
}

/// `CreateCUDAProviderOptions`.
pub(crate) unsafe extern "system" fn CreateCUDAProviderOptions(
    out: *mut *mut OrtCUDAProviderOptionsV2,
) -> OrtStatusPtr {
    // SAFETY: `out` is writable (the API's contract).
    guard("CreateCUDAProviderOptions", || unsafe {
        handle::write(out, CudaOptions::default().into_raw())
    })
}

/// `UpdateCUDAProviderOptions`: kept; Spillway reads `device_id`.
pub(crate) unsafe extern "system" fn UpdateCUDAProviderOptions(
    options: *mut OrtCUDAProviderOptionsV2,
    keys: *const *const c_char,
    values: *const *const c_char,
    len: usize,
) -> OrtStatusPtr {
    guard("UpdateCUDAProviderOptions", || {
        // SAFETY: live CUDA options of this crate and `len` key/value strings.
        let options = unsafe { handle::get_mut::<CudaOptions>(options)? };
        let new = unsafe { pairs(keys, values, len)? };
        device_id(&new)?;
        options.entries.extend(new);
        Ok(())
    })
}

/// `ReleaseCUDAProviderOptions`.
pub(crate) unsafe extern "system" fn ReleaseCUDAProviderOptions(
    options: *mut OrtCUDAProviderOptionsV2,
) {
    // SAFETY: null or CUDA options of this crate, released once.
    guard_value((), || unsafe { handle::release::<CudaOptions>(options) })
}

/// `SessionOptionsAppendExecutionProvider_CUDA_V2`: the session runs on that GPU, or its
/// creation fails saying why.
pub(crate) unsafe extern "system" fn SessionOptionsAppendExecutionProvider_CUDA_V2(
    options: *mut OrtSessionOptions,
    cuda: *const OrtCUDAProviderOptionsV2,
) -> OrtStatusPtr {
    // SAFETY: the API's contract on both handles.
    unsafe {
        with(
            "SessionOptionsAppendExecutionProvider_CUDA_V2",
            options,
            |o| {
                let cuda = handle::get::<CudaOptions>(cuda)?;
                append_provider(o, "CUDA", &cuda.entries)
            },
        )
    }
}

/// `SessionOptionsAppendExecutionProvider_CUDA` (the legacy struct): as the V2 entry.
pub(crate) unsafe extern "system" fn SessionOptionsAppendExecutionProvider_CUDA(
    options: *mut OrtSessionOptions,
    cuda: *const OrtCUDAProviderOptions,
) -> OrtStatusPtr {
    // SAFETY: the API's contract: live options and a readable legacy options struct.
    unsafe {
        with("SessionOptionsAppendExecutionProvider_CUDA", options, |o| {
            let cuda = cuda
                .as_ref()
                .ok_or_else(|| Status::invalid("the CUDA provider options are null"))?;
            let id = u32::try_from(cuda.device_id)
                .map_err(|_| Status::invalid("device_id is negative"))?;
            o.cuda = Some(id);
            Ok(())
        })
    }
}
