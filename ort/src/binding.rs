//! `OrtIoBinding`: inputs and outputs bound by name ahead of a run. Bound values are read when
//! the run starts (so writing into a bound input between runs is seen); outputs go into a bound
//! value, or into new host values read back with `GetBoundOutputValues`.

use std::ffi::c_char;

use ort_sys::{
    OrtAllocator, OrtIoBinding, OrtMemoryInfo, OrtRunOptions, OrtSession, OrtStatusPtr, OrtValue,
};

use crate::handle::{self, Handle};
use crate::memory::{self, alloc_with};
use crate::run_options::RunOptions;
use crate::session::SessionHandle;
use crate::status::{Result, Status, guard, guard_value};
use crate::value::{self, ValueHandle};

/// Where a bound output goes.
#[derive(Debug)]
enum Target {
    /// Into the caller's value (it outlives the binding: `ort` keeps it alive).
    Value(*mut OrtValue),
    /// Into a new host value, kept here after a run.
    Host(Option<ValueHandle>),
}

/// What an `OrtIoBinding` handle points to.
#[derive(Debug, Default)]
pub(crate) struct Binding {
    inputs: Vec<(String, *const OrtValue)>,
    outputs: Vec<(String, Target)>,
}

impl Handle for Binding {
    type Sys = OrtIoBinding;
    const WHAT: &'static str = "I/O binding";
}

fn bind_output(binding: &mut Binding, name: String, target: Target) {
    match binding.outputs.iter_mut().find(|(n, _)| *n == name) {
        Some(slot) => slot.1 = target,
        None => binding.outputs.push((name, target)),
    }
}

/// `CreateIoBinding`.
pub(crate) unsafe extern "system" fn CreateIoBinding(
    session: *mut OrtSession,
    out: *mut *mut OrtIoBinding,
) -> OrtStatusPtr {
    guard("CreateIoBinding", || {
        // SAFETY: a live session and a writable `out` (the API's contract).
        unsafe {
            handle::get::<SessionHandle>(session)?;
            handle::write(out, Binding::default().into_raw())
        }
    })
}

/// `ReleaseIoBinding`.
pub(crate) unsafe extern "system" fn ReleaseIoBinding(binding: *mut OrtIoBinding) {
    // SAFETY: null or a binding of this crate, released once.
    guard_value((), || unsafe { handle::release::<Binding>(binding) })
}

/// `BindInput`: the value must stay alive while bound (`ort` keeps it).
pub(crate) unsafe extern "system" fn BindInput(
    binding: *mut OrtIoBinding,
    name: *const c_char,
    value: *const OrtValue,
) -> OrtStatusPtr {
    guard("BindInput", || {
        // SAFETY: a live binding, a NUL-terminated name, a live value (the API's contract).
        let binding = unsafe { handle::get_mut::<Binding>(binding)? };
        let name = unsafe { handle::str(name, "name")? }.to_string();
        unsafe { value::value(value)? };
        match binding.inputs.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => binding.inputs.push((name, value)),
        }
        Ok(())
    })
}

/// `BindOutput`: the run writes into `value` (which must have the output's type and shape).
pub(crate) unsafe extern "system" fn BindOutput(
    binding: *mut OrtIoBinding,
    name: *const c_char,
    value: *const OrtValue,
) -> OrtStatusPtr {
    guard("BindOutput", || {
        // SAFETY: as in `BindInput`.
        let binding = unsafe { handle::get_mut::<Binding>(binding)? };
        let name = unsafe { handle::str(name, "name")? }.to_string();
        unsafe { value::value(value)? }.tensor()?;
        bind_output(binding, name, Target::Value(value.cast_mut()));
        Ok(())
    })
}

/// `BindOutputToDevice`: a new value per run, in host memory (device memory is refused).
pub(crate) unsafe extern "system" fn BindOutputToDevice(
    binding: *mut OrtIoBinding,
    name: *const c_char,
    info: *const OrtMemoryInfo,
) -> OrtStatusPtr {
    guard("BindOutputToDevice", || {
        // SAFETY: as in `BindInput`; `info` is a live memory info.
        let binding = unsafe { handle::get_mut::<Binding>(binding)? };
        let name = unsafe { handle::str(name, "name")? }.to_string();
        unsafe { memory::check_host(info)? };
        bind_output(binding, name, Target::Host(None));
        Ok(())
    })
}

/// `ClearBoundInputs`.
pub(crate) unsafe extern "system" fn ClearBoundInputs(binding: *mut OrtIoBinding) {
    guard_value((), || {
        // SAFETY: a live binding (the API's contract).
        if let Ok(b) = unsafe { handle::get_mut::<Binding>(binding) } {
            b.inputs.clear();
        }
    })
}

/// `ClearBoundOutputs`.
pub(crate) unsafe extern "system" fn ClearBoundOutputs(binding: *mut OrtIoBinding) {
    guard_value((), || {
        // SAFETY: a live binding (the API's contract).
        if let Ok(b) = unsafe { handle::get_mut::<Binding>(binding) } {
            b.outputs.clear();
        }
    })
}

/// `SynchronizeBoundInputs` / `SynchronizeBoundOutputs`: nothing to wait for (host memory).
pub(crate) unsafe extern "system" fn SynchronizeBound(_binding: *mut OrtIoBinding) -> OrtStatusPtr {
    OrtStatusPtr::default()
}

