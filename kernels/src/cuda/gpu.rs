//! [`Gpu`]: one CUDA device opened for a session — its context, compute streams, copy
//! streams, per-stream cuBLAS and cuDNN handles, the compiled-kernel cache and an event pool.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use cudarc::cublas::sys as blas_sys;
use cudarc::cudnn::sys as dnn_sys;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaStream, LaunchConfig, PushKernelArg, sys,
};
use cudarc::nvrtc::Ptx;

use super::codegen::pool::PoolWindow;
use super::codegen::{ENTRY, KernelSource, Strides};
use super::compile::compile_ptx;
use super::error::{CudaError, CudaResult, driver};
use super::memory::DeviceRegion;
use super::probe::{self, GpuInfo};

/// Choices that change numerics or resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GpuOptions {
    /// Let cuBLAS and cuDNN use TF32 tensor cores for `float` (faster, ~1e-3 relative
    /// error). Off by default, so GPU outputs match the CPU's to 1e-5.
    pub tf32: bool,
}

/// A cuBLAS handle bound to one stream.
#[derive(Debug)]
pub struct BlasHandle(pub(crate) blas_sys::cublasHandle_t);
// SAFETY: a handle is used by one lane at a time (it sits behind a Mutex in `Gpu`), which is
// what cuBLAS requires of a handle shared between threads.
unsafe impl Send for BlasHandle {}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        // SAFETY: created by cublasCreate and destroyed once.
        unsafe { cudarc::cublas::result::destroy_handle(self.0) }.ok();
    }
}

/// A cuDNN handle bound to one stream.
#[derive(Debug)]
pub struct DnnHandle(pub(crate) dnn_sys::cudnnHandle_t);
// SAFETY: as for `BlasHandle`.
unsafe impl Send for DnnHandle {}

impl Drop for DnnHandle {
    fn drop(&mut self) {
        // SAFETY: created by cudnnCreate and destroyed once.
        unsafe { cudarc::cudnn::result::destroy_handle(self.0) }.ok();
    }
}

/// One GPU, opened.
#[derive(Debug)]
pub struct Gpu {
    info: GpuInfo,
    options: GpuOptions,
    ctx: Arc<CudaContext>,
    streams: Vec<Arc<CudaStream>>,
    copy_in: Arc<CudaStream>,
    copy_out: Arc<CudaStream>,
    blas: Vec<Mutex<BlasHandle>>,
    dnn: Vec<Mutex<DnnHandle>>,
    functions: Mutex<HashMap<String, Arc<CudaFunction>>>,
    events: Mutex<Vec<CudaEvent>>,
    /// Build-time choices by key (see [`Gpu::cached`]).
    choices: Mutex<HashMap<String, Arc<dyn Any + Send + Sync>>>,
    /// Shared by work on the compute streams, exclusive to a CUDA Graph capture (see
    /// [`Gpu::sharing_streams`]).
    capture: RwLock<()>,
}

impl Gpu {
    /// Opens GPU `ordinal` with `streams` compute streams (at least one), after probing that
    /// the driver, NVRTC, cuBLAS and cuDNN are all present.
    pub fn open(ordinal: u32, streams: usize, options: GpuOptions) -> CudaResult<Gpu> {
        let info = probe::probe()?.gpu(ordinal)?.clone();
        let ctx = CudaContext::new(ordinal as usize).map_err(driver("creating the context"))?;
        // The executor orders work with its own events; cudarc's per-buffer tracking would
        // add a wait and a record to every launch.
        // SAFETY: no buffer exists yet.
        unsafe { ctx.disable_event_tracking() };
        let new_stream = || ctx.new_stream().map_err(driver("creating a stream"));
        let streams = (0..streams.max(1))
            .map(|_| new_stream())
            .collect::<CudaResult<Vec<_>>>()?;
        let copy_in = new_stream()?;
        let copy_out = new_stream()?;
        let mut blas = Vec::new();
        let mut dnn = Vec::new();
        for stream in &streams {
            blas.push(Mutex::new(new_blas(stream, options)?));
            dnn.push(Mutex::new(new_dnn(stream)?));
        }
        Ok(Gpu {
            info,
            options,
            ctx,
            streams,
            copy_in,
            copy_out,
            blas,
            dnn,
            functions: Mutex::new(HashMap::new()),
            events: Mutex::new(Vec::new()),
            choices: Mutex::new(HashMap::new()),
            capture: RwLock::new(()),
        })
    }

    /// Held while a thread puts work on the compute streams (a run, a plan's compilation): a
    /// CUDA Graph capture records whatever enters the streams it captures, and another
    /// thread's launch or event wait there would break it, so a capture
    /// ([`Gpu::capturing_streams`]) waits for these and they for it. Never nest the two.
    pub fn sharing_streams(&self) -> RwLockReadGuard<'_, ()> {
        self.capture.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Held for a CUDA Graph capture on the compute streams (see [`Gpu::sharing_streams`]).
    pub fn capturing_streams(&self) -> RwLockWriteGuard<'_, ()> {
        self.capture.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The choice kept under `key`, made by `make` the first time it is asked for (a
    /// convolution's algorithm, chosen once per shape and kept while the GPU is open).
    pub fn cached<T: Clone + Send + Sync + 'static>(
        &self,
        key: &str,
        make: impl FnOnce() -> CudaResult<T>,
    ) -> CudaResult<T> {
        let lock = || self.choices.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(known) = lock().get(key).and_then(|c| c.downcast_ref::<T>()) {
            return Ok(known.clone());
        }
        // Made without the lock, so that other builds go on meanwhile.
        let made = make()?;
        lock().insert(key.to_string(), Arc::new(made.clone()));
        Ok(made)
    }

