//! Seeded graph generators: HIOS random layered DAGs (the crate's reading of HIOS §V-A, and the
//! HIOS authors' own generator, [`hios_code`]), series-parallel and fork-join graphs, Inception-
//! and NASNet-like cells, RandWire and NASNet-A Large as IOS wires them, and random graphs with
//! the sizes of the papers' models. [`Family`] lists the families a study sweeps.

use serde::{Deserialize, Serialize};

use crate::graph::{Boundness, Concurrency, CostGraph, DeviceKind, Edge, Op, SlowdownModel};
use crate::rng::Rng;
use crate::topology::{Device, Topology};

mod families;
pub use families::{
    Family, ForkJoinParams, HiosCodeParams, NasNetParams, RandWireParams, fork_join, hios_code,
    hios_code_layers, nasnet_a, nvlink_topology, randwire, watts_strogatz,
};

/// How HIOS §V-A's transfer time is read: "a maximum of 0.1 ms and p of the execution time".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TransferRule {
    /// `max(0.1 ms, p · exec)` (default: the only reading under which the paper's p-sweep,
    /// Fig. 11, can move latencies as much as it reports).
    Max,
    /// `min(0.1 ms, p · exec)` (the transfer is then almost always 0.1 ms).
    Min,
}

/// Parameters of a HIOS §V-A random layered DAG.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LayeredParams {
    /// Operators (default 200).
    pub ops: usize,
    /// Layers (default 14).
    pub layers: usize,
    /// Edges (default 2 × ops); raised to the minimum a connected layering needs.
    pub edges: usize,
    /// Transfer-to-execution ratio p (default 0.8).
    pub p: f64,
    /// Transfer rule.
    pub rule: TransferRule,
}

impl Default for LayeredParams {
    fn default() -> Self {
        LayeredParams {
            ops: 200,
            layers: 14,
            edges: 400,
            p: 0.8,
            rule: TransferRule::Max,
        }
    }
}

/// HIOS §V-A random DAG. Operators are spread over `layers` layers (each non-empty, the rest
/// uniformly); every operator past the first layer gets one producer in the previous layer, then
/// random forward edges between distinct layers are added until `edges` (no duplicates).
/// Execution time uniform in 100–4000 µs on a GPU (no CPU cost); every outgoing edge carries the
/// transfer time of its producer (bytes = µs at bandwidth 1). Concurrency: the `Resource` model
/// with demand `0.3 + 0.7 · (exec − 100) / 3900` (our choice: the paper gives no t(S) rule;
/// small operators share a GPU well, the largest saturate it, as its Fig. 1 shows).
pub fn hios_layered(params: &LayeredParams, seed: u64) -> CostGraph {
    let mut rng = Rng::new(seed);
    let n = params.ops.max(1);
    let layers = params.layers.clamp(1, n);
    let mut layer: Vec<usize> = (0..n)
        .map(|i| if i < layers { i } else { rng.below(layers) })
        .collect();
    layer.sort_unstable();
    let mut ops = Vec::with_capacity(n);
    let mut transfer = Vec::with_capacity(n);
    for i in 0..n {
        let exec = rng.range_f64(100.0, 4000.0);
        let tr = match params.rule {
            TransferRule::Max => (params.p * exec).max(100.0),
            TransferRule::Min => (params.p * exec).min(100.0),
        };
        transfer.push(tr);
        ops.push(Op {
            name: format!("op{i}"),
            kind: format!("L{}", layer[i]),
            cost_us: [(DeviceKind::Gpu, exec)].into_iter().collect(),
            resource: 0.3 + 0.7 * (exec - 100.0) / 3900.0,
            bound: if rng.below(2) == 0 {
                Boundness::Memory
            } else {
                Boundness::Compute
            },
        });
    }
    let start: Vec<usize> = (0..=layers)
        .map(|l| layer.partition_point(|&x| x < l))
        .collect();
    let mut set = std::collections::HashSet::new();
    let mut edges = Vec::new();
    for v in start[1]..n {
        let l = layer[v];
        let u = start[l - 1] + rng.below(start[l] - start[l - 1]);
        set.insert((u, v));
        edges.push(Edge {
            src: u,
            dst: v,
            bytes: transfer[u],
        });
    }
    let max_pairs: usize = (0..n).map(|v| n - start[layer[v] + 1]).sum();
    let target = params.edges.min(max_pairs);
    while edges.len() < target {
        let u = rng.below(n);
        if start[layer[u] + 1] >= n {
            continue;
        }
        let v = start[layer[u] + 1] + rng.below(n - start[layer[u] + 1]);
        if set.insert((u, v)) {
            edges.push(Edge {
                src: u,
                dst: v,
                bytes: transfer[u],
            });
        }
    }
    CostGraph {
        ops,
        edges,
        concurrency: Concurrency {
            model: SlowdownModel::Resource,
            table: Vec::new(),
        },
    }
}

