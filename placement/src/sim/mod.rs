//! The discrete-event simulator every policy is judged by.
//!
//! Semantics (a valid list-schedule evaluation):
//! * Each stream (lane) of a device runs its operators one at a time in launch order.
//! * An operator starts at the first instant its stream is free and every input has *arrived* on
//!   its device: a producer on the same device delivers at its finish time; a producer elsewhere
//!   delivers when the copy of its output to this device finishes.
//! * A copy is requested when its producer finishes, once per (producer, destination device),
//!   moving the largest edge's bytes; it takes `latency + bytes / bandwidth` and copies are
//!   serialized, FIFO, per link direction, or per bus for links on a shared bus.
//! * Operators running at once on a GPU share it: all progress at rate `1 / slowdown(S)` of the
//!   [`ConcurrencyModel`], recomputed whenever the running set `S` changes. CPU lanes are
//!   independent.
//! * Devices whose operators carry stages run them the HIOS way (§III-A): stages in index order;
//!   a stage starts when the previous stage on the device is done and every input of every
//!   operator in it has arrived; all its operators start together and are released together
//!   after t(S) (measured table entry, else processor sharing under the model).
//!
//! Events are processed in time order, so no operator is started from a clock other than the
//! arrival of its own inputs.
//!
//! [`dispatch`] runs the same model with the streams left open: a device starts, whenever one
//! of its streams is free, the operator of earliest launch position among those whose inputs
//! have arrived (a work-conserving dispatcher), and the streams and start order it used come
//! back as a fixed schedule, which [`simulate`] replays to the same timings.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use crate::bound::lower_bound;
use crate::concurrency::{ConcurrencyModel, GraphConcurrency};
use crate::error::{PlacementError, Result};
use crate::graph::{CostGraph, Dag};
use crate::schedule::Schedule;
use crate::topology::{TopoView, Topology, op_time};

mod report;

pub use report::{CopyTiming, DeviceStats, OpTiming, SimResult};

/// Simulates `s` with the graph's own concurrency model.
pub fn simulate(g: &CostGraph, t: &Topology, s: &Schedule) -> Result<SimResult> {
    let dag = g.dag()?;
    let view = t.view()?;
    let model = GraphConcurrency::new(g, &dag);
    simulate_with(g, &dag, t, &view, s, &model)
}

/// Simulates `s` with a given concurrency model (the graph's table still sets stage times).
pub fn simulate_with(
    g: &CostGraph,
    dag: &Dag,
    t: &Topology,
    view: &TopoView,
    s: &Schedule,
    model: &dyn ConcurrencyModel,
) -> Result<SimResult> {
    let sim = Sim::simulate(g, dag, t, view, s, model, false)?;
    Ok(sim.finish(lower_bound(g, dag, t)))
}

/// The makespan of `s` alone (no statistics, no lower bound): what a search evaluates.
pub(crate) fn makespan_with(
    g: &CostGraph,
    dag: &Dag,
    t: &Topology,
    view: &TopoView,
    s: &Schedule,
    model: &dyn ConcurrencyModel,
) -> Result<f64> {
    Ok(Sim::simulate(g, dag, t, view, s, model, false)?.makespan())
}

/// The makespan of `s` and each operator's timing (no statistics, no lower bound).
pub(crate) fn timed_with(
    g: &CostGraph,
    dag: &Dag,
    t: &Topology,
    view: &TopoView,
    s: &Schedule,
    model: &dyn ConcurrencyModel,
) -> Result<(f64, Vec<OpTiming>)> {
    let sim = Sim::simulate(g, dag, t, view, s, model, false)?;
    Ok((sim.makespan(), sim.timing))
}

