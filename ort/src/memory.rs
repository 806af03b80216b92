//! `OrtMemoryInfo` and `OrtAllocator`. Every value this crate makes lives in host memory:
//! the CPU memory info is the one tensors report, and the default allocator is the host's.

use std::alloc::Layout;
use std::borrow::Cow;
use std::ffi::{CStr, CString, c_char, c_int, c_void};

use ort_sys::{
    OrtAllocator, OrtAllocatorType, OrtDeviceMemoryType, OrtMemType, OrtMemoryInfo,
    OrtMemoryInfoDeviceType, OrtSession, OrtStatusPtr,
};

use crate::handle::{self, Handle};
use crate::status::{Result, Status, guard, guard_value};

/// What an `OrtMemoryInfo` handle points to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemoryInfo {
    name: Cow<'static, CStr>,
    id: c_int,
    allocator_type: OrtAllocatorType,
    mem_type: OrtMemType,
}

impl Handle for MemoryInfo {
    type Sys = OrtMemoryInfo;
    const WHAT: &'static str = "memory info";
}

/// The memory every tensor of this crate lives in (never released: `ort` borrows it).
pub(crate) static CPU: MemoryInfo = MemoryInfo {
    name: Cow::Borrowed(c"Cpu"),
    id: 0,
    allocator_type: OrtAllocatorType::OrtDeviceAllocator,
    mem_type: OrtMemType::OrtMemTypeDefault,
};

impl MemoryInfo {
    /// A borrowed handle to the CPU memory info.
    pub(crate) fn cpu_ptr() -> *const OrtMemoryInfo {
        (&CPU as *const MemoryInfo).cast()
    }

    /// Whether memory described by `self` is host memory this crate can read and write.
    pub(crate) fn is_host(&self) -> bool {
        matches!(self.name.to_bytes(), b"Cpu" | b"CudaPinned")
            || self.mem_type != OrtMemType::OrtMemTypeDefault
    }

    /// The device name, for messages.
    pub(crate) fn name(&self) -> String {
        self.name.to_string_lossy().into_owned()
    }

    fn device_type(&self) -> OrtMemoryInfoDeviceType {
        match self.name.to_bytes() {
            b"Cpu" => OrtMemoryInfoDeviceType::OrtMemoryInfoDeviceType_CPU,
            _ => OrtMemoryInfoDeviceType::OrtMemoryInfoDeviceType_GPU,
        }
    }
}

/// Checks that `info` (null for "the CPU") describes host memory.
///
/// # Safety
/// `info` is null or a live memory info of this crate.
pub(crate) unsafe fn check_host(info: *const OrtMemoryInfo) -> Result {
    if info.is_null() {
        return Ok(());
    }
    // SAFETY: the caller's contract.
    let info = unsafe { handle::get::<MemoryInfo>(info)? };
    if info.is_host() {
        Ok(())
    } else {
        Err(Status::new(
            ort_sys::OrtErrorCode::ORT_NOT_IMPLEMENTED,
            format!(
                "memory on device '{}': Spillway's ort backend keeps values in host memory \
                 (a session on a GPU takes and returns host tensors)",
                info.name()
            ),
        ))
    }
}

/// `CreateMemoryInfo`: any device name; only host memory can hold values.
pub(crate) unsafe extern "system" fn CreateMemoryInfo(
    name: *const c_char,
    allocator_type: OrtAllocatorType,
    id: c_int,
    mem_type: OrtMemType,
    out: *mut *mut OrtMemoryInfo,
) -> OrtStatusPtr {
    guard("CreateMemoryInfo", || {
        // SAFETY: `name` is a NUL-terminated string, `out` writable (the API's contract).
        let name = unsafe { handle::str(name, "name")? };
        let info = MemoryInfo {
            name: Cow::Owned(CString::new(name).unwrap_or_default()),
            id,
            allocator_type,
            mem_type,
        };
        // SAFETY: the out-parameter is writable (the API's contract).
        unsafe { handle::write(out, info.into_raw()) }
    })
}

/// `CreateCpuMemoryInfo`.
pub(crate) unsafe extern "system" fn CreateCpuMemoryInfo(
    allocator_type: OrtAllocatorType,
    mem_type: OrtMemType,
    out: *mut *mut OrtMemoryInfo,
) -> OrtStatusPtr {
    guard("CreateCpuMemoryInfo", || {
        let info = MemoryInfo {
            allocator_type,
            mem_type,
            ..CPU.clone()
        };
        // SAFETY: `out` is writable (the API's contract).
        unsafe { handle::write(out, info.into_raw()) }
    })
}

