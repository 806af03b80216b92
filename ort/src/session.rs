//! `OrtSession`: creation from a file or bytes, `Run`, and what a session says about its inputs,
//! outputs and model.

use std::collections::HashMap;
use std::ffi::{c_char, c_void};

use ort_sys::{
    OrtAllocator, OrtEnv, OrtMemoryInfo, OrtModelMetadata, OrtPrepackedWeightsContainer,
    OrtRunOptions, OrtSession, OrtSessionOptions, OrtStatusPtr, OrtTypeInfo, OrtValue, os_char,
};
use spillway::{Value, ValueType};

use crate::handle::{self, Handle};
use crate::memory::{MemoryInfo, alloc_str};
use crate::options::SessionOptions;
use crate::run_options::RunOptions;
use crate::status::{Result, Status, guard, guard_value};
use crate::types::TypeInfo;
use crate::value::{self, ValueHandle};

/// A model input or output as `ort` sees it.
#[derive(Debug)]
struct Io {
    name: String,
    ty: ValueType,
}

/// What an `OrtSession` handle points to: the Spillway session and its inputs and outputs.
/// `Run` borrows it shared: Spillway's `run` takes `&self`, so one session runs on many threads.
#[derive(Debug)]
pub(crate) struct SessionHandle {
    session: spillway::Session,
    inputs: Vec<Io>,
    outputs: Vec<Io>,
    output_index: HashMap<String, usize>,
}

impl Handle for SessionHandle {
    type Sys = OrtSession;
    const WHAT: &'static str = "session";
}

impl SessionHandle {
    fn new(session: spillway::Session) -> Self {
        let io = |v: &spillway::ValueInfo| Io {
            name: v.name.clone(),
            ty: v.value_type(),
        };
        let inputs: Vec<Io> = session.inputs().into_iter().map(io).collect();
        let outputs: Vec<Io> = session.outputs().into_iter().map(io).collect();
        let output_index = outputs
            .iter()
            .enumerate()
            .map(|(i, o)| (o.name.clone(), i))
            .collect();
        SessionHandle {
            session,
            inputs,
            outputs,
            output_index,
        }
    }

