//! Devices, links and shared buses (SortingHat §2.2, §3.4).

use serde::{Deserialize, Serialize};

use crate::error::{PlacementError, Result, check_nonneg};
use crate::graph::{CostGraph, DeviceKind};

fn one() -> f64 {
    1.0
}

fn one_lane() -> usize {
    1
}

/// One device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    /// Display name.
    #[serde(default)]
    pub name: String,
    /// Kind: selects which cost of an operator applies.
    pub kind: DeviceKind,
    /// Relative speed: an operator takes `cost_us[kind] / speed`.
    #[serde(default = "one")]
    pub speed: f64,
    /// Streams (GPU) or worker lanes (CPU).
    #[serde(default = "one_lane")]
    pub streams: usize,
}

impl Device {
    /// A GPU of speed 1.
    pub fn gpu(name: impl Into<String>, streams: usize) -> Self {
        Device {
            name: name.into(),
            kind: DeviceKind::Gpu,
            speed: 1.0,
            streams,
        }
    }

    /// A CPU of speed 1.
    pub fn cpu(name: impl Into<String>, lanes: usize) -> Self {
        Device {
            name: name.into(),
            kind: DeviceKind::Cpu,
            speed: 1.0,
            streams: lanes,
        }
    }
}

/// A directed link: a copy from `src` to `dst` takes `latency_us + bytes / bandwidth`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// Source device.
    pub src: usize,
    /// Destination device.
    pub dst: usize,
    /// Bytes per µs.
    pub bandwidth: f64,
    /// Fixed cost per copy, µs.
    #[serde(default)]
    pub latency_us: f64,
    /// The shared bus this link runs over, if any.
    #[serde(default)]
    pub bus: Option<usize>,
}

/// A bus shared by several links (e.g. a PCIe switch): copies over it are serialized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bus {
    /// Display name.
    #[serde(default)]
    pub name: String,
}

/// The machine: devices, links between them, shared buses.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Topology {
    /// Devices; ids are `0..devices.len()`.
    pub devices: Vec<Device>,
    /// Directed links.
    #[serde(default)]
    pub links: Vec<Link>,
    /// Shared buses.
    #[serde(default)]
    pub buses: Vec<Bus>,
}

impl Topology {
    /// Every ordered pair of distinct devices joined by its own link.
    pub fn full_mesh(devices: Vec<Device>, bandwidth: f64, latency_us: f64) -> Self {
        let d = devices.len();
        let mut links = Vec::new();
        for src in 0..d {
            for dst in 0..d {
                if src != dst {
                    links.push(Link {
                        src,
                        dst,
                        bandwidth,
                        latency_us,
                        bus: None,
                    });
                }
            }
        }
        Topology {
            devices,
            links,
            buses: Vec::new(),
        }
    }

    /// `n` identical GPUs with `streams` each, fully meshed (bandwidth 1 byte/µs, so edge bytes
    /// are transfer µs, as in the HIOS model).
    pub fn gpus(n: usize, streams: usize) -> Self {
        Topology::full_mesh(
            (0..n)
                .map(|i| Device::gpu(format!("gpu{i}"), streams))
                .collect(),
            1.0,
            0.0,
        )
    }

    /// Number of devices.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Whether there is no device.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// Validates and builds the lookup view the simulator and policies use.
    pub fn view(&self) -> Result<TopoView> {
        TopoView::new(self)
    }
}

/// A validated [`Topology`] with a link matrix.
#[derive(Debug, Clone)]
pub struct TopoView {
    /// Number of devices.
    pub d: usize,
    /// `link[src * d + dst]`: index into `Topology::links`.
    link: Vec<Option<usize>>,
    /// Copy-queue id of each link: its bus if it has one, else its own queue.
    pub queue_of_link: Vec<usize>,
    /// Number of copy queues.
    pub queues: usize,
}

impl TopoView {
    fn new(t: &Topology) -> Result<TopoView> {
        let d = t.devices.len();
        if d == 0 {
            return Err(PlacementError::InvalidTopology("no device".into()));
        }
        for (i, dev) in t.devices.iter().enumerate() {
            check_nonneg(dev.speed, || format!("device {i} speed"))?;
            if dev.speed == 0.0 || dev.streams == 0 {
                return Err(PlacementError::InvalidTopology(format!(
                    "device {i} needs speed > 0 and at least one stream"
                )));
            }
        }
        let mut link = vec![None; d * d];
        let mut queue_of_link = Vec::with_capacity(t.links.len());
        let nb = t.buses.len();
        for (i, l) in t.links.iter().enumerate() {
            for dev in [l.src, l.dst] {
                if dev >= d {
                    return Err(PlacementError::DeviceOutOfRange { device: dev, n: d });
                }
            }
            if l.src == l.dst {
                return Err(PlacementError::InvalidTopology(format!(
                    "link {i} is a loop"
                )));
            }
            check_nonneg(l.bandwidth, || format!("link {i} bandwidth"))?;
            check_nonneg(l.latency_us, || format!("link {i} latency"))?;
            if l.bandwidth == 0.0 {
                return Err(PlacementError::InvalidTopology(format!(
                    "link {i} has zero bandwidth"
                )));
            }
            if link[l.src * d + l.dst].replace(i).is_some() {
                return Err(PlacementError::InvalidTopology(format!(
                    "two links from {} to {}",
                    l.src, l.dst
                )));
            }
            queue_of_link.push(match l.bus {
                Some(b) if b >= nb => {
                    return Err(PlacementError::InvalidTopology(format!(
                        "link {i} names bus {b} of {nb}"
                    )));
                }
                Some(b) => b,
                None => nb + i,
            });
        }
        Ok(TopoView {
            d,
            link,
            queue_of_link,
            queues: nb + t.links.len(),
        })
    }

    /// The link from `src` to `dst`.
    pub fn link(&self, src: usize, dst: usize) -> Option<usize> {
        self.link.get(src * self.d + dst).copied().flatten()
    }

    /// Time of a copy of `bytes` from `src` to `dst` (0 on the same device).
    pub fn copy_us(&self, t: &Topology, src: usize, dst: usize, bytes: f64) -> Result<f64> {
        if src == dst {
            return Ok(0.0);
        }
        let l = self
            .link(src, dst)
            .ok_or(PlacementError::NoLink { src, dst })?;
        let l = &t.links[l];
        Ok(l.latency_us + bytes / l.bandwidth)
    }
}

/// Run time of `op` on `device`, or `None` if the operator has no cost for that kind.
pub fn op_time(g: &CostGraph, t: &Topology, op: usize, device: usize) -> Option<f64> {
    let dev = t.devices.get(device)?;
    g.ops.get(op)?.cost_us.get(&dev.kind).map(|c| c / dev.speed)
}