/// `CompareMemoryInfo`: 0 when equal, -1 otherwise.
pub(crate) unsafe extern "system" fn CompareMemoryInfo(
    a: *const OrtMemoryInfo,
    b: *const OrtMemoryInfo,
    out: *mut c_int,
) -> OrtStatusPtr {
    guard("CompareMemoryInfo", || {
        // SAFETY: both are live memory infos, `out` writable (the API's contract).
        let (a, b) = unsafe { (handle::get::<MemoryInfo>(a)?, handle::get::<MemoryInfo>(b)?) };
        unsafe { handle::write(out, if a == b { 0 } else { -1 }) }
    })
}

/// `MemoryInfoGetName`: borrowed from the info.
pub(crate) unsafe extern "system" fn MemoryInfoGetName(
    info: *const OrtMemoryInfo,
    out: *mut *const c_char,
) -> OrtStatusPtr {
    guard("MemoryInfoGetName", || {
        // SAFETY: a live memory info, `out` writable (the API's contract).
        unsafe { handle::write(out, handle::get::<MemoryInfo>(info)?.name.as_ptr()) }
    })
}

/// `MemoryInfoGetId`.
pub(crate) unsafe extern "system" fn MemoryInfoGetId(
    info: *const OrtMemoryInfo,
    out: *mut c_int,
) -> OrtStatusPtr {
    guard("MemoryInfoGetId", || {
        // SAFETY: as in `MemoryInfoGetName`.
        unsafe { handle::write(out, handle::get::<MemoryInfo>(info)?.id) }
    })
}

/// `MemoryInfoGetMemType`.
pub(crate) unsafe extern "system" fn MemoryInfoGetMemType(
    info: *const OrtMemoryInfo,
    out: *mut OrtMemType,
) -> OrtStatusPtr {
    guard("MemoryInfoGetMemType", || {
        // SAFETY: as in `MemoryInfoGetName`.
        unsafe { handle::write(out, handle::get::<MemoryInfo>(info)?.mem_type) }
    })
}

/// `MemoryInfoGetType`.
pub(crate) unsafe extern "system" fn MemoryInfoGetType(
    info: *const OrtMemoryInfo,
    out: *mut OrtAllocatorType,
) -> OrtStatusPtr {
    guard("MemoryInfoGetType", || {
        // SAFETY: as in `MemoryInfoGetName`.
        unsafe { handle::write(out, handle::get::<MemoryInfo>(info)?.allocator_type) }
    })
}

/// `MemoryInfoGetDeviceType` (no status: a bad handle leaves `out` alone).
pub(crate) unsafe extern "system" fn MemoryInfoGetDeviceType(
    info: *const OrtMemoryInfo,
    out: *mut OrtMemoryInfoDeviceType,
) {
    guard_value((), || {
        // SAFETY: as in `MemoryInfoGetName`.
        if let Ok(info) = unsafe { handle::get::<MemoryInfo>(info) } {
            let _ = unsafe { handle::write(out, info.device_type()) };
        }
    })
}

/// `MemoryInfoGetDeviceMemType`: host-accessible for pinned memory, default otherwise.
pub(crate) unsafe extern "system" fn MemoryInfoGetDeviceMemType(
    info: *const OrtMemoryInfo,
) -> OrtDeviceMemoryType {
    guard_value(OrtDeviceMemoryType::OrtDeviceMemoryType_DEFAULT, || {
        // SAFETY: as in `MemoryInfoGetName`.
        match unsafe { handle::get::<MemoryInfo>(info) } {
            Ok(i)
                if i.device_type() != OrtMemoryInfoDeviceType::OrtMemoryInfoDeviceType_CPU
                    && i.is_host() =>
            {
                OrtDeviceMemoryType::OrtDeviceMemoryType_HOST_ACCESSIBLE
            }
            _ => OrtDeviceMemoryType::OrtDeviceMemoryType_DEFAULT,
        }
    })
}

/// `MemoryInfoGetVendorId`: 0 (no vendor).
pub(crate) unsafe extern "system" fn MemoryInfoGetVendorId(_info: *const OrtMemoryInfo) -> u32 {
    0
}

/// `ReleaseMemoryInfo` (the shared CPU info is never freed).
pub(crate) unsafe extern "system" fn ReleaseMemoryInfo(info: *mut OrtMemoryInfo) {
    if info.cast_const() == MemoryInfo::cpu_ptr() {
        return;
    }
    // SAFETY: `info` is null or an owned memory info of this crate, released once.
    guard_value((), || unsafe { handle::release::<MemoryInfo>(info) })
}