/// `m` GPUs with `streams` each, fully meshed at 1 byte/µs (HIOS's homogeneous NVLink box).
pub fn hios_topology(m: usize, streams: usize) -> Topology {
    Topology::gpus(m, streams)
}

/// A CPU (`lanes` workers) plus `gpus` GPUs; GPU↔CPU links over one shared PCIe bus
/// (`pcie` bytes/µs, 10 µs latency), GPU↔GPU direct links (`nvlink` bytes/µs, 5 µs).
pub fn cpu_gpu_topology(
    lanes: usize,
    gpus: usize,
    streams: usize,
    pcie: f64,
    nvlink: f64,
) -> Topology {
    let mut devices = vec![Device::cpu("cpu", lanes)];
    devices.extend((0..gpus).map(|i| Device::gpu(format!("gpu{i}"), streams)));
    let mut t = Topology {
        devices,
        links: Vec::new(),
        buses: vec![crate::topology::Bus {
            name: "pcie".into(),
        }],
    };
    let d = t.devices.len();
    for a in 0..d {
        for b in 0..d {
            if a == b {
                continue;
            }
            let host = a == 0 || b == 0;
            t.links.push(crate::topology::Link {
                src: a,
                dst: b,
                bandwidth: if host { pcie } else { nvlink },
                latency_us: if host { 10.0 } else { 5.0 },
                bus: if host { Some(0) } else { None },
            });
        }
    }
    t
}

fn dnn_op(rng: &mut Rng, name: String, kind: &str, gpu_us: f64) -> Op {
    let memory = matches!(kind, "Pool" | "Concat" | "Add" | "Relu" | "Identity");
    let cpu_ratio = if memory {
        rng.range_f64(1.0, 3.0)
    } else {
        rng.range_f64(4.0, 20.0)
    };
    Op {
        name,
        kind: kind.to_string(),
        cost_us: [
            (DeviceKind::Gpu, gpu_us),
            (DeviceKind::Cpu, gpu_us * cpu_ratio),
        ]
        .into_iter()
        .collect(),
        resource: if memory {
            rng.range_f64(0.1, 0.4)
        } else {
            rng.range_f64(0.3, 1.0)
        },
        bound: if memory {
            Boundness::Memory
        } else {
            Boundness::Compute
        },
    }
}

struct Builder {
    g: CostGraph,
    rng: Rng,
}

impl Builder {
    fn new(seed: u64) -> Self {
        Builder {
            g: CostGraph {
                concurrency: Concurrency {
                    model: SlowdownModel::Resource,
                    table: Vec::new(),
                },
                ..Default::default()
            },
            rng: Rng::new(seed),
        }
    }

    fn op(&mut self, kind: &str, inputs: &[usize]) -> usize {
        let us = match kind {
            "Conv" => self.rng.range_f64(40.0, 400.0),
            "SepConv" => self.rng.range_f64(30.0, 200.0),
            _ => self.rng.range_f64(5.0, 40.0),
        };
        let id = self.g.ops.len();
        let op = dnn_op(&mut self.rng, format!("{kind}{id}"), kind, us);
        self.g.ops.push(op);
        for &u in inputs {
            let bytes = self.rng.range_f64(1e4, 4e6);
            self.g.edges.push(Edge {
                src: u,
                dst: id,
                bytes,
            });
        }
        id
    }
}

