//! The profiler: measures every node on every device kind (warm-up, median of repeats, real
//! input shapes) and the copy cost between every ordered device pair at several sizes, and
//! writes them as the placement crate's [`CostGraph`] and [`Topology`].
//!
//! Opara's per-op figures: GPUs report occupancy; on the CPU there is none to measure, so the
//! resource demand is 1 and the memory/compute-bound flag comes from the op's arithmetic
//! intensity class (Conv, ConvTranspose, Gemm, MatMul, Einsum are compute-bound; the rest are
//! memory-bound). The CUDA backend replaces both with measured figures.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use spillway_kernels::Tensor;
use spillway_placement::{Boundness, CostGraph, DeviceKind, Edge, Link, Op, Topology};

use crate::device::{Device, Devices};
use crate::error::{Error, Result};
use crate::exec::Work;
use crate::exec::kernel_pool::{ThreadOptions, kernel_pool, on_kernel_pool, pinned_pool};
use crate::graph::{Graph, ValueId};
use crate::session::Session;
use crate::value::Value;

/// How the profiler measures: `ProfileOptions::default().with_repeats(9)`.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ProfileOptions {
    /// Untimed runs before measuring.
    pub warmup: usize,
    /// Timed runs; the median is kept.
    pub repeats: usize,
    /// Threads each node is timed with: a lane's kernel pool. `None`: the cores shared evenly
    /// among the devices' lanes, as a session shares them (timing every node on all the cores
    /// would make each of several lanes look that much faster than it runs).
    pub intra_op_threads: Option<usize>,
    /// Bytes copied between each ordered device pair to fit the link's latency and bandwidth.
    pub copy_sizes: [usize; 3],
    /// How the kernel threads that time the nodes behave (a session profiling for itself
    /// passes its own).
    pub thread_options: ThreadOptions,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            warmup: 1,
            repeats: 5,
            intra_op_threads: None,
            copy_sizes: [4 << 10, 256 << 10, 4 << 20],
            thread_options: ThreadOptions::default(),
        }
    }
}

impl ProfileOptions {
    /// Untimed runs before measuring.
    pub fn with_warmup(mut self, runs: usize) -> Self {
        self.warmup = runs;
        self
    }

    /// Timed runs; the median is kept.
    pub fn with_repeats(mut self, runs: usize) -> Self {
        self.repeats = runs;
        self
    }

    /// Threads each node is timed with (`None`: the cores shared among the devices' lanes).
    pub fn with_intra_op_threads(mut self, threads: Option<usize>) -> Self {
        self.intra_op_threads = threads;
        self
    }

    /// Bytes copied between each ordered device pair to fit the links.
    pub fn with_copy_sizes(mut self, sizes: [usize; 3]) -> Self {
        self.copy_sizes = sizes;
        self
    }

    /// How the kernel threads that time the nodes behave.
    pub fn with_thread_options(mut self, options: ThreadOptions) -> Self {
        self.thread_options = options;
        self
    }

    /// The threads each node is timed with on `devices` (see `intra_op_threads`).
    pub fn threads(&self, devices: &Devices) -> usize {
        self.intra_op_threads
            .unwrap_or_else(|| devices.threads_per_lane())
            .max(1)
    }
}

/// A measured cost model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CostModel {
    /// Per-node costs (op `i` is graph node `i`) and edge sizes.
    pub graph: CostGraph,
    /// Devices and links.
    pub topology: Topology,
}

impl CostModel {
    /// Reads a cost model saved as JSON.
    pub fn load(path: &std::path::Path) -> Result<CostModel> {
        let text = std::fs::read_to_string(path).map_err(|cause| Error::Io {
            path: path.display().to_string(),
            cause,
        })?;
        serde_json::from_str(&text)
            .map_err(|e| Error::InvalidModel(format!("cost model {}: {e}", path.display())))
    }

    /// Writes the cost model as JSON.
    pub fn save(&self, path: &std::path::Path) -> Result<()> {
        let text =
            serde_json::to_string_pretty(self).map_err(|e| Error::Internal(e.to_string()))?;
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        std::fs::write(path, text).map_err(|cause| Error::Io {
            path: path.display().to_string(),
            cause,
        })
    }
}

/// The placement device kind of a device.
pub fn device_kind(d: Device) -> DeviceKind {
    match d {
        Device::Cpu => DeviceKind::Cpu,
        Device::Virtual { .. } | Device::Cuda { .. } => DeviceKind::Gpu,
    }
}

/// Whether an op type is compute- or memory-bound (Opara's launch order uses it).
pub fn boundness(op_type: &str) -> Boundness {
    match op_type {
        "Conv" | "FusedConv" | "ConvTranspose" | "Gemm" | "MatMul" | "MatMulBias" | "Einsum"
        | "LSTM" | "GRU" | "RNN" | "ConvInteger" | "QLinearConv" | "MatMulInteger"
        | "QLinearMatMul" | "Attention" => Boundness::Compute,
        _ => Boundness::Memory,
    }
}

/// The middle sample (the upper of the two middle ones for an even count; 0 for none).
pub(crate) fn median_us(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(0.0)
}