/// What an `OrtAllocator` handle of this crate points to: the C function table first (so the
/// handle is also a valid `OrtAllocator*`), then its memory info.
#[repr(C)]
pub(crate) struct Allocator {
    table: OrtAllocator,
    info: MemoryInfo,
}

/// The default (host) allocator, shared by every caller and never released.
static DEFAULT: Allocator = Allocator {
    table: OrtAllocator {
        version: ort_sys::ORT_API_VERSION,
        Alloc: Some(host_alloc),
        Free: Some(host_free),
        Info: Some(host_info),
        Reserve: Some(host_reserve),
        GetStats: None,
        AllocOnStream: None,
        Shrink: None,
    },
    info: MemoryInfo {
        name: Cow::Borrowed(c"Cpu"),
        id: 0,
        allocator_type: OrtAllocatorType::OrtDeviceAllocator,
        mem_type: OrtMemType::OrtMemTypeDefault,
    },
};

impl Allocator {
    fn default_ptr() -> *mut OrtAllocator {
        (&DEFAULT as *const Allocator).cast_mut().cast()
    }
}

/// Alignment (and header size) of host allocations: enough for any element type and SIMD.
const ALIGN: usize = 64;

/// Allocates `size` bytes of host memory, 64-byte aligned; the size sits in a header before it.
fn host_alloc_bytes(size: usize) -> *mut c_void {
    let Some(layout) = size
        .checked_add(ALIGN)
        .and_then(|n| Layout::from_size_align(n, ALIGN).ok())
    else {
        return std::ptr::null_mut();
    };
    // SAFETY: the layout has a non-zero size (at least ALIGN bytes).
    let base = unsafe { std::alloc::alloc(layout) };
    if base.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `base` has ALIGN >= size_of::<usize>() bytes of header, aligned for usize; the
    // block handed out starts ALIGN bytes in, inside the allocation.
    unsafe {
        base.cast::<usize>().write(size);
        base.add(ALIGN).cast()
    }
}

/// Frees a block from [`host_alloc_bytes`] (nothing for null).
///
/// # Safety
/// `p` is null or a block from [`host_alloc_bytes`] not yet freed.
unsafe fn host_free_bytes(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: the caller's contract: the header ALIGN bytes before `p` holds the size the
    // block was allocated with, so the layout matches the allocation's.
    unsafe {
        let base = p.cast::<u8>().sub(ALIGN);
        let size = base.cast::<usize>().read();
        std::alloc::dealloc(base, Layout::from_size_align_unchecked(size + ALIGN, ALIGN));
    }
}

unsafe extern "system" fn host_alloc(_this: *mut OrtAllocator, size: usize) -> *mut c_void {
    guard_value(std::ptr::null_mut(), || host_alloc_bytes(size))
}

unsafe extern "system" fn host_reserve(_this: *const OrtAllocator, size: usize) -> *mut c_void {
    guard_value(std::ptr::null_mut(), || host_alloc_bytes(size))
}

unsafe extern "system" fn host_free(_this: *mut OrtAllocator, p: *mut c_void) {
    // SAFETY: `p` came from this allocator's `Alloc` (the allocator contract).
    guard_value((), || unsafe { host_free_bytes(p) })
}

unsafe extern "system" fn host_info(this: *const OrtAllocator) -> *const OrtMemoryInfo {
    // SAFETY: `this` is one of this crate's allocators: its table is the first field of an
    // `Allocator`, whose memory info follows.
    guard_value(MemoryInfo::cpu_ptr(), || {
        match unsafe { this.cast::<Allocator>().as_ref() } {
            Some(a) => (&a.info as *const MemoryInfo).cast(),
            None => MemoryInfo::cpu_ptr(),
        }
    })
}

/// Allocates `size` bytes with any allocator (this crate's or the caller's own).
///
/// # Safety
/// `allocator` is null or a valid `OrtAllocator`.
pub(crate) unsafe fn alloc_with(allocator: *mut OrtAllocator, size: usize) -> Result<*mut c_void> {
    // SAFETY: the caller's contract.
    let table =
        unsafe { allocator.as_ref() }.ok_or_else(|| Status::invalid("the allocator is null"))?;
    let alloc = table
        .Alloc
        .ok_or_else(|| Status::invalid("the allocator has no Alloc function"))?;
    // SAFETY: calling the allocator's own function on itself, as the allocator contract says.
    let p = unsafe { alloc(allocator, size) };
    if p.is_null() {
        return Err(Status::fail(format!("allocating {size} bytes failed")));
    }
    Ok(p)
}

