//! Is CUDA usable here? Probing every library and the GPUs *before* cudarc touches them
//! (cudarc panics when a library is missing), and turning each missing piece into a
//! [`CudaUnavailable`] that says what to install or where to point.

use std::sync::OnceLock;

use cudarc::driver::result as driver;
use cudarc::driver::sys::CUdevice_attribute;

use super::libraries;

/// Why the CUDA backend cannot run on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CudaUnavailable {
    /// `libcuda.so.1` (the driver) could not be opened.
    #[error(
        "the NVIDIA driver library libcuda.so.1 was not found (no NVIDIA driver on this machine, \
         or it is not on the library path)"
    )]
    NoDriver,
    /// A CUDA library the backend needs could not be opened.
    #[error(
        "the {library} library ({file}) was not found: put its directory on LD_LIBRARY_PATH or \
         in {var} (for the Python wheels: site-packages/nvidia/<package>/lib)",
        var = libraries::LIB_PATH_VAR
    )]
    MissingLibrary {
        /// What the library is, e.g. `"cuDNN"`.
        library: &'static str,
        /// The file the loader looked for.
        file: &'static str,
    },
    /// `cuInit` failed (driver too old for CUDA 13, or no usable device node).
    #[error("the CUDA driver failed to initialize: {0}")]
    DriverInit(String),
    /// The driver works but sees no GPU.
    #[error("the CUDA driver sees no GPU")]
    NoDevice,
    /// The session asked for a GPU ordinal that does not exist.
    #[error("CUDA GPU {ordinal} was requested but this machine has {count}")]
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: u32,
        /// How many GPUs there are.
        count: u32,
    },
}

/// One GPU the driver reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    /// Device ordinal.
    pub ordinal: u32,
    /// Marketing name, e.g. `"NVIDIA H100 80GB HBM3"`.
    pub name: String,
    /// Compute capability (major, minor): NVRTC compiles for exactly this architecture.
    pub compute_capability: (u32, u32),
    /// Device memory in bytes.
    pub total_memory: usize,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
}

/// What the probe found: every GPU, with every library present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaSystem {
    /// The GPUs, by ordinal.
    pub gpus: Vec<GpuInfo>,
}

impl CudaSystem {
    /// The GPU with `ordinal`, or why it is unavailable.
    pub fn gpu(&self, ordinal: u32) -> Result<&GpuInfo, CudaUnavailable> {
        self.gpus
            .get(ordinal as usize)
            .ok_or(CudaUnavailable::NoSuchDevice {
                ordinal,
                count: self.gpus.len() as u32,
            })
    }
}

/// Probes the machine once per process: preloads the libraries of
/// `SPILLWAY_CUDA_LIB_PATH`, checks the driver and every library the backend needs,
/// initializes the driver and lists the GPUs.
pub fn probe() -> Result<&'static CudaSystem, CudaUnavailable> {
    static PROBED: OnceLock<Result<CudaSystem, CudaUnavailable>> = OnceLock::new();
    PROBED
        .get_or_init(probe_uncached)
        .as_ref()
        .map_err(Clone::clone)
}

/// Whether the NVRTC library can be opened (all the compile-only paths need).
pub fn nvrtc_present() -> bool {
    libraries::preload();
    // SAFETY: only tries to open the library; nothing is called through it.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Whether a library can be opened (cudarc's `is_culib_present`).
type LibraryCheck = unsafe fn() -> bool;

fn probe_uncached() -> Result<CudaSystem, CudaUnavailable> {
    libraries::preload();
    // SAFETY: each check only tries to open the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(CudaUnavailable::NoDriver);
    }
    let libraries: [(&str, &str, LibraryCheck); 3] = [
        (
            "NVRTC",
            "libnvrtc.so.13",
            cudarc::nvrtc::sys::is_culib_present,
        ),
        (
            "cuBLAS",
            "libcublas.so.13",
            cudarc::cublas::sys::is_culib_present,
        ),
        (
            "cuDNN",
            "libcudnn.so.9",
            cudarc::cudnn::sys::is_culib_present,
        ),
    ];
    for (library, file, present) in libraries {
        // SAFETY: as above.
        if !unsafe { present() } {
            return Err(CudaUnavailable::MissingLibrary { library, file });
        }
    }
    driver::init().map_err(|e| CudaUnavailable::DriverInit(e.to_string()))?;
    let count =
        driver::device::get_count().map_err(|e| CudaUnavailable::DriverInit(e.to_string()))?;
    if count <= 0 {
        return Err(CudaUnavailable::NoDevice);
    }
    let gpus = (0..count)
        .map(gpu_info)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CudaUnavailable::DriverInit(e.to_string()))?;
    Ok(CudaSystem { gpus })
}

fn gpu_info(ordinal: i32) -> Result<GpuInfo, driver::DriverError> {
    let device = driver::device::get(ordinal)?;
    // SAFETY: `device` was just returned by cuDeviceGet.
    let attribute = |a| unsafe { driver::device::get_attribute(device, a) };
    Ok(GpuInfo {
        ordinal: ordinal as u32,
        name: driver::device::get_name(device)?,
        compute_capability: (
            attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32,
            attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32,
        ),
        // SAFETY: as above.
        total_memory: unsafe { driver::device::total_mem(device)? },
        multiprocessors: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
            as u32,
    })
}