    /// What the probe reported about this GPU.
    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// The options it was opened with.
    pub fn options(&self) -> GpuOptions {
        self.options
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Compute stream `index`.
    pub fn stream(&self, index: usize) -> &Arc<CudaStream> {
        &self.streams[index % self.streams.len()]
    }

    /// How many compute streams.
    pub fn num_streams(&self) -> usize {
        self.streams.len()
    }

    /// The host-to-device copy stream.
    pub fn copy_in_stream(&self) -> &Arc<CudaStream> {
        &self.copy_in
    }

    /// The device-to-host copy stream.
    pub fn copy_out_stream(&self) -> &Arc<CudaStream> {
        &self.copy_out
    }

    /// The cuBLAS handle of compute stream `index`.
    pub fn blas(&self, index: usize) -> std::sync::MutexGuard<'_, BlasHandle> {
        self.blas[index % self.blas.len()]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The cuDNN handle of compute stream `index`.
    pub fn dnn(&self, index: usize) -> std::sync::MutexGuard<'_, DnnHandle> {
        self.dnn[index % self.dnn.len()]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The kernel of `source`, compiled by NVRTC for this GPU and loaded the first time it is
    /// asked for, cached by key after that.
    pub fn function(&self, source: &KernelSource) -> CudaResult<Arc<CudaFunction>> {
        if let Some(f) = self.lock_functions().get(&source.key) {
            return Ok(f.clone());
        }
        let ptx = compile_ptx(source, self.info.compute_capability)?;
        let module = self
            .ctx
            .load_module(Ptx::from_src(ptx))
            .map_err(driver("loading a compiled kernel"))?;
        let function = Arc::new(
            module
                .load_function(ENTRY)
                .map_err(driver("finding a kernel's entry point"))?,
        );
        self.lock_functions()
            .insert(source.key.clone(), function.clone());
        Ok(function)
    }

    fn lock_functions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<CudaFunction>>> {
        self.functions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An event from the pool (created on first need, without timing).
    pub fn take_event(&self) -> CudaResult<CudaEvent> {
        if let Some(e) = self.events.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(e);
        }
        self.ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(driver("creating an event"))
    }

    /// Returns an event to the pool.
    pub fn give_event(&self, event: CudaEvent) {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
    }

    /// Pre-creates `count` events so a run never creates one.
    pub fn reserve_events(&self, count: usize) -> CudaResult<()> {
        let mut fresh = Vec::with_capacity(count);
        for _ in 0..count {
            fresh.push(self.take_event()?);
        }
        for e in fresh {
            self.give_event(e);
        }
        Ok(())
    }

    /// Copies `host` into `dst` on the host-to-device stream (asynchronous when `host` is
    /// page-locked; the caller keeps `host` alive until the stream passes the copy).
    pub fn upload(&self, host: &[u8], dst: DeviceRegion) -> CudaResult<()> {
        if host.len() > dst.bytes {
            return Err(CudaError::Unsupported(format!(
                "upload of {} bytes into a {}-byte region",
                host.len(),
                dst.bytes
            )));
        }
        self.ctx
            .bind_to_thread()
            .map_err(driver("binding the context"))?;
        // SAFETY: `dst` lies inside a live arena (checked size above); the stream orders it.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(dst.ptr, host, self.copy_in.cu_stream())
        }
        .map_err(driver("copying host to device"))
    }