/// Copies `s` into a NUL-terminated string allocated with `allocator` (the caller frees it
/// with that allocator).
///
/// # Safety
/// As [`alloc_with`].
pub(crate) unsafe fn alloc_str(allocator: *mut OrtAllocator, s: &str) -> Result<*mut c_char> {
    let bytes = s.as_bytes();
    // SAFETY: the caller's contract.
    let p = unsafe { alloc_with(allocator, bytes.len() + 1)? }.cast::<u8>();
    // SAFETY: `p` holds `len + 1` writable bytes that nothing else uses yet.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
        p.add(bytes.len()).write(0);
    }
    Ok(p.cast())
}

/// `AllocatorAlloc`.
pub(crate) unsafe extern "system" fn AllocatorAlloc(
    allocator: *mut OrtAllocator,
    size: usize,
    out: *mut *mut c_void,
) -> OrtStatusPtr {
    guard("AllocatorAlloc", || {
        // SAFETY: a valid allocator and a writable `out` (the API's contract).
        unsafe { handle::write(out, alloc_with(allocator, size)?) }
    })
}

/// `AllocatorFree`.
pub(crate) unsafe extern "system" fn AllocatorFree(
    allocator: *mut OrtAllocator,
    p: *mut c_void,
) -> OrtStatusPtr {
    guard("AllocatorFree", || {
        // SAFETY: a valid allocator (the API's contract).
        let table = unsafe { allocator.as_ref() }
            .ok_or_else(|| Status::invalid("the allocator is null"))?;
        let free = table
            .Free
            .ok_or_else(|| Status::invalid("the allocator has no Free function"))?;
        // SAFETY: `p` came from this allocator (the API's contract).
        unsafe { free(allocator, p) };
        Ok(())
    })
}

/// `AllocatorGetInfo`: borrowed from the allocator.
pub(crate) unsafe extern "system" fn AllocatorGetInfo(
    allocator: *const OrtAllocator,
    out: *mut *const OrtMemoryInfo,
) -> OrtStatusPtr {
    guard("AllocatorGetInfo", || {
        // SAFETY: a valid allocator (the API's contract).
        let table = unsafe { allocator.as_ref() }
            .ok_or_else(|| Status::invalid("the allocator is null"))?;
        let info = table
            .Info
            .ok_or_else(|| Status::invalid("the allocator has no Info function"))?;
        // SAFETY: calling the allocator's own function; `out` is writable.
        unsafe { handle::write(out, info(allocator)) }
    })
}

/// `GetAllocatorWithDefaultOptions`: the shared host allocator (never released).
pub(crate) unsafe extern "system" fn GetAllocatorWithDefaultOptions(
    out: *mut *mut OrtAllocator,
) -> OrtStatusPtr {
    guard("GetAllocatorWithDefaultOptions", || {
        // SAFETY: `out` is writable (the API's contract).
        unsafe { handle::write(out, Allocator::default_ptr()) }
    })
}

/// `CreateAllocator`: a host allocator for host memory infos; an error for device memory.
pub(crate) unsafe extern "system" fn CreateAllocator(
    _session: *const OrtSession,
    info: *const OrtMemoryInfo,
    out: *mut *mut OrtAllocator,
) -> OrtStatusPtr {
    guard("CreateAllocator", || {
        // SAFETY: a live memory info and a writable `out` (the API's contract).
        unsafe { check_host(info)? };
        let info = unsafe { handle::get::<MemoryInfo>(info)? }.clone();
        let allocator = Box::new(Allocator {
            table: DEFAULT.table,
            info,
        });
        // SAFETY: the out-parameter is writable (the API's contract).
        unsafe { handle::write(out, Box::into_raw(allocator).cast()) }
    })
}

/// `ReleaseAllocator` (the default allocator is never freed).
pub(crate) unsafe extern "system" fn ReleaseAllocator(allocator: *mut OrtAllocator) {
    if allocator.is_null() || allocator == Allocator::default_ptr() {
        return;
    }
    guard_value((), || {
        // SAFETY: an allocator from `CreateAllocator` (a `Box<Allocator>`), released once.
        drop(unsafe { Box::from_raw(allocator.cast::<Allocator>()) })
    })
}