/// `RunWithBinding`.
pub(crate) unsafe extern "system" fn RunWithBinding(
    session: *mut OrtSession,
    run_options: *const OrtRunOptions,
    binding: *const OrtIoBinding,
) -> OrtStatusPtr {
    guard("RunWithBinding", || {
        // SAFETY: a live session, null or live run options, a live binding whose bound values
        // are alive (the API's contract). The binding is mutated to keep the outputs: `ort`
        // does not use it elsewhere during the run.
        let session = unsafe { handle::get::<SessionHandle>(session)? };
        if !run_options.is_null() {
            unsafe { handle::get::<RunOptions>(run_options)? }.check_terminate()?;
        }
        // SAFETY: a live binding, not used elsewhere during the run (the API's contract).
        let binding = unsafe { handle::get_mut::<Binding>(binding.cast_mut())? };
        let feed = binding
            .inputs
            .iter()
            // SAFETY: each is a live value of this crate (the API's contract).
            .map(|(n, v)| Ok((n.as_str(), unsafe { value::value(*v)? })))
            .collect::<Result<Vec<_>>>()?;
        let names: Vec<&str> = binding.outputs.iter().map(|(n, _)| n.as_str()).collect();
        let results = session.run(feed, &names)?;
        for ((_, target), result) in binding.outputs.iter_mut().zip(results) {
            match target {
                Target::Value(v) => {
                    let tensor = result.into_tensor().map_err(|v| {
                        Status::invalid(format!("output is {}, not a tensor", v.type_string()))
                    })?;
                    // SAFETY: the bound value is alive and not otherwise used during the run.
                    unsafe { handle::get_mut::<ValueHandle>(*v)? }
                        .tensor_mut()?
                        .overwrite(tensor)?;
                }
                Target::Host(slot) => *slot = Some(ValueHandle::from_value(result)?),
            }
        }
        Ok(())
    })
}

/// A new handle on the same elements as `v` (owned data is shared until written).
fn share(v: &ValueHandle) -> Result<ValueHandle> {
    ValueHandle::from_value(v.to_value()?)
}

/// `GetBoundOutputValues`: one new value per bound output, in binding order, in an array
/// allocated with `allocator` (the caller frees it and releases each value).
pub(crate) unsafe extern "system" fn GetBoundOutputValues(
    binding: *const OrtIoBinding,
    allocator: *mut OrtAllocator,
    out: *mut *mut *mut OrtValue,
    count: *mut usize,
) -> OrtStatusPtr {
    guard("GetBoundOutputValues", || {
        // SAFETY: a live binding, a valid allocator, writable outs (the API's contract).
        let binding = unsafe { handle::get::<Binding>(binding)? };
        let values = binding
            .outputs
            .iter()
            .map(|(name, target)| match target {
                // SAFETY: the bound value is alive (the API's contract).
                Target::Value(v) => unsafe { value::value(*v) }.and_then(share),
                Target::Host(Some(v)) => share(v),
                Target::Host(None) => Err(Status::invalid(format!(
                    "output '{name}' has no value yet: run the binding first"
                ))),
            })
            .collect::<Result<Vec<_>>>()?;
        let n = values.len();
        let array =
            // SAFETY: a valid allocator (the API's contract).
            unsafe { alloc_with(allocator, n.max(1) * std::mem::size_of::<*mut OrtValue>())? }
                .cast::<*mut OrtValue>();
        for (i, v) in values.into_iter().enumerate() {
            // SAFETY: `array` holds `n` slots; `i < n`.
            unsafe { array.add(i).write(v.into_raw()) };
        }
        unsafe {
            handle::write(count, n)?;
            handle::write(out, array)
        }
    })
}

/// `GetBoundOutputNames`: the names back to back (no NULs) and their lengths, both allocated
/// with `allocator`.
pub(crate) unsafe extern "system" fn GetBoundOutputNames(
    binding: *const OrtIoBinding,
    allocator: *mut OrtAllocator,
    buffer: *mut *mut c_char,
    lengths: *mut *mut usize,
    count: *mut usize,
) -> OrtStatusPtr {
    guard("GetBoundOutputNames", || {
        // SAFETY: as in `GetBoundOutputValues`.
        let binding = unsafe { handle::get::<Binding>(binding)? };
        let total: usize = binding.outputs.iter().map(|(n, _)| n.len()).sum();
        let n = binding.outputs.len();
        let bytes = unsafe { alloc_with(allocator, total.max(1))? }.cast::<u8>();
        let lens = unsafe { alloc_with(allocator, n.max(1) * std::mem::size_of::<usize>())? }
            .cast::<usize>();
        let mut at = 0;
        for (i, (name, _)) in binding.outputs.iter().enumerate() {
            // SAFETY: `bytes` holds `total` bytes and `lens` `n` slots; the writes stay inside.
            unsafe {
                std::ptr::copy_nonoverlapping(name.as_ptr(), bytes.add(at), name.len());
                lens.add(i).write(name.len());
            }
            at += name.len();
        }
        // SAFETY: the out-parameters are writable (the API's contract).
        unsafe {
            handle::write(buffer, bytes.cast())?;
            handle::write(lengths, lens)?;
            handle::write(count, n)
        }
    })
}