/// `cells` stacked Inception-like cells: each has four branches (1×1; 1×1→3×3; 1×1→3×3→3×3;
/// pool→1×1) joined by a concat. Costs in µs, GPU and CPU, bytes per edge.
pub fn inception(cells: usize, seed: u64) -> CostGraph {
    let mut b = Builder::new(seed);
    let mut x = b.op("Conv", &[]);
    for _ in 0..cells {
        let a = b.op("Conv", &[x]);
        let c1 = b.op("Conv", &[x]);
        let c2 = b.op("Conv", &[c1]);
        let d1 = b.op("Conv", &[x]);
        let d2 = b.op("Conv", &[d1]);
        let d3 = b.op("Conv", &[d2]);
        let p = b.op("Pool", &[x]);
        let p2 = b.op("Conv", &[p]);
        x = b.op("Concat", &[a, c2, d3, p2]);
    }
    b.g
}

/// `cells` stacked NASNet-A-like cells: two inputs (previous two cell outputs), five blocks each
/// adding two operations (separable conv, pool or identity) of earlier hidden states, and a
/// concat of the blocks.
pub fn nasnet(cells: usize, seed: u64) -> CostGraph {
    let mut b = Builder::new(seed);
    let mut prev2 = b.op("Conv", &[]);
    let mut prev = b.op("Conv", &[prev2]);
    for _ in 0..cells {
        let mut hidden = vec![prev2, prev];
        let mut blocks = Vec::new();
        for _ in 0..5 {
            let mut ins = Vec::new();
            for _ in 0..2 {
                let src = hidden[b.rng.below(hidden.len())];
                let kind = ["SepConv", "SepConv", "Pool", "Identity"][b.rng.below(4)];
                ins.push(b.op(kind, &[src]));
            }
            let add = b.op("Add", &ins);
            hidden.push(add);
            blocks.push(add);
        }
        let out = b.op("Concat", &blocks);
        prev2 = prev;
        prev = out;
    }
    b.g
}

/// `n` operators as a random series-parallel graph (recursive series or parallel composition).
pub fn series_parallel(n: usize, seed: u64) -> CostGraph {
    let mut b = Builder::new(seed);
    fn comp(b: &mut Builder, n: usize, inputs: &[usize]) -> Vec<usize> {
        if n <= 1 {
            let kind = if b.rng.below(3) == 0 { "Relu" } else { "Conv" };
            return vec![b.op(kind, inputs)];
        }
        let a = 1 + b.rng.below(n - 1);
        if b.rng.below(2) == 0 {
            let first = comp(b, a, inputs);
            comp(b, n - a, &first)
        } else {
            let mut out = comp(b, a, inputs);
            out.extend(comp(b, n - a, inputs));
            out
        }
    }
    comp(&mut b, n.max(1), &[]);
    b.g
}

/// The models the papers measure, by their operator and edge counts (LIOS §V, HIOS §VI).
pub const PAPER_MODELS: [(&str, usize, usize); 4] = [
    ("squeezenet", 50, 65),
    ("inception_v3", 119, 153),
    ("randwire", 120, 260),
    ("nasnet_a", 374, 576),
];

/// A random layered DAG with exactly `ops` operators and `edges` edges (layers ≈ ops / 4), with
/// DNN-like GPU and CPU costs, resource demands and bytes.
pub fn sized(ops: usize, edges: usize, seed: u64) -> CostGraph {
    let params = LayeredParams {
        ops,
        layers: (ops / 4).max(2),
        edges,
        p: 0.8,
        rule: TransferRule::Max,
    };
    let mut g = hios_layered(&params, seed);
    let mut rng = Rng::new(seed ^ 0xabcd);
    for (i, op) in g.ops.iter_mut().enumerate() {
        let kind = ["Conv", "Conv", "SepConv", "Pool", "Add", "Concat"][rng.below(6)];
        let us = if kind.contains("Conv") {
            rng.range_f64(30.0, 500.0)
        } else {
            rng.range_f64(5.0, 40.0)
        };
        *op = dnn_op(&mut rng, format!("{kind}{i}"), kind, us);
    }
    for e in &mut g.edges {
        e.bytes = rng.range_f64(1e4, 4e6);
    }
    g
}