    /// Copies `src` into `host` on the device-to-host stream and waits for it. The caller
    /// orders the copy after the kernel that wrote `src` (a synchronized stream, or the copy
    /// stream waiting on that kernel's event).
    pub fn download(&self, src: DeviceRegion, host: &mut [u8]) -> CudaResult<()> {
        if host.len() > src.bytes {
            return Err(CudaError::Unsupported(format!(
                "download of {} bytes from a {}-byte region",
                host.len(),
                src.bytes
            )));
        }
        self.ctx
            .bind_to_thread()
            .map_err(driver("binding the context"))?;
        // SAFETY: as for `upload`; the synchronize below keeps `host` borrowed until done.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(host, src.ptr, self.copy_out.cu_stream())
        }
        .map_err(driver("copying device to host"))?;
        self.copy_out
            .synchronize()
            .map_err(driver("waiting for a device-to-host copy"))
    }

    /// Copies the first `bytes` of `src` into `dst` on compute stream `stream` (without
    /// waiting; a CUDA Graph captures it).
    pub fn copy_device(
        &self,
        src: DeviceRegion,
        dst: DeviceRegion,
        bytes: usize,
        stream: usize,
    ) -> CudaResult<()> {
        if bytes > src.bytes || bytes > dst.bytes {
            return Err(CudaError::Unsupported(format!(
                "a {bytes}-byte copy between regions of {} and {} bytes",
                src.bytes, dst.bytes
            )));
        }
        self.ctx
            .bind_to_thread()
            .map_err(driver("binding the context"))?;
        // SAFETY: both regions lie inside live arenas and hold `bytes` (checked above); the
        // stream orders the copy after their producers.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                dst.ptr,
                src.ptr,
                bytes,
                self.stream(stream).cu_stream(),
            )
        }
        .map_err(driver("copying device to device"))
    }

    /// Zeroes `region` on compute stream `stream` (without waiting; a CUDA Graph captures it).
    pub fn zero(&self, region: DeviceRegion, stream: usize) -> CudaResult<()> {
        self.ctx
            .bind_to_thread()
            .map_err(driver("binding the context"))?;
        // SAFETY: `region` lies inside a live arena; the stream orders the write.
        unsafe {
            cudarc::driver::result::memset_d8_async(
                region.ptr,
                0,
                region.bytes,
                self.stream(stream).cu_stream(),
            )
        }
        .map_err(driver("zeroing device memory"))
    }

    /// Launches the kernel of `source` on compute stream `stream` with `grid` blocks of
    /// `block` threads and `args` in the kernel's parameter order.
    pub fn launch(
        &self,
        source: &KernelSource,
        stream: usize,
        (grid, block): (u32, u32),
        shared_bytes: u32,
        args: &[KernelArg],
    ) -> CudaResult<()> {
        let function = self.function(source)?;
        let stream = self.stream(stream);
        let mut builder = stream.launch_builder(&function);
        for arg in args {
            match arg {
                KernelArg::Ptr(p) => builder.arg(p),
                KernelArg::I64(v) => builder.arg(v),
                KernelArg::Strides(s) => builder.arg(s),
                KernelArg::Window(w) => builder.arg(w),
                KernelArg::Bits8(v) => builder.arg(v),
                KernelArg::Bits16(v) => builder.arg(v),
                KernelArg::Bits32(v) => builder.arg(v),
            };
        }
        let config = LaunchConfig {
            grid_dim: (grid.max(1), 1, 1),
            block_dim: (block.max(1), 1, 1),
            shared_mem_bytes: shared_bytes,
        };
        // SAFETY: the generators and their callers agree on the parameter list (the key
        // names the signature); every pointer argument is a region of a live arena.
        unsafe { builder.launch(config) }
            .map(|_| ())
            .map_err(|e| CudaError::Driver {
                what: "launching a kernel",
                reason: format!("{}: {e:?}", source.key),
            })
    }
}

/// One argument of a generated kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelArg {
    /// A device pointer.
    Ptr(u64),
    /// A `long long`.
    I64(i64),
    /// A [`Strides`] by value.
    Strides(Strides),
    /// A [`PoolWindow`] by value.
    Window(PoolWindow),
    /// A one-byte value (fill patterns).
    Bits8(u8),
    /// A two-byte value.
    Bits16(u16),
    /// A four-byte value.
    Bits32(u32),
}

// SAFETY: `Strides` and `PoolWindow` are `#[repr(C)]` plain integers, laid out exactly as the
// generated `struct Strides` / `struct Window`.
unsafe impl cudarc::driver::DeviceRepr for Strides {}
// SAFETY: as above.
unsafe impl cudarc::driver::DeviceRepr for PoolWindow {}

fn new_blas(stream: &Arc<CudaStream>, options: GpuOptions) -> CudaResult<BlasHandle> {
    let blas_err = |what| {
        move |e: cudarc::cublas::result::CublasError| CudaError::Cublas {
            what,
            reason: format!("{e:?}"),
        }
    };
    let handle =
        BlasHandle(cudarc::cublas::result::create_handle().map_err(blas_err("creating a handle"))?);
    let math = if options.tf32 {
        blas_sys::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH
    } else {
        // Single precision without tensor cores: FP32 FMA, as on the CPU.
        blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH
    };
    // SAFETY: a live handle and stream of the same context.
    unsafe {
        cudarc::cublas::result::set_stream(handle.0, stream.cu_stream() as _)
            .map_err(blas_err("binding a stream"))?;
        blas_sys::cublasSetMathMode(handle.0, math)
            .result()
            .map_err(blas_err("setting the math mode"))?;
    }
    Ok(handle)
}

fn new_dnn(stream: &Arc<CudaStream>) -> CudaResult<DnnHandle> {
    let dnn_err = |what| {
        move |e: cudarc::cudnn::result::CudnnError| CudaError::Cudnn {
            what,
            reason: format!("{e:?}"),
        }
    };
    let handle =
        DnnHandle(cudarc::cudnn::result::create_handle().map_err(dnn_err("creating a handle"))?);
    // SAFETY: a live handle and stream of the same context.
    unsafe { cudarc::cudnn::result::set_stream(handle.0, stream.cu_stream() as _) }
        .map_err(dnn_err("binding a stream"))?;
    Ok(handle)
}
