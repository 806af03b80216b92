//! The cost graph: a DAG of operators with measured costs.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::{PlacementError, Result, check_nonneg};

/// The kind of a device; costs are given per kind and scaled by each device's speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// A host CPU (its lanes are worker threads).
    Cpu,
    /// A GPU (its lanes are streams).
    Gpu,
}

/// Whether an operator is limited by memory bandwidth or by arithmetic (Opara §III-C).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Boundness {
    /// Limited by memory bandwidth.
    Memory,
    /// Limited by arithmetic throughput.
    #[default]
    Compute,
}

fn one() -> f64 {
    1.0
}

/// One operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// Display name.
    #[serde(default)]
    pub name: String,
    /// Operator type (e.g. `Conv`); used for colours in the Gantt chart.
    #[serde(default)]
    pub kind: String,
    /// Execution time in µs when run alone, per device kind, on a device of speed 1.
    /// A missing kind means the operator cannot run there.
    pub cost_us: BTreeMap<DeviceKind, f64>,
    /// Fraction of a GPU the operator occupies when alone (Opara's resource demand; 1 = saturates).
    #[serde(default = "one")]
    pub resource: f64,
    /// Memory- or compute-bound (Opara Alg. 2).
    #[serde(default)]
    pub bound: Boundness,
}

impl Op {
    /// An operator with one cost per kind.
    pub fn new(name: impl Into<String>, costs: &[(DeviceKind, f64)]) -> Self {
        Op {
            name: name.into(),
            kind: String::new(),
            cost_us: costs.iter().copied().collect(),
            resource: 1.0,
            bound: Boundness::Compute,
        }
    }

    /// An operator that only runs on GPUs.
    pub fn gpu(name: impl Into<String>, us: f64) -> Self {
        Op::new(name, &[(DeviceKind::Gpu, us)])
    }
}

/// A data dependency: `dst` reads `bytes` produced by `src`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// Producer.
    pub src: usize,
    /// Consumer.
    pub dst: usize,
    /// Size of the tensor moved if the two run on different devices.
    #[serde(default)]
    pub bytes: f64,
}

/// A measured concurrent time t(S) (HIOS §III-A): the set `ops` started together on one GPU
/// finishes after `time_us` (on a device of speed 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConcurrentSet {
    /// Operator indices.
    pub ops: Vec<usize>,
    /// Time until the last of them finishes.
    pub time_us: f64,
}

/// How operators sharing one GPU slow each other down when no table entry applies.
///
/// The simulator runs every GPU as processor sharing: all operators running on a GPU progress
/// at one common rate `1 / slowdown(S)`, recomputed whenever the running set `S` changes.
/// CPU lanes never slow each other down.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "model")]
pub enum SlowdownModel {
    /// Streams are independent (the LIOS and HIOS worked examples).
    #[default]
    None,
    /// Slowdown `max(1, Σ resource)`: operators overlap freely until the GPU is full, then share it.
    Resource,
    /// Slowdown `1 + per_extra · (|S| − 1)`.
    Linear {
        /// Added slowdown per extra co-running operator.
        per_extra: f64,
    },
}

/// Concurrency costs: a measured table, else a model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Concurrency {
    /// Model for sets not in the table.
    #[serde(default)]
    pub model: SlowdownModel,
    /// Measured t(S) entries.
    #[serde(default)]
    pub table: Vec<ConcurrentSet>,
}

/// A DAG of operators with per-device-kind costs and bytes per edge. Op ids are `0..ops.len()`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CostGraph {
    /// Operators.
    pub ops: Vec<Op>,
    /// Dependencies.
    pub edges: Vec<Edge>,
    /// Concurrency costs on a GPU.
    #[serde(default)]
    pub concurrency: Concurrency,
}

impl CostGraph {
    /// Number of operators.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the graph has no operator.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Validates the graph and builds the adjacency view every algorithm uses.
    pub fn dag(&self) -> Result<Dag> {
        Dag::new(self)
    }

    /// JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Parses and validates JSON text.
    pub fn from_json(s: &str) -> Result<Self> {
        let g: CostGraph = serde_json::from_str(s)
            .map_err(|e| PlacementError::InvalidValue(format!("cost graph JSON: {e}")))?;
        g.dag()?;
        Ok(g)
    }
}