    /// Runs with `inputs` by name and returns the outputs named by `outputs`, in that order.
    pub(crate) fn run(
        &self,
        inputs: Vec<(&str, &ValueHandle)>,
        outputs: &[&str],
    ) -> Result<Vec<Value>> {
        let feed = inputs
            .into_iter()
            .map(|(name, v)| {
                let mut value = v.to_value()?;
                let optional = self
                    .inputs
                    .iter()
                    .any(|i| i.name == name && matches!(i.ty, ValueType::Optional(_)));
                if optional && !matches!(value, Value::Optional(_)) {
                    value = Value::some(value);
                }
                Ok((name, value))
            })
            .collect::<Result<Vec<_>>>()?;
        let wanted = outputs
            .iter()
            .map(|name| {
                self.output_index.get(*name).copied().ok_or_else(|| {
                    Status::invalid(format!(
                        "unknown output '{name}' (the model's outputs are: {})",
                        self.outputs
                            .iter()
                            .map(|o| o.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut values: Vec<Option<Value>> = self
            .session
            .run_values(feed)?
            .into_values()
            .into_iter()
            .map(Some)
            .collect();
        let mut out = Vec::with_capacity(wanted.len());
        for (k, &i) in wanted.iter().enumerate() {
            let again = wanted[k + 1..].contains(&i);
            let value = if again {
                values[i].clone()
            } else {
                values[i].take()
            };
            out.push(value.ok_or_else(|| Status::fail("an output was asked for twice"))?);
        }
        Ok(out)
    }
}

/// The model path as a Rust path.
///
/// # Safety
/// `path` is a NUL-terminated `os_char` string.
unsafe fn model_path(path: *const os_char) -> Result<std::path::PathBuf> {
    if path.is_null() {
        return Err(Status::invalid("the model path is null"));
    }
    #[cfg(windows)]
    {
        use std::os::windows::ffi::OsStringExt;
        // SAFETY: NUL-terminated (the caller's contract): scan to the NUL, then read that much.
        let len = (0..).take_while(|&i| unsafe { *path.add(i) } != 0).count();
        let wide = unsafe { std::slice::from_raw_parts(path, len) };
        Ok(std::ffi::OsString::from_wide(wide).into())
    }
    #[cfg(not(windows))]
    {
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: NUL-terminated (the caller's contract).
        let bytes = unsafe { std::ffi::CStr::from_ptr(path) }.to_bytes();
        Ok(std::ffi::OsStr::from_bytes(bytes).into())
    }
}

/// The options behind `options` (the defaults for null).
///
/// # Safety
/// `options` is null or live session options.
unsafe fn options<'a>(
    options: *const OrtSessionOptions,
) -> Result<std::borrow::Cow<'a, SessionOptions>> {
    if options.is_null() {
        return Ok(std::borrow::Cow::Owned(SessionOptions::default()));
    }
    // SAFETY: the caller's contract.
    Ok(std::borrow::Cow::Borrowed(unsafe {
        handle::get::<SessionOptions>(options)?
    }))
}

/// Creates a session from a file.
///
/// # Safety
/// The `CreateSession` contract.
unsafe fn from_file(
    path: *const os_char,
    options: *const OrtSessionOptions,
    out: *mut *mut OrtSession,
) -> Result {
    // SAFETY: the caller's contract.
    let (path, options) = unsafe { (model_path(path)?, self::options(options)?) };
    let session = options.builder().commit_from_file(path)?;
    // SAFETY: the caller's contract.
    unsafe { handle::write(out, SessionHandle::new(session).into_raw()) }
}

/// Creates a session from bytes.
///
/// # Safety
/// The `CreateSessionFromArray` contract.
unsafe fn from_bytes(
    data: *const c_void,
    len: usize,
    options: *const OrtSessionOptions,
    out: *mut *mut OrtSession,
) -> Result {
    // SAFETY: the caller's contract.
    let (bytes, options) = unsafe {
        (
            handle::slice(data.cast::<u8>(), len, "model data")?,
            self::options(options)?,
        )
    };
    let session = options.builder().commit_from_memory(bytes)?;
    // SAFETY: the caller's contract.
    unsafe { handle::write(out, SessionHandle::new(session).into_raw()) }
}

/// `CreateSession`.
pub(crate) unsafe extern "system" fn CreateSession(
    _env: *const OrtEnv,
    path: *const os_char,
    options: *const OrtSessionOptions,
    out: *mut *mut OrtSession,
) -> OrtStatusPtr {
    // SAFETY: the API's contract, as `from_file` requires.
    guard("CreateSession", || unsafe { from_file(path, options, out) })
}

/// `CreateSessionFromArray`.
pub(crate) unsafe extern "system" fn CreateSessionFromArray(
    _env: *const OrtEnv,
    data: *const c_void,
    len: usize,
    options: *const OrtSessionOptions,
    out: *mut *mut OrtSession,
) -> OrtStatusPtr {
    // SAFETY: the API's contract, as `from_bytes` requires.
    guard("CreateSessionFromArray", || unsafe {
        from_bytes(data, len, options, out)
    })
}

/// `CreateSessionWithPrepackedWeightsContainer`: the container is not used (Spillway packs
/// weights per session).
pub(crate) unsafe extern "system" fn CreateSessionWithPrepackedWeightsContainer(
    _env: *const OrtEnv,
    path: *const os_char,
    options: *const OrtSessionOptions,
    _container: *mut OrtPrepackedWeightsContainer,
    out: *mut *mut OrtSession,
) -> OrtStatusPtr {
    // SAFETY: the API's contract, as `from_file` requires.
    guard("CreateSessionWithPrepackedWeightsContainer", || unsafe {
        from_file(path, options, out)
    })
}

/// `CreateSessionFromArrayWithPrepackedWeightsContainer`.
pub(crate) unsafe extern "system" fn CreateSessionFromArrayWithPrepackedWeightsContainer(
    _env: *const OrtEnv,
    data: *const c_void,
    len: usize,
    options: *const OrtSessionOptions,
    _container: *mut OrtPrepackedWeightsContainer,
    out: *mut *mut OrtSession,
) -> OrtStatusPtr {
    // SAFETY: the API's contract, as `from_bytes` requires.
    guard(
        "CreateSessionFromArrayWithPrepackedWeightsContainer",
        || unsafe { from_bytes(data, len, options, out) },
    )
}

/// `ReleaseSession`.
pub(crate) unsafe extern "system" fn ReleaseSession(session: *mut OrtSession) {
    // SAFETY: null or a session of this crate, released once (after every run returned).
    guard_value((), || unsafe { handle::release::<SessionHandle>(session) })
}

/// `Run`: takes the session shared, so runs on several threads proceed at once. An output slot
/// that already holds a value (a preallocated output) receives a copy of the result; an empty
/// slot receives a new value owned by the caller.
pub(crate) unsafe extern "system" fn Run(
    session: *mut OrtSession,
    run_options: *const OrtRunOptions,
    input_names: *const *const c_char,
    inputs: *const *const OrtValue,
    input_len: usize,
    output_names: *const *const c_char,
    output_len: usize,
    outputs: *mut *mut OrtValue,
) -> OrtStatusPtr {
    guard("Run", || {
        // SAFETY: the API's contract: a live session, null or live run options, `input_len`
        // names and values, `output_len` names and output slots.
        let session = unsafe { handle::get::<SessionHandle>(session)? };
        if !run_options.is_null() {
            unsafe { handle::get::<RunOptions>(run_options)? }.check_terminate()?;
        }
        let names = unsafe { handle::slice(input_names, input_len, "input names")? };
        // SAFETY: the array holds that many elements (the API's contract).
        let values = unsafe { handle::slice(inputs, input_len, "inputs")? };
        let feed = names
            .iter()
            .zip(values)
            // SAFETY: each is a live value of this crate (the API's contract).
            .map(|(&n, &v)| unsafe { Ok((handle::str(n, "an input name")?, value::value(v)?)) })
            .collect::<Result<Vec<_>>>()?;
        // SAFETY: the array holds that many elements (the API's contract).
        let out_names = unsafe { handle::slice(output_names, output_len, "output names")? }
            .iter()
            // SAFETY: NUL-terminated names (the API's contract).
            .map(|&n| unsafe { handle::str(n, "an output name") })
            .collect::<Result<Vec<_>>>()?;
        // SAFETY: the buffer holds that many writable elements (the API's contract).
        let slots = unsafe { handle::slice_mut(outputs, output_len, "outputs")? };
        let results = session.run(feed, &out_names)?;
        for (slot, result) in slots.iter_mut().zip(results) {
            if slot.is_null() {
                *slot = ValueHandle::from_value(result)?.into_raw();
            } else {
                // SAFETY: a non-null slot is a live value of the caller's (the API's contract).
                let target = unsafe { handle::get_mut::<ValueHandle>(*slot)? }.tensor_mut()?;
                let tensor = result.into_tensor().map_err(|v| {
                    Status::invalid(format!("output is {}, not a tensor", v.type_string()))
                })?;
                target.overwrite(tensor)?;
            }
        }
        Ok(())
    })
}

/// Borrows a session.
///
/// # Safety
/// `session` is null or a live session of this crate.
unsafe fn session<'a>(session: *const OrtSession) -> Result<&'a SessionHandle> {
    // SAFETY: the caller's contract.
    unsafe { handle::get::<SessionHandle>(session) }
}

/// `SessionGetInputCount`.
pub(crate) unsafe extern "system" fn SessionGetInputCount(
    s: *const OrtSession,
    out: *mut usize,
) -> OrtStatusPtr {
    // SAFETY: a live session and a writable `out` (the API's contract).
    guard("SessionGetInputCount", || unsafe {
        handle::write(out, session(s)?.inputs.len())
    })
}

/// `SessionGetOutputCount`.
pub(crate) unsafe extern "system" fn SessionGetOutputCount(
    s: *const OrtSession,
    out: *mut usize,
) -> OrtStatusPtr {
    // SAFETY: as in `SessionGetInputCount`.
    guard("SessionGetOutputCount", || unsafe {
        handle::write(out, session(s)?.outputs.len())
    })
}

/// `SessionGetOverridableInitializerCount`: 0 (Spillway folds initializers into the plan).
pub(crate) unsafe extern "system" fn SessionGetOverridableInitializerCount(
    s: *const OrtSession,
    out: *mut usize,
) -> OrtStatusPtr {
    // SAFETY: as in `SessionGetInputCount`.
    guard("SessionGetOverridableInitializerCount", || unsafe {
        session(s)?;
        handle::write(out, 0)
    })
}

fn io_at<'a>(list: &'a [Io], index: usize, what: &str) -> Result<&'a Io> {
    list.get(index)
        .ok_or_else(|| Status::invalid(format!("{what} {index} of {}", list.len())))
}

/// `SessionGetInputName`: allocated with `allocator`.
pub(crate) unsafe extern "system" fn SessionGetInputName(
    s: *const OrtSession,
    index: usize,
    allocator: *mut OrtAllocator,
    out: *mut *mut c_char,
) -> OrtStatusPtr {
    guard("SessionGetInputName", || {
        // SAFETY: a live session, a valid allocator, a writable `out` (the API's contract).
        let io = io_at(&unsafe { session(s)? }.inputs, index, "input")?;
        unsafe { handle::write(out, alloc_str(allocator, &io.name)?) }
    })
}

/// `SessionGetOutputName`: allocated with `allocator`.
pub(crate) unsafe extern "system" fn SessionGetOutputName(
    s: *const OrtSession,
    index: usize,
    allocator: *mut OrtAllocator,
    out: *mut *mut c_char,
) -> OrtStatusPtr {
    guard("SessionGetOutputName", || {
        // SAFETY: as in `SessionGetInputName`.
        let io = io_at(&unsafe { session(s)? }.outputs, index, "output")?;
        unsafe { handle::write(out, alloc_str(allocator, &io.name)?) }
    })
}

/// `SessionGetInputTypeInfo`: a new type info owned by the caller.
pub(crate) unsafe extern "system" fn SessionGetInputTypeInfo(
    s: *const OrtSession,
    index: usize,
    out: *mut *mut OrtTypeInfo,
) -> OrtStatusPtr {
    guard("SessionGetInputTypeInfo", || {
        // SAFETY: a live session and a writable `out` (the API's contract).
        let io = io_at(&unsafe { session(s)? }.inputs, index, "input")?;
        unsafe { handle::write(out, TypeInfo::from_value_type(&io.ty).into_raw()) }
    })
}

/// `SessionGetOutputTypeInfo`: a new type info owned by the caller.
pub(crate) unsafe extern "system" fn SessionGetOutputTypeInfo(
    s: *const OrtSession,
    index: usize,
    out: *mut *mut OrtTypeInfo,
) -> OrtStatusPtr {
    guard("SessionGetOutputTypeInfo", || {
        // SAFETY: as in `SessionGetInputTypeInfo`.
        let io = io_at(&unsafe { session(s)? }.outputs, index, "output")?;
        unsafe { handle::write(out, TypeInfo::from_value_type(&io.ty).into_raw()) }
    })
}

/// `SessionGetMemoryInfoForInputs` / `SessionGetMemoryInfoForOutputs`: host memory for every
/// one (a session on a GPU takes and returns host values); the infos are borrowed.
pub(crate) unsafe extern "system" fn SessionGetMemoryInfoForIo(
    s: *const OrtSession,
    out: *mut *const OrtMemoryInfo,
    len: usize,
) -> OrtStatusPtr {
    guard("SessionGetMemoryInfoForInputs", || {
        // SAFETY: a live session and `len` writable slots (the API's contract).
        unsafe { session(s)? };
        let slots = unsafe { handle::slice_mut(out, len, "memory infos")? };
        slots.fill(MemoryInfo::cpu_ptr());
        Ok(())
    })
}

/// `SessionGetModelMetadata`: a copy owned by the caller.
pub(crate) unsafe extern "system" fn SessionGetModelMetadata(
    s: *const OrtSession,
    out: *mut *mut OrtModelMetadata,
) -> OrtStatusPtr {
    guard("SessionGetModelMetadata", || {
        // SAFETY: as in `SessionGetInputTypeInfo`.
        let metadata = unsafe { session(s)? }.session.metadata().clone();
        unsafe { handle::write(out, metadata.into_raw()) }
    })
}

/// `SessionGetProfilingStartTimeNs`: 0 (profiling is never on).
pub(crate) unsafe extern "system" fn SessionGetProfilingStartTimeNs(
    s: *const OrtSession,
    out: *mut u64,
) -> OrtStatusPtr {
    // SAFETY: as in `SessionGetInputCount`.
    guard("SessionGetProfilingStartTimeNs", || unsafe {
        session(s)?;
        handle::write(out, 0)
    })
}
