//! Device memory: one allocation per arena, carved into regions at the offsets the engine's
//! memory plan gives (the same first-fit plan as the CPU arena), and page-locked host staging
//! buffers so copies run asynchronously on the copy streams.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, PinnedHostSlice};

use super::error::{CudaError, CudaResult, driver};

/// Alignment of every region handed to a kernel (cuDNN and cuBLAS want 256-byte alignment
/// for their fastest paths).
pub const REGION_ALIGN: usize = 256;

/// A span of device memory: a raw device address and a length in bytes. Copyable; it does
/// not own the memory, the [`DeviceArena`] it came from does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRegion {
    /// Device address.
    pub ptr: u64,
    /// Length in bytes.
    pub bytes: usize,
}

impl DeviceRegion {
    /// The sub-region `[offset, offset + bytes)`, or `None` when it does not fit.
    pub fn sub(self, offset: usize, bytes: usize) -> Option<DeviceRegion> {
        (offset.checked_add(bytes)? <= self.bytes).then_some(DeviceRegion {
            ptr: self.ptr + offset as u64,
            bytes,
        })
    }
}

/// One device allocation that regions are carved from.
#[derive(Debug)]
pub struct DeviceArena {
    memory: CudaSlice<u8>,
    region: DeviceRegion,
}

impl DeviceArena {
    /// Allocates `bytes` (at least one) on `stream`'s device.
    pub fn new(stream: &Arc<CudaStream>, bytes: usize) -> CudaResult<DeviceArena> {
        // SAFETY: the memory is uninitialized; every region is written by a kernel or a copy
        // before any kernel reads it (the engine's plan orders that).
        let memory = unsafe { stream.alloc::<u8>(bytes.max(1)) }.map_err(|e| {
            if matches!(e.0, cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY) {
                CudaError::Driver {
                    what: "allocating device memory",
                    reason: format!("out of memory ({bytes} bytes asked)"),
                }
            } else {
                driver("allocating device memory")(e)
            }
        })?;
        // The allocation may be stream-ordered (cuMemAllocAsync): let it complete before any
        // other stream (a copy stream, another lane) touches the memory.
        stream
            .synchronize()
            .map_err(driver("waiting for a device allocation"))?;
        let ptr = memory.device_ptr(stream).0;
        let region = DeviceRegion {
            ptr,
            bytes: bytes.max(1),
        };
        Ok(DeviceArena { memory, region })
    }

    /// The whole arena.
    pub fn region(&self) -> DeviceRegion {
        self.region
    }

    /// Bytes allocated.
    pub fn len(&self) -> usize {
        self.memory.len()
    }

    /// Whether the arena is empty (never: at least one byte is allocated).
    pub fn is_empty(&self) -> bool {
        self.memory.is_empty()
    }
}

/// Page-locked host memory for staging copies between the host and a GPU.
#[derive(Debug)]
pub struct PinnedBuffer {
    memory: PinnedHostSlice<u8>,
}

impl PinnedBuffer {
    /// Allocates `bytes` of page-locked host memory (plain, not write-combined, so the host
    /// reads downloads at full speed).
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize) -> CudaResult<PinnedBuffer> {
        // SAFETY: the bytes are uninitialized until written; callers write before reading.
        let memory = unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes.max(1), 0) }
            .map_err(driver("allocating pinned host memory"))?;
        Ok(PinnedBuffer { memory })
    }

    /// The bytes.
    pub fn as_mut_slice(&mut self) -> CudaResult<&mut [u8]> {
        self.memory
            .as_mut_slice()
            .map_err(driver("mapping pinned host memory"))
    }

    /// The bytes.
    pub fn as_slice(&self) -> CudaResult<&[u8]> {
        self.memory
            .as_slice()
            .map_err(driver("mapping pinned host memory"))
    }
}

/// Rounds `bytes` up to [`REGION_ALIGN`].
pub fn aligned(bytes: usize) -> usize {
    bytes.div_ceil(REGION_ALIGN) * REGION_ALIGN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_regions_stay_inside() {
        let r = DeviceRegion {
            ptr: 0x1000,
            bytes: 512,
        };
        assert_eq!(
            r.sub(256, 256),
            Some(DeviceRegion {
                ptr: 0x1100,
                bytes: 256
            })
        );
        assert_eq!(r.sub(257, 256), None);
        assert_eq!(r.sub(usize::MAX, 2), None);
        assert_eq!(aligned(1), 256);
        assert_eq!(aligned(512), 512);
    }
}
