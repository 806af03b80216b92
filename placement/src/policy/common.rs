//! Shared pieces of the policies: a context with precomputed costs, ranks, list scheduling.

use crate::concurrency::GraphConcurrency;
use crate::error::{PlacementError, Result};
use crate::graph::{CostGraph, Dag, DeviceKind};
use crate::schedule::Schedule;
use crate::sim::{
    OpTiming, SimResult, dispatch, dispatch_timed, makespan_with, simulate_with, timed_with,
};
use crate::topology::{TopoView, Topology, op_time};

/// Validated inputs with per-(op, device) times.
pub struct Ctx<'a> {
    /// The graph.
    pub g: &'a CostGraph,
    /// Its adjacency view.
    pub dag: Dag,
    /// The topology.
    pub t: &'a Topology,
    /// Its link view.
    pub view: TopoView,
    /// `time[v][d]`, `INFINITY` where unsupported.
    pub time: Vec<Vec<f64>>,
}

impl<'a> Ctx<'a> {
    /// Validates both inputs.
    pub fn new(g: &'a CostGraph, t: &'a Topology) -> Result<Self> {
        let dag = g.dag()?;
        let view = t.view()?;
        let time: Vec<Vec<f64>> = (0..g.ops.len())
            .map(|v| {
                (0..t.devices.len())
                    .map(|d| op_time(g, t, v, d).unwrap_or(f64::INFINITY))
                    .collect()
            })
            .collect();
        for (v, row) in time.iter().enumerate() {
            if row.iter().all(|x| !x.is_finite()) {
                return Err(PlacementError::InvalidValue(format!(
                    "operator {v} runs on no device of the topology"
                )));
            }
        }
        Ok(Ctx {
            g,
            dag,
            t,
            view,
            time,
        })
    }

    /// Number of operators.
    pub fn n(&self) -> usize {
        self.g.ops.len()
    }

    /// Number of devices.
    pub fn d(&self) -> usize {
        self.t.devices.len()
    }

    /// Copy time of edge `e` from device `a` to `b` (`INFINITY` without a link).
    pub fn comm(&self, e: usize, a: usize, b: usize) -> f64 {
        self.view
            .copy_us(self.t, a, b, self.g.edges[e].bytes)
            .unwrap_or(f64::INFINITY)
    }

    /// Mean copy time of edge `e` over ordered pairs of distinct linked devices (0 for one device).
    pub fn mean_comm(&self, e: usize) -> f64 {
        let (mut s, mut k) = (0.0, 0usize);
        for a in 0..self.d() {
            for b in 0..self.d() {
                if a != b && self.view.link(a, b).is_some() {
                    s += self.comm(e, a, b);
                    k += 1;
                }
            }
        }
        if k == 0 { 0.0 } else { s / k as f64 }
    }

    /// Mean time of `v` over the devices that can run it.
    pub fn mean_time(&self, v: usize) -> f64 {
        let f: Vec<f64> = self.time[v]
            .iter()
            .copied()
            .filter(|x| x.is_finite())
            .collect();
        f.iter().sum::<f64>() / f.len().max(1) as f64
    }

    /// The device that runs the whole graph alone fastest (ties: lowest id), if any can.
    /// With `gpu_first`, GPUs are preferred when one can run everything.
    pub fn best_single_device(&self, gpu_first: bool) -> Result<usize> {
        let total = |d: usize| (0..self.n()).map(|v| self.time[v][d]).sum::<f64>();
        let mut cands: Vec<usize> = (0..self.d()).filter(|&d| total(d).is_finite()).collect();
        if gpu_first
            && cands
                .iter()
                .any(|&d| self.t.devices[d].kind == DeviceKind::Gpu)
        {
            cands.retain(|&d| self.t.devices[d].kind == DeviceKind::Gpu);
        }
        cands
            .into_iter()
            .min_by(|&a, &b| total(a).total_cmp(&total(b)).then(a.cmp(&b)))
            .ok_or(PlacementError::NotApplicable {
                policy: "single-device",
                reason: "no device runs every operator".into(),
            })
    }

    /// Simulates a schedule with the graph's model.
    pub fn simulate(&self, s: &Schedule) -> Result<SimResult> {
        let model = GraphConcurrency::new(self.g, &self.dag);
        simulate_with(self.g, &self.dag, self.t, &self.view, s, &model)
    }

    /// Makespan of a schedule.
    pub fn makespan(&self, s: &Schedule) -> Result<f64> {
        let model = GraphConcurrency::new(self.g, &self.dag);
        makespan_with(self.g, &self.dag, self.t, &self.view, s, &model)
    }