/// Simulates `s`'s devices and launch order with a work-conserving dispatcher in place of its
/// streams (see the module doc; stages and streams of `s` are ignored): the makespan and the
/// schedule that fixes the streams and start order the dispatcher chose. Replaying that
/// schedule with [`simulate`] gives the same timings, except that copies of one output to
/// several devices over a shared bus may queue in another order.
pub fn dispatch(
    g: &CostGraph,
    dag: &Dag,
    t: &Topology,
    view: &TopoView,
    s: &Schedule,
    model: &dyn ConcurrencyModel,
) -> Result<(f64, Schedule)> {
    dispatch_timed(g, dag, t, view, s, model).map(|(m, s, _)| (m, s))
}

/// [`dispatch`] with each operator's timing, for searches that follow the critical path.
pub(crate) fn dispatch_timed(
    g: &CostGraph,
    dag: &Dag,
    t: &Topology,
    view: &TopoView,
    s: &Schedule,
    model: &dyn ConcurrencyModel,
) -> Result<(f64, Schedule, Vec<OpTiming>)> {
    let mut open = s.clone();
    for p in &mut open.ops {
        (p.stream, p.stage) = (0, None);
    }
    let sim = Sim::simulate(g, dag, t, view, &open, model, true)?;
    let mut seq: Vec<usize> = (0..g.ops.len()).collect();
    seq.sort_by(|&a, &b| {
        let (x, y) = (&sim.timing[a], &sim.timing[b]);
        x.start
            .total_cmp(&y.start)
            .then(open.ops[a].order.cmp(&open.ops[b].order))
    });
    let device: Vec<usize> = open.ops.iter().map(|p| p.device).collect();
    let stream: Vec<usize> = sim.timing.iter().map(|x| x.stream).collect();
    let fixed = Schedule::from_sequence(&s.policy, &device, &stream, &seq);
    Ok((sim.makespan(), fixed, sim.timing))
}

#[derive(Clone, Copy)]
enum Kind {
    Op { op: usize, ver: u64 },
    Stage { dev: usize },
    Copy { copy: usize },
}

struct Ev {
    t: f64,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Ev {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Ev {}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ev {
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.total_cmp(&self.t).then(o.seq.cmp(&self.seq))
    }
}

#[derive(Default)]
struct Dev {
    staged: bool,
    streams: Vec<(Vec<usize>, usize, bool)>,
    stages: Vec<Vec<usize>>,
    next_stage: usize,
    stage_busy: bool,
    running: Vec<(usize, f64)>,
    last_t: f64,
    slow: f64,
    ver: u64,
    busy_since: Option<f64>,
    busy: f64,
    copy_in: f64,
    /// Dispatch mode: operators whose inputs have arrived, earliest launch position first.
    ready: BinaryHeap<Reverse<(usize, usize)>>,
}

struct Sim<'a> {
    g: &'a CostGraph,
    dag: &'a Dag,
    t: &'a Topology,
    view: &'a TopoView,
    s: &'a Schedule,
    model: &'a dyn ConcurrencyModel,
    alone: Vec<f64>,
    pending: Vec<usize>,
    timing: Vec<OpTiming>,
    done: usize,
    devs: Vec<Dev>,
    heap: BinaryHeap<Ev>,
    seq: u64,
    copies: Vec<CopyTiming>,
    queues: Vec<(VecDeque<usize>, bool)>,
    now: f64,
    /// Streams chosen at run time ([`dispatch`]) instead of the schedule's.
    dispatching: bool,
}

