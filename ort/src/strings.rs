//! The entries that fill and read string tensors (`FillStringTensor`, `GetStringTensorContent`,
//! …): ONNX Runtime keeps no plain buffer for strings, so they go through these.

use std::ffi::{c_char, c_void};

use ort_sys::{OrtStatusPtr, OrtValue};

use crate::handle;
use crate::status::{Result, Status, guard};
use crate::value::{TensorValue, value_mut};

/// `FillStringTensor`: sets every string (`len` must be the element count).
pub(crate) unsafe extern "system" fn FillStringTensor(
    value: *mut OrtValue,
    strings: *const *const c_char,
    len: usize,
) -> OrtStatusPtr {
    guard("FillStringTensor", || {
        // SAFETY: a live string tensor, `len` NUL-terminated strings (the API's contract).
        let t = unsafe { value_mut(value)? }.tensor_mut()?;
        let strings = unsafe { handle::slice(strings, len, "strings")? };
        let array = t.strings_mut()?;
        if array.len() != len {
            return Err(Status::invalid(format!(
                "{len} strings for a tensor of {} elements",
                array.len()
            )));
        }
        for (slot, &s) in array.iter_mut().zip(strings) {
            // SAFETY: each is NUL-terminated (the API's contract).
            *slot = unsafe { handle::str(s, "a string")? }.to_string();
        }
        Ok(())
    })
}

/// `FillStringTensorElement`.
pub(crate) unsafe extern "system" fn FillStringTensorElement(
    value: *mut OrtValue,
    s: *const c_char,
    index: usize,
) -> OrtStatusPtr {
    guard("FillStringTensorElement", || {
        // SAFETY: as in `FillStringTensor`, one string.
        let t = unsafe { value_mut(value)? }.tensor_mut()?;
        let s = unsafe { handle::str(s, "the string")? }.to_string();
        let array = t.strings_mut()?;
        let len = array.len();
        let slot = array
            .iter_mut()
            .nth(index)
            .ok_or_else(|| Status::invalid(format!("index {index} of {len} strings")))?;
        *slot = s;
        Ok(())
    })
}

/// `GetStringTensorDataLength`: the bytes of every string together.
pub(crate) unsafe extern "system" fn GetStringTensorDataLength(
    value: *const OrtValue,
    out: *mut usize,
) -> OrtStatusPtr {
    guard("GetStringTensorDataLength", || {
        // SAFETY: as in `IsTensor`.
        let t = unsafe { crate::value::value(value)? }.tensor()?;
        let n = t.strings()?.iter().map(String::len).sum();
        unsafe { handle::write(out, n) }
    })
}

/// `GetStringTensorContent`: the strings' bytes back to back, and each one's start offset.
pub(crate) unsafe extern "system" fn GetStringTensorContent(
    value: *const OrtValue,
    s: *mut c_void,
    s_len: usize,
    offsets: *mut usize,
    offsets_len: usize,
) -> OrtStatusPtr {
    guard("GetStringTensorContent", || {
        // SAFETY: as in `IsTensor`; `s` holds `s_len` and `offsets` `offsets_len` writable
        // elements.
        let t = unsafe { crate::value::value(value)? }.tensor()?;
        let strings = t.strings()?;
        let total: usize = strings.iter().map(String::len).sum();
        if s_len < total || offsets_len < strings.len() {
            return Err(Status::invalid(format!(
                "buffers of {s_len} bytes and {offsets_len} offsets for {total} bytes in {} strings",
                strings.len()
            )));
        }
        // SAFETY: the buffer holds that many writable elements (the API's contract).
        let bytes = unsafe { handle::slice_mut(s.cast::<u8>(), total, "s")? };
        // SAFETY: the buffer holds that many writable elements (the API's contract).
        let offsets = unsafe { handle::slice_mut(offsets, strings.len(), "offsets")? };
        let mut at = 0;
        for (o, string) in offsets.iter_mut().zip(strings.iter()) {
            *o = at;
            bytes[at..at + string.len()].copy_from_slice(string.as_bytes());
            at += string.len();
        }
        Ok(())
    })
}

/// `GetStringTensorElementLength`.
pub(crate) unsafe extern "system" fn GetStringTensorElementLength(
    value: *const OrtValue,
    index: usize,
    out: *mut usize,
) -> OrtStatusPtr {
    guard("GetStringTensorElementLength", || {
        // SAFETY: as in `IsTensor`.
        let t = unsafe { crate::value::value(value)? }.tensor()?;
        let s = string_at(t, index)?;
        unsafe { handle::write(out, s.len()) }
    })
}

/// `GetStringTensorElement`: the bytes of one string (no NUL).
pub(crate) unsafe extern "system" fn GetStringTensorElement(
    value: *const OrtValue,
    s_len: usize,
    index: usize,
    s: *mut c_void,
) -> OrtStatusPtr {
    guard("GetStringTensorElement", || {
        // SAFETY: as in `IsTensor`; `s` holds `s_len` writable bytes.
        let t = unsafe { crate::value::value(value)? }.tensor()?;
        let string = string_at(t, index)?;
        if s_len < string.len() {
            return Err(Status::invalid(format!(
                "a buffer of {s_len} bytes for a string of {}",
                string.len()
            )));
        }
        // SAFETY: the buffer holds that many writable elements (the API's contract).
        let out = unsafe { handle::slice_mut(s.cast::<u8>(), string.len(), "s")? };
        out.copy_from_slice(string.as_bytes());
        Ok(())
    })
}

fn string_at(t: &TensorValue, index: usize) -> Result<&String> {
    let strings = t.strings()?;
    strings
        .iter()
        .nth(index)
        .ok_or_else(|| Status::invalid(format!("index {index} of {} strings", strings.len())))
}