    /// Each operator on its `device`, launched by a work-conserving dispatcher that prefers
    /// earlier positions of the topological sequence `seq` ([`dispatch`]): the makespan and the
    /// schedule with the streams and start order the dispatcher chose.
    pub fn dispatch_on_devices(
        &self,
        policy: &str,
        device: &[usize],
        seq: &[usize],
    ) -> Result<(f64, Schedule)> {
        let open = Schedule::from_sequence(policy, device, &vec![0; self.n()], seq);
        let model = GraphConcurrency::new(self.g, &self.dag);
        dispatch(self.g, &self.dag, self.t, &self.view, &open, &model)
    }

    /// Makespan and each operator's timing of a schedule.
    pub(crate) fn timed(&self, s: &Schedule) -> Result<(f64, Vec<OpTiming>)> {
        let model = GraphConcurrency::new(self.g, &self.dag);
        timed_with(self.g, &self.dag, self.t, &self.view, s, &model)
    }

    /// [`Ctx::dispatch_on_devices`] with each operator's simulated timing.
    pub(crate) fn dispatch_timed(
        &self,
        policy: &str,
        device: &[usize],
        seq: &[usize],
    ) -> Result<(f64, Schedule, Vec<OpTiming>)> {
        let open = Schedule::from_sequence(policy, device, &vec![0; self.n()], seq);
        let model = GraphConcurrency::new(self.g, &self.dag);
        dispatch_timed(self.g, &self.dag, self.t, &self.view, &open, &model)
    }

    /// HEFT's upward rank with mean costs: `rank(v) = w̄(v) + max_succ (c̄(v,s) + rank(s))`.
    pub fn upward_rank(&self) -> Vec<f64> {
        let mut rank = vec![0.0; self.n()];
        for &v in self.dag.topo.iter().rev() {
            let tail = self.dag.succs[v]
                .iter()
                .map(|&(s, e)| self.mean_comm(e) + rank[s])
                .fold(0.0, f64::max);
            rank[v] = self.mean_time(v) + tail;
        }
        rank
    }

    /// Downward rank with mean costs: `rank(v) = max_pred (rank(u) + w̄(u) + c̄(u,v))`, 0 at
    /// entries.
    pub fn downward_rank(&self) -> Vec<f64> {
        let mut rank = vec![0.0; self.n()];
        for &v in &self.dag.topo {
            rank[v] = self.dag.preds[v]
                .iter()
                .map(|&(u, e)| rank[u] + self.mean_time(u) + self.mean_comm(e))
                .fold(0.0, f64::max);
        }
        rank
    }

    /// A topological order that always takes the ready operator of highest `prio`
    /// (ties: lowest id).
    pub fn priority_order(&self, prio: &[f64]) -> Vec<usize> {
        let n = self.n();
        let mut indeg: Vec<usize> = self.dag.preds.iter().map(Vec::len).collect();
        let mut ready: Vec<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
        let mut out = Vec::with_capacity(n);
        while !ready.is_empty() {
            let (i, _) = ready
                .iter()
                .enumerate()
                .max_by(|a, b| prio[*a.1].total_cmp(&prio[*b.1]).then(b.1.cmp(a.1)))
                .unwrap_or((0, &0));
            let v = ready.swap_remove(i);
            out.push(v);
            for &(s, _) in &self.dag.succs[v] {
                indeg[s] -= 1;
                if indeg[s] == 0 {
                    ready.push(s);
                }
            }
        }
        out
    }

    /// Given each operator's device and a topological launch sequence, puts each operator on the
    /// stream of its device that frees first (estimate: inputs arrive at producer finish plus
    /// copy time; no slowdown) and returns the schedule.
    pub fn list_on_devices(&self, policy: &str, device: &[usize], seq: &[usize]) -> Schedule {
        let mut free: Vec<Vec<f64>> = self
            .t
            .devices
            .iter()
            .map(|d| vec![0.0; d.streams])
            .collect();
        let mut fin = vec![0.0; self.n()];
        let mut stream = vec![0; self.n()];
        for &v in seq {
            let d = device[v];
            let ready = self.dag.preds[v]
                .iter()
                .map(|&(u, e)| {
                    fin[u]
                        + if device[u] == d {
                            0.0
                        } else {
                            self.comm(e, device[u], d)
                        }
                })
                .fold(0.0, f64::max);
            let (s, f) = free[d]
                .iter()
                .enumerate()
                .min_by(|a, b| {
                    a.1.max(ready)
                        .total_cmp(&b.1.max(ready))
                        .then(a.0.cmp(&b.0))
                })
                .map(|(s, &f)| (s, f))
                .unwrap_or((0, 0.0));
            let start = f.max(ready);
            fin[v] = start + self.time[v][d];
            free[d][s] = fin[v];
            stream[v] = s;
        }
        Schedule::from_sequence(policy, device, &stream, seq)
    }
}