/// Profiles the graph `session` runs (as optimized) on `devices` with the given tensor inputs
/// (in the model's input order): each node timed alone on each kind of device, and the copies
/// between devices. `progress(done, total)` is called after each node.
pub fn profile(
    session: &Session,
    devices: &Devices,
    inputs: &[Tensor],
    options: ProfileOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<CostModel> {
    let values: Vec<Value> = inputs.iter().cloned().map(Value::Tensor).collect();
    profile_values(session, devices, &values, options, progress)
}

/// Like [`profile`], with inputs of any kind (sequences, optionals).
pub fn profile_values(
    session: &Session,
    devices: &Devices,
    inputs: &[Value],
    options: ProfileOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<CostModel> {
    profile_graph(&session.graph, devices, inputs, options, progress)
}

/// [`profile_values`] on a graph of the engine's own.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub fn profile_graph_values(
    graph: &Graph,
    devices: &Devices,
    inputs: &[Value],
    options: ProfileOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<CostModel> {
    profile_graph(graph, devices, inputs, options, progress)
}

/// Profiles `graph`: see [`profile`].
pub(crate) fn profile_graph(
    graph: &Graph,
    devices: &Devices,
    inputs: &[Value],
    options: ProfileOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<CostModel> {
    let _span = tracing::info_span!("profile", nodes = graph.nodes.len()).entered();
    // Every value the nodes compute on the profile inputs, filled in node by node below.
    let mut values: Vec<Option<Value>> = vec![None; graph.values.len()];
    for (&v, input) in graph.inputs.iter().zip(inputs) {
        values[v.index()] = Some(input.clone());
    }

    let kinds: Vec<DeviceKind> = {
        let mut k: Vec<DeviceKind> = devices
            .specs()
            .iter()
            .map(|s| device_kind(s.device))
            .collect();
        k.sort();
        k.dedup();
        k
    };
    let threads = options.threads(devices);
    let pin = options.thread_options.pin;
    let lane_pool = (kernel_pool(pin).is_none_or(|p| p.current_num_threads() != threads))
        .then(|| pinned_pool(Some(threads), 0, "spillway-profile", pin))
        .transpose()
        .map_err(|e| Error::Internal(format!("cannot start the profiling thread pool: {e}")))?;
    let mut ops = Vec::with_capacity(graph.nodes.len());
    for (i, node) in graph.nodes.iter().enumerate() {
        let work = Work::build(node, &graph.kernel_options)?;
        let value = |v: ValueId| {
            values[v.index()]
                .clone()
                .or_else(|| graph.constants.get(&v).cloned().map(Value::Tensor))
        };
        let held: Vec<Option<Value>> = node.inputs.iter().map(|v| v.and_then(value)).collect();
        let args: Vec<Option<&Value>> = held.iter().map(Option::as_ref).collect();
        let run_once = || -> Result<Vec<Value>> {
            work.run(&args, node.declared_inputs)?
                .map_err(|cause| Error::Kernel {
                    node: node.name.clone(),
                    op_type: node.op_type.clone(),
                    cause,
                })
        };
        let computed = if node
            .inputs
            .iter()
            .zip(&held)
            .any(|(v, h)| v.is_some() && h.is_none())
        {
            Err(Error::Internal("an input could not be computed".into()))
        } else {
            run_once()
        };
        let outputs = match computed {
            Ok(outputs) => outputs,
            Err(cause) => {
                // The seeded inputs do not suit every model (an index, an axis or a scale drawn
                // at random): the node is priced from the bytes it reads, and the nodes that
                // need its outputs likewise.
                let read: usize = held.iter().flatten().map(Value::byte_len).sum();
                let us = estimated_us(read);
                tracing::warn!(
                    node = %node.name,
                    op_type = %node.op_type,
                    %cause,
                    us,
                    "the node does not run on the profile inputs: its cost is estimated"
                );
                ops.push(Op {
                    name: node.name.clone(),
                    kind: node.op_type.clone(),
                    cost_us: kinds.iter().map(|&k| (k, us)).collect(),
                    resource: 1.0,
                    bound: boundness(&node.op_type),
                });
                progress(i + 1, graph.nodes.len());
                continue;
            }
        };
        for (v, out) in node.outputs.iter().zip(outputs) {
            if let Some(v) = v {
                values[v.index()] = Some(out);
            }
        }
        let time_once = || -> Result<f64> {
            let start = Instant::now();
            run_once()?;
            Ok(start.elapsed().as_secs_f64() * 1e6)
        };
        // Timed on a pool as large as a lane's, where a session runs its kernels.
        let timed = || {
            for _ in 0..options.warmup {
                time_once()?;
            }
            (0..options.repeats.max(1))
                .map(|_| time_once())
                .collect::<Result<Vec<_>>>()
        };
        let samples = match &lane_pool {
            Some(pool) => pool.install(timed),
            None => on_kernel_pool(options.thread_options, timed),
        }?;
        // CPU and Virtual devices run the same kernels on the same cores: one measurement
        // serves every kind present (a device's `speed` scales it in the topology).
        let us = median_us(samples).max(0.01);
        let cost_us: BTreeMap<DeviceKind, f64> = kinds.iter().map(|&k| (k, us)).collect();
        ops.push(Op {
            name: node.name.clone(),
            kind: node.op_type.clone(),
            cost_us,
            resource: 1.0,
            bound: boundness(&node.op_type),
        });
        progress(i + 1, graph.nodes.len());
    }
    let value = |v: ValueId| {
        values[v.index()]
            .clone()
            .or_else(|| graph.constants.get(&v).cloned().map(Value::Tensor))
    };
    let edges = edges(graph, &value);
    let topology = topology(devices, options)?;
    Ok(CostModel {
        graph: CostGraph {
            ops,
            edges,
            concurrency: Default::default(),
        },
        topology,
    })
}

/// The cost of a node that could not be timed: reading `bytes` at 10 GB/s, at least 1 µs.
fn estimated_us(bytes: usize) -> f64 {
    (bytes as f64 / 10e3).max(1.0)
}

/// One edge per (producer node, consumer node) with the bytes that flow along it.
fn edges(graph: &Graph, value: &dyn Fn(ValueId) -> Option<Value>) -> Vec<Edge> {
    let producers = graph.producers();
    let mut bytes: BTreeMap<(usize, usize), f64> = BTreeMap::new();
    for (dst, node) in graph.nodes.iter().enumerate() {
        let mut seen = Vec::new();
        for v in node.present_inputs() {
            if seen.contains(&v) {
                continue;
            }
            seen.push(v);
            if let Some(&src) = producers.get(&v) {
                *bytes.entry((src, dst)).or_default() +=
                    value(v).map_or(0, |t| t.byte_len()) as f64;
            }
        }
    }
    bytes
        .into_iter()
        .map(|((src, dst), bytes)| Edge { src, dst, bytes })
        .collect()
}

/// Measures copies between every ordered pair at several sizes and fits latency + bandwidth.
fn topology(devices: &Devices, options: ProfileOptions) -> Result<Topology> {
    let specs = devices.specs();
    let mut links = Vec::new();
    for (src, a) in specs.iter().enumerate() {
        for (dst, b) in specs.iter().enumerate() {
            if src == dst {
                continue;
            }
            let cost = if dst == 0 { a.copy_cost } else { b.copy_cost };
            let mut points = Vec::new();
            for size in options.copy_sizes {
                let t = Tensor::from_shape_vec(&[size / 4], vec![1.0f32; size / 4])
                    .map_err(|e| Error::Internal(e.to_string()))?;
                let samples: Vec<f64> = (0..options.repeats.max(1))
                    .map(|_| {
                        let start = Instant::now();
                        let copy = Tensor::from(t.view::<f32>().expect("f32").to_owned());
                        std::hint::black_box(&copy);
                        start.elapsed().as_secs_f64() * 1e6 + cost.time(size).as_secs_f64() * 1e6
                    })
                    .collect();
                points.push((size as f64, median_us(samples)));
            }
            let (latency_us, bandwidth) = fit_line(&points);
            links.push(Link {
                src,
                dst,
                bandwidth,
                latency_us,
                bus: None,
            });
        }
    }
    let devices = specs
        .iter()
        .map(|s| spillway_placement::Device {
            name: s.device.to_string(),
            kind: device_kind(s.device),
            speed: s.speed,
            streams: s.lanes,
        })
        .collect();
    Ok(Topology {
        devices,
        links,
        buses: Vec::new(),
    })
}

/// Least-squares `time = latency + bytes / bandwidth`; returns (latency µs, bytes per µs).
fn fit_line(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let cov: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let var: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let slope = if var > 0.0 {
        (cov / var).max(1e-9)
    } else {
        1e-9
    };
    ((my - slope * mx).max(0.0), 1.0 / slope)
}

/// Where profiles are cached: `$SPILLWAY_CACHE_DIR` ([`crate::knobs::CACHE_DIR`]), else
/// `$HOME/.cache/spillway`.
pub fn cache_dir() -> PathBuf {
    crate::knobs::cache_dir()
        .or_else(|| crate::knobs::home_dir().map(|h| h.join(".cache/spillway")))
        .unwrap_or_else(|| std::env::temp_dir().join("spillway-cache"))
}

/// The cache file for a model hash, the graph as optimized (its op types: the same model gives
/// another graph at another optimization level or device set), device set and input shapes.
pub(crate) fn cache_path(
    model_hash: u64,
    graph: &Graph,
    devices: &Devices,
    shapes: &[Vec<usize>],
    threads: usize,
) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    model_hash.hash(&mut h);
    for node in &graph.nodes {
        (&node.domain, &node.op_type).hash(&mut h);
    }
    serde_json::to_string(devices)
        .unwrap_or_default()
        .hash(&mut h);
    shapes.hash(&mut h);
    threads.hash(&mut h);
    // Other kernels time otherwise (another GEMM instruction set, Winograd or not).
    graph.kernel_options.hash(&mut h);
    cache_dir().join(format!("profile-{:016x}.json", h.finish()))
}