/// A validated adjacency view of a [`CostGraph`].
#[derive(Debug, Clone)]
pub struct Dag {
    /// Number of operators.
    pub n: usize,
    /// `preds[v]`: (producer, edge index).
    pub preds: Vec<Vec<(usize, usize)>>,
    /// `succs[u]`: (consumer, edge index).
    pub succs: Vec<Vec<(usize, usize)>>,
    /// A topological order (Kahn, smallest id first).
    pub topo: Vec<usize>,
    /// Measured t(S), keyed by the sorted set.
    pub table: HashMap<Vec<usize>, f64>,
}

impl Dag {
    fn new(g: &CostGraph) -> Result<Dag> {
        let n = g.ops.len();
        for (i, op) in g.ops.iter().enumerate() {
            if op.cost_us.is_empty() {
                return Err(PlacementError::InvalidValue(format!(
                    "operator {i} has no cost"
                )));
            }
            for (k, c) in &op.cost_us {
                check_nonneg(*c, || format!("operator {i} cost on {k:?}"))?;
            }
            check_nonneg(op.resource, || format!("operator {i} resource"))?;
        }
        let mut preds = vec![Vec::new(); n];
        let mut succs = vec![Vec::new(); n];
        for (ei, e) in g.edges.iter().enumerate() {
            for op in [e.src, e.dst] {
                if op >= n {
                    return Err(PlacementError::DanglingEdge { edge: ei, op, n });
                }
            }
            if e.src == e.dst {
                return Err(PlacementError::Cycle { op: e.src });
            }
            check_nonneg(e.bytes, || format!("edge {ei} bytes"))?;
            preds[e.dst].push((e.src, ei));
            succs[e.src].push((e.dst, ei));
        }
        let topo = kahn(n, &preds, &succs)?;
        let mut table = HashMap::new();
        for (i, s) in g.concurrency.table.iter().enumerate() {
            check_nonneg(s.time_us, || format!("concurrency table entry {i}"))?;
            let mut key = s.ops.clone();
            key.sort_unstable();
            key.dedup();
            if let Some(&op) = key.iter().find(|&&o| o >= n) {
                return Err(PlacementError::InvalidValue(format!(
                    "concurrency table entry {i} names operator {op} of {n}"
                )));
            }
            table.insert(key, s.time_us);
        }
        if let SlowdownModel::Linear { per_extra } = g.concurrency.model {
            check_nonneg(per_extra, || "linear slowdown per_extra".into())?;
        }
        Ok(Dag {
            n,
            preds,
            succs,
            topo,
            table,
        })
    }

    /// Entry operators (no predecessor).
    pub fn sources(&self) -> Vec<usize> {
        (0..self.n).filter(|&v| self.preds[v].is_empty()).collect()
    }

    /// Exit operators (no successor).
    pub fn sinks(&self) -> Vec<usize> {
        (0..self.n).filter(|&v| self.succs[v].is_empty()).collect()
    }

    /// Transitive reachability as bitsets: `reach[u]` has bit `v` when a path `u → v` exists.
    pub fn reachability(&self) -> Vec<Vec<u64>> {
        let words = self.n.div_ceil(64);
        let mut reach = vec![vec![0u64; words]; self.n];
        for &u in self.topo.iter().rev() {
            let mut row = vec![0u64; words];
            for &(v, _) in &self.succs[u] {
                row[v / 64] |= 1 << (v % 64);
                for (w, r) in row.iter_mut().zip(&reach[v]) {
                    *w |= r;
                }
            }
            reach[u] = row;
        }
        reach
    }
}

/// Tests bit `v` of a reachability row.
pub fn reaches(row: &[u64], v: usize) -> bool {
    row.get(v / 64).is_some_and(|w| w >> (v % 64) & 1 == 1)
}

fn kahn(
    n: usize,
    preds: &[Vec<(usize, usize)>],
    succs: &[Vec<(usize, usize)>],
) -> Result<Vec<usize>> {
    let mut indeg: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..n)
        .filter(|&v| indeg[v] == 0)
        .map(std::cmp::Reverse)
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse(u)) = heap.pop() {
        order.push(u);
        for &(v, _) in &succs[u] {
            indeg[v] -= 1;
            if indeg[v] == 0 {
                heap.push(std::cmp::Reverse(v));
            }
        }
    }
    if order.len() < n {
        let op = (0..n).find(|&v| indeg[v] > 0).unwrap_or(0);
        return Err(PlacementError::Cycle { op });
    }
    Ok(order)
}