impl<'a> Sim<'a> {
    /// Validates `s` and simulates it to the end (with streams chosen at run time when
    /// `dispatching`).
    fn simulate(
        g: &'a CostGraph,
        dag: &'a Dag,
        t: &'a Topology,
        view: &'a TopoView,
        s: &'a Schedule,
        model: &'a dyn ConcurrencyModel,
        dispatching: bool,
    ) -> Result<Self> {
        s.validate(g, dag, t)?;
        let n = g.ops.len();
        let mut alone = vec![0.0; n];
        let mut devs: Vec<Dev> = t
            .devices
            .iter()
            .map(|d| Dev {
                streams: vec![(Vec::new(), 0, false); d.streams],
                slow: 1.0,
                ..Dev::default()
            })
            .collect();
        let mut staged: Vec<Vec<(usize, usize)>> = vec![Vec::new(); t.devices.len()];
        for v in s.sequence() {
            let p = s.ops[v];
            alone[v] = op_time(g, t, v, p.device).ok_or(PlacementError::Unsupported {
                op: v,
                device: p.device,
                kind: t.devices[p.device].kind,
            })?;
            match p.stage {
                Some(st) => staged[p.device].push((st, v)),
                None if dispatching => {}
                None => devs[p.device].streams[p.stream].0.push(v),
            }
        }
        for (d, mut list) in staged.into_iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            list.sort();
            let dev = &mut devs[d];
            dev.staged = true;
            for (st, v) in list {
                match dev.stages.last_mut() {
                    Some(cur) if s.ops[cur[0]].stage == Some(st) => cur.push(v),
                    _ => dev.stages.push(vec![v]),
                }
            }
        }
        let timing = (0..n)
            .map(|v| OpTiming {
                device: s.ops[v].device,
                stream: s.ops[v].stream,
                ..OpTiming::default()
            })
            .collect();
        let mut sim = Sim {
            g,
            dag,
            t,
            view,
            s,
            model,
            alone,
            pending: dag.preds.iter().map(Vec::len).collect(),
            timing,
            done: 0,
            devs,
            heap: BinaryHeap::new(),
            seq: 0,
            copies: Vec::new(),
            queues: vec![(VecDeque::new(), false); view.queues],
            now: 0.0,
            dispatching,
        };
        sim.run()?;
        Ok(sim)
    }

    fn push(&mut self, t: f64, kind: Kind) {
        self.seq += 1;
        self.heap.push(Ev {
            t,
            seq: self.seq,
            kind,
        });
    }

    fn run(&mut self) -> Result<()> {
        if self.dispatching {
            for v in 0..self.g.ops.len() {
                if self.pending[v] == 0 {
                    let d = self.s.ops[v].device;
                    self.devs[d].ready.push(Reverse((self.s.ops[v].order, v)));
                }
            }
        }
        for d in 0..self.devs.len() {
            self.try_device(d);
        }
        while let Some(ev) = self.heap.pop() {
            self.now = ev.t;
            match ev.kind {
                Kind::Op { op, ver } => {
                    let d = self.s.ops[op].device;
                    if self.devs[d].ver != ver || !self.devs[d].running.iter().any(|x| x.0 == op) {
                        continue;
                    }
                    self.advance(d);
                    self.devs[d].running.retain(|x| x.0 != op);
                    self.reshare(d, None);
                    self.timing[op].finish = self.now;
                    let st = self.timing[op].stream;
                    self.devs[d].streams[st].2 = false;
                    self.produced(op)?;
                    self.try_device(d);
                }
                Kind::Stage { dev } => {
                    let ops = self.devs[dev].stages[self.devs[dev].next_stage].clone();
                    self.devs[dev].next_stage += 1;
                    self.devs[dev].stage_busy = false;
                    self.mark_idle(dev);
                    for &v in &ops {
                        self.timing[v].finish = self.now;
                    }
                    for &v in &ops {
                        self.produced(v)?;
                    }
                    self.try_device(dev);
                }
                Kind::Copy { copy } => self.copy_done(copy),
            }
        }
        if self.done < self.g.ops.len() {
            let stuck = (0..self.g.ops.len()).find(|&v| self.pending[v] > 0);
            return Err(PlacementError::Deadlock(format!(
                "{} of {} operators ran; operator {:?} never got its inputs (stream or stage order waits on itself)",
                self.done,
                self.g.ops.len(),
                stuck
            )));
        }
        Ok(())
    }

    fn advance(&mut self, d: usize) {
        let now = self.now;
        let dev = &mut self.devs[d];
        let dt = (now - dev.last_t) / dev.slow;
        for r in &mut dev.running {
            r.1 = (r.1 - dt).max(0.0);
        }
        dev.last_t = now;
    }

    /// Recomputes the shared rate of device `d` after its running set changed; `started` is a
    /// newly started operator needing a finish event.
    fn reshare(&mut self, d: usize, started: Option<usize>) {
        let ids: Vec<usize> = self.devs[d].running.iter().map(|x| x.0).collect();
        let alone: Vec<f64> = ids.iter().map(|&v| self.alone[v]).collect();
        let slow = if ids.len() <= 1 {
            1.0
        } else {
            self.model
                .slowdown(&self.t.devices[d], &ids, &alone)
                .max(1.0)
        };
        let now = self.now;
        if slow == self.devs[d].slow {
            if let Some(v) = started {
                let rem = self.devs[d]
                    .running
                    .iter()
                    .find(|x| x.0 == v)
                    .map_or(0.0, |x| x.1);
                let ver = self.devs[d].ver;
                self.push(now + rem * slow, Kind::Op { op: v, ver });
            }
        } else {
            let dev = &mut self.devs[d];
            dev.slow = slow;
            dev.ver += 1;
            let ver = dev.ver;
            let evs: Vec<(usize, f64)> = dev.running.clone();
            for (v, rem) in evs {
                self.push(now + rem * slow, Kind::Op { op: v, ver });
            }
        }
        if self.devs[d].running.is_empty() {
            self.mark_idle(d);
        }
    }

    fn mark_busy(&mut self, d: usize) {
        let now = self.now;
        self.devs[d].busy_since.get_or_insert(now);
    }

    fn mark_idle(&mut self, d: usize) {
        if let Some(s) = self.devs[d].busy_since.take() {
            self.devs[d].busy += self.now - s;
        }
    }

    fn try_device(&mut self, d: usize) {
        if self.devs[d].staged {
            self.try_stage(d);
        } else if self.dispatching {
            self.try_dispatch(d);
        } else {
            for st in 0..self.devs[d].streams.len() {
                self.try_stream(d, st);
            }
        }
    }

    fn try_stream(&mut self, d: usize, st: usize) {
        let (ref list, next, busy) = self.devs[d].streams[st];
        let Some(&v) = list.get(next) else { return };
        if busy || self.pending[v] > 0 {
            return;
        }
        self.devs[d].streams[st].1 += 1;
        self.start(d, st, v);
    }

    /// Dispatch mode: fills the free streams of `d`, lowest first, with its arrived operators.
    fn try_dispatch(&mut self, d: usize) {
        while let Some(st) = self.devs[d].streams.iter().position(|x| !x.2) {
            let Some(Reverse((_, v))) = self.devs[d].ready.pop() else {
                return;
            };
            self.timing[v].stream = st;
            self.start(d, st, v);
        }
    }

    /// Starts `v` on stream `st` of `d` now.
    fn start(&mut self, d: usize, st: usize, v: usize) {
        self.devs[d].streams[st].2 = true;
        self.timing[v].start = self.now;
        self.advance(d);
        self.mark_busy(d);
        self.devs[d].running.push((v, self.alone[v]));
        self.reshare(d, Some(v));
    }

    fn try_stage(&mut self, d: usize) {
        let dev = &self.devs[d];
        if dev.stage_busy {
            return;
        }
        let Some(ops) = dev.stages.get(dev.next_stage) else {
            return;
        };
        if ops.iter().any(|&v| self.pending[v] > 0) {
            return;
        }
        let ops = ops.clone();
        let alone: Vec<f64> = ops.iter().map(|&v| self.alone[v]).collect();
        let model = GraphConcurrency::new(self.g, self.dag);
        let dur = model.stage_time(&self.t.devices[d], &ops, &alone);
        for (i, &v) in ops.iter().enumerate() {
            self.timing[v].start = self.now;
            self.timing[v].stream = i;
        }
        self.devs[d].stage_busy = true;
        self.mark_busy(d);
        let now = self.now;
        self.push(now + dur, Kind::Stage { dev: d });
    }

    fn arrived(&mut self, v: usize) {
        self.pending[v] -= 1;
        if self.pending[v] == 0 {
            self.timing[v].ready = self.now;
            let d = self.s.ops[v].device;
            if self.devs[d].staged {
                self.try_stage(d);
            } else if self.dispatching {
                self.devs[d].ready.push(Reverse((self.s.ops[v].order, v)));
                self.try_dispatch(d);
            } else {
                self.try_stream(d, self.s.ops[v].stream);
            }
        }
    }

    fn produced(&mut self, u: usize) -> Result<()> {
        self.done += 1;
        let du = self.s.ops[u].device;
        let mut remote: Vec<(usize, usize, f64)> = Vec::new();
        for &(v, e) in &self.dag.succs[u] {
            let dv = self.s.ops[v].device;
            if dv == du {
                continue;
            }
            let b = self.g.edges[e].bytes;
            let o = self.s.ops[v].order;
            match remote.iter_mut().find(|x| x.0 == dv) {
                Some(x) => {
                    x.1 = x.1.min(o);
                    x.2 = x.2.max(b);
                }
                None => remote.push((dv, o, b)),
            }
        }
        for i in 0..self.dag.succs[u].len() {
            let v = self.dag.succs[u][i].0;
            if self.s.ops[v].device == du {
                self.arrived(v);
            }
        }
        remote.sort_by_key(|x| x.1);
        for (dv, _, bytes) in remote {
            let l = self
                .view
                .link(du, dv)
                .ok_or(PlacementError::NoLink { src: du, dst: dv })?;
            let q = self.view.queue_of_link[l];
            self.copies.push(CopyTiming {
                producer: u,
                src: du,
                dst: dv,
                bytes,
                start: f64::NAN,
                finish: f64::NAN,
            });
            let c = self.copies.len() - 1;
            self.queues[q].0.push_back(c);
            self.pump(q);
        }
        Ok(())
    }

    fn pump(&mut self, q: usize) {
        if self.queues[q].1 {
            return;
        }
        let Some(c) = self.queues[q].0.pop_front() else {
            return;
        };
        self.queues[q].1 = true;
        let cp = self.copies[c];
        let dur = self
            .view
            .copy_us(self.t, cp.src, cp.dst, cp.bytes)
            .unwrap_or(0.0);
        self.copies[c].start = self.now;
        self.copies[c].finish = self.now + dur;
        self.devs[cp.dst].copy_in += dur;
        let now = self.now;
        self.push(now + dur, Kind::Copy { copy: c });
    }

    fn copy_done(&mut self, c: usize) {
        let cp = self.copies[c];
        let l = self.view.link(cp.src, cp.dst).unwrap_or(0);
        let q = self.view.queue_of_link[l];
        self.queues[q].1 = false;
        for i in 0..self.dag.succs[cp.producer].len() {
            let v = self.dag.succs[cp.producer][i].0;
            if self.s.ops[v].device == cp.dst {
                self.arrived(v);
            }
        }
        self.pump(q);
    }

    /// Finish of the last operator.
    fn makespan(&self) -> f64 {
        self.timing.iter().map(|x| x.finish).fold(0.0, f64::max)
    }

    fn finish(mut self, lb: f64) -> SimResult {
        for d in 0..self.devs.len() {
            self.mark_idle(d);
        }
        let makespan = self.makespan();
        let mut devices: Vec<DeviceStats> = self
            .devs
            .iter()
            .map(|d| DeviceStats {
                busy_us: d.busy,
                utilization: if makespan > 0.0 {
                    d.busy / makespan
                } else {
                    0.0
                },
                copy_in_us: d.copy_in,
                ..DeviceStats::default()
            })
            .collect();
        for x in &self.timing {
            devices[x.device].queueing_us += x.start - x.ready;
            devices[x.device].ops += 1;
        }
        self.copies.sort_by(|a, b| a.start.total_cmp(&b.start));
        SimResult {
            makespan,
            lower_bound: lb,
            ops: self.timing,
            copies: self.copies,
            devices,
        }
    }
}
