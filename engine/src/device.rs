//! The devices a session runs on: the host CPU, CPU-backed `Virtual` devices (a test
//! instrument with its own memory space and a configurable copy cost), and CUDA GPUs.

use std::time::Duration;

/// One device.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Device {
    /// The host CPU; its lanes are worker threads.
    Cpu,
    /// A CPU-backed device with its own memory space: values reach it only through copy tasks,
    /// which take the configured copy cost. It exercises every multi-device path without a GPU.
    Virtual {
        /// Distinguishes virtual devices.
        id: u32,
    },
    /// A CUDA GPU (the CUDA backend, feature `cuda`).
    Cuda {
        /// Device ordinal.
        ordinal: u32,
    },
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Virtual { id } => write!(f, "virtual{id}"),
            Device::Cuda { ordinal } => write!(f, "cuda{ordinal}"),
        }
    }
}

/// Cost of a copy into or out of a device: `latency + bytes / bandwidth`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CopyCost {
    /// Fixed cost per copy.
    pub latency: Duration,
    /// Bytes per second.
    pub bandwidth_bytes_per_s: f64,
}

impl CopyCost {
    /// A free copy (only the memcpy itself).
    pub const FREE: CopyCost = CopyCost {
        latency: Duration::ZERO,
        bandwidth_bytes_per_s: f64::INFINITY,
    };

    /// A PCIe-4-like link: 10 µs latency, 25 GB/s.
    pub const PCIE: CopyCost = CopyCost {
        latency: Duration::from_micros(10),
        bandwidth_bytes_per_s: 25e9,
    };

    /// How long moving `bytes` takes.
    pub fn time(&self, bytes: usize) -> Duration {
        let transfer = if self.bandwidth_bytes_per_s.is_finite() && self.bandwidth_bytes_per_s > 0.0
        {
            Duration::from_secs_f64(bytes as f64 / self.bandwidth_bytes_per_s)
        } else {
            Duration::ZERO
        };
        self.latency + transfer
    }
}

/// A device and how the session uses it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeviceSpec {
    /// The device.
    pub device: Device,
    /// Worker lanes (CPU, Virtual) or streams (CUDA).
    pub lanes: usize,
    /// Copies into and out of this device (Virtual only; CPU copies are free).
    pub copy_cost: CopyCost,
    /// Relative speed reported to the placement policies (Virtual devices may pose as faster
    /// or slower than the CPU they run on).
    pub speed: f64,
}

/// The set of devices a session uses; the first is where inputs arrive and outputs leave.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Devices {
    specs: Vec<DeviceSpec>,
    allow_fallback: bool,
}

impl Default for Devices {
    fn default() -> Self {
        Devices::cpu()
    }
}

impl Devices {
    /// The CPU alone, one lane.
    pub fn cpu() -> Self {
        Devices {
            specs: vec![DeviceSpec {
                device: Device::Cpu,
                lanes: 1,
                copy_cost: CopyCost::FREE,
                speed: 1.0,
            }],
            allow_fallback: false,
        }
    }

    /// The CPU. A GPU is stated explicitly with `with_cuda`, which fails at session creation
    /// when the GPU is missing (or this build has no CUDA backend) unless fallback is allowed.
    pub fn auto() -> Self {
        Devices::cpu()
    }

    /// Sets the CPU's worker lanes (inter-op parallelism on the host).
    pub fn with_cpu_lanes(mut self, lanes: usize) -> Self {
        self.specs[0].lanes = lanes.max(1);
        self
    }

    /// Adds a Virtual device.
    pub fn with_virtual(mut self, lanes: usize, copy_cost: CopyCost) -> Self {
        let id = self
            .specs
            .iter()
            .filter(|s| matches!(s.device, Device::Virtual { .. }))
            .count() as u32;
        self.specs.push(DeviceSpec {
            device: Device::Virtual { id },
            lanes: lanes.max(1),
            copy_cost,
            speed: 1.0,
        });
        self
    }

    /// Adds a CUDA GPU with `streams` compute streams. A session with a GPU runs every node on
    /// it (its placement policy assigns the streams); nodes on the CPU and the GPU in one
    /// inference are the next step of the CUDA backend.
    pub fn with_cuda(mut self, ordinal: u32, streams: usize) -> Self {
        self.specs.push(DeviceSpec {
            device: Device::Cuda { ordinal },
            lanes: streams.max(1),
            copy_cost: CopyCost::PCIE,
            speed: 1.0,
        });
        self
    }

    /// Sets the relative speed the placement policies see for the device added last (a
    /// Virtual device posing as faster or slower than the CPU it runs on; 1.0 by default).
    /// Values that are not finite and positive are ignored.
    pub fn with_speed(mut self, speed: f64) -> Self {
        if speed.is_finite()
            && speed > 0.0
            && let Some(last) = self.specs.last_mut()
        {
            last.speed = speed;
        }
        self
    }

    /// Lets the session drop devices that are unavailable (reported once) instead of failing.
    pub fn allow_fallback(mut self, allow: bool) -> Self {
        self.allow_fallback = allow;
        self
    }

    /// Whether fallback is allowed.
    pub fn fallback_allowed(&self) -> bool {
        self.allow_fallback
    }

    /// The devices, host first.
    pub fn specs(&self) -> &[DeviceSpec] {
        &self.specs
    }

    /// Whether a CUDA GPU is among the devices.
    pub fn has_cuda(&self) -> bool {
        self.specs
            .iter()
            .any(|s| matches!(s.device, Device::Cuda { .. }))
    }

    /// Total worker lanes over all devices.
    pub fn total_lanes(&self) -> usize {
        self.specs.iter().map(|s| s.lanes).sum()
    }

    /// The cores shared evenly among the lanes: each lane's intra-op threads (at least one).
    pub fn threads_per_lane(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores / self.total_lanes().max(1)).max(1)
    }

    /// Keeps only the devices this build can run, returning the ones dropped with the reason.
    pub(crate) fn split_available(&self) -> (Devices, Vec<(Device, String)>) {
        let mut kept = self.clone();
        let mut dropped = Vec::new();
        kept.specs.retain(|s| match s.device {
            Device::Cuda { ordinal } => match cuda_unavailable(ordinal) {
                Some(reason) => {
                    dropped.push((s.device, reason));
                    false
                }
                None => true,
            },
            _ => true,
        });
        (kept, dropped)
    }
}

/// Why CUDA GPU `ordinal` cannot run this session's nodes.
#[cfg(not(feature = "cuda"))]
fn cuda_unavailable(_ordinal: u32) -> Option<String> {
    Some("this build of Spillway has no CUDA backend (feature `cuda`)".to_string())
}

/// Why CUDA GPU `ordinal` cannot run this session's nodes (what the probe found missing), or
/// `None` when it can.
#[cfg(feature = "cuda")]
fn cuda_unavailable(ordinal: u32) -> Option<String> {
    spillway_kernels::cuda::probe()
        .and_then(|system| system.gpu(ordinal).cloned())
        .err()
        .map(|reason| reason.to_string())
}
