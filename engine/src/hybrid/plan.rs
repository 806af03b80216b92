//! [`HybridPlan`]: a graph's segments on the host and on one device, run side by side. The
//! device's segments run in order on one thread, the host's in order on another (the caller's);
//! a segment starts once the segments it reads from have finished. A value between segments
//! travels as a host tensor, except one that only device segments read: that one stays on the
//! device ([`super::KeptValue`]), and the segment that wrote it runs again (in another run) only
//! once its readers have read it.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex};

use spillway_kernels::Tensor;
use spillway_kernels::buffer_pool::Pool;
use spillway_kernels::output_buffer::{self, Buffer};

use super::kept::{ReadGate, SegmentValue, all_on_host, hosted};
use super::segments::{Segment, Side};
#[cfg(feature = "internals")]
use super::shape_cache::ShapeStats;
use crate::error::{Error, Result};
use crate::exec::SequentialPlan;
use crate::exec::kernel_pool::{ThreadOptions, on_kernel_pool};
use crate::graph::{Graph, ValueId};
use crate::value::Value;

/// What runs one segment.
pub trait SegmentWork: Send + Sync + std::fmt::Debug {
    /// Runs on the segment's inputs (in its order); returns its outputs (in its order).
    fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>>;

    /// [`SegmentWork::run`] on inputs that may have been left on the device by other
    /// segments; an output whose flag in `keep` is set (missing flags are unset) may stay on
    /// the device as a [`super::KeptValue`]. By default kept inputs are copied to the host and
    /// nothing is kept.
    fn run_with(&self, inputs: Vec<SegmentValue>, keep: &[bool]) -> Result<Vec<SegmentValue>> {
        let _ = keep;
        Ok(hosted(self.run(all_on_host(inputs)?)?))
    }

    /// Whether [`SegmentWork::run_with`] may keep outputs on the device.
    fn keeps_outputs(&self) -> bool {
        false
    }

    /// Device memory the segment holds, bytes (0 on the host).
    fn device_bytes(&self) -> usize {
        0
    }

    /// Each node's device time measured alone, µs, in the segment's order (`None` on the host).
    fn device_node_us(&self) -> Result<Option<Vec<f64>>> {
        Ok(None)
    }

    /// How runs of a segment compiled per shape went (zero for others).
    #[cfg(feature = "internals")]
    fn shape_stats(&self) -> ShapeStats {
        ShapeStats::default()
    }
}

/// A host segment: its nodes in order on the CPU kernels.
#[derive(Debug)]
pub struct HostSegment {
    plan: SequentialPlan,
    inputs: Vec<ValueId>,
    threads: ThreadOptions,
}

impl HostSegment {
    /// Compiles the graph of one segment (see [`super::segment_graph`]), its kernels run with
    /// the default [`ThreadOptions`].
    pub fn compile(graph: &Graph) -> Result<HostSegment> {
        Ok(HostSegment {
            plan: SequentialPlan::compile(graph)?,
            inputs: graph.inputs.clone(),
            threads: ThreadOptions::default(),
        })
    }

    /// Runs the segment's kernels with `threads` instead.
    #[cfg(feature = "internals")]
    pub fn with_thread_options(mut self, threads: ThreadOptions) -> Self {
        self.threads = threads;
        self
    }

    /// Runs on the segment's inputs keeping every value, indexed by value id.
    pub fn run_keeping_values(&self, inputs: Vec<Value>) -> Result<Vec<Option<Value>>> {
        let bound = self.inputs.iter().copied().zip(inputs).collect();
        on_kernel_pool(self.threads, || self.plan.run_keeping_values(bound))
    }
}

impl SegmentWork for HostSegment {
    fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
        let bound = self.inputs.iter().copied().zip(inputs).collect();
        on_kernel_pool(self.threads, || self.plan.run(bound)).map(|(outputs, _)| outputs)
    }
}

/// One segment, ready to run.
#[derive(Debug)]
pub struct PlannedSegment {
    /// Where it runs.
    pub side: Side,
    /// How many nodes it runs.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // read through the internals
    pub nodes: usize,
    inputs: Vec<ValueId>,
    outputs: Vec<ValueId>,
    /// Per output: whether it stays on the device (only device segments read it).
    keep: Vec<bool>,
    /// Whether it reads a value another segment keeps on the device.
    reads_kept: bool,
    /// Reads of its kept outputs in one run.
    reads_of_kept: usize,
    /// Its next run waits for those reads.
    gate: ReadGate,
    work: Box<dyn SegmentWork>,
    /// The plan's buffers of dead values between segments, where a device segment's downloads
    /// take their memory.
    pool: Arc<Pool>,
}

impl PlannedSegment {
    /// Runs the segment alone on its inputs (in its order).
    pub fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
        all_on_host(self.run_with(hosted(inputs), &[])?)
    }

    /// Runs the segment on its inputs (in its order), keeping the outputs `keep` flags on the
    /// device where it can.
    fn run_with(&self, inputs: Vec<SegmentValue>, keep: &[bool]) -> Result<Vec<SegmentValue>> {
        match self.side {
            // Its downloads are host tensors of up to a hundred MiB (a detector's RoI
            // features): fresh memory would fault its pages in on every run.
            Side::Device => output_buffer::offer(&mut [], Some(&self.pool), || {
                self.work.run_with(inputs, keep)
            }),
            Side::Host => self.work.run_with(inputs, keep),
        }
    }

    /// How many of its outputs stay on the device in a run of the whole plan.
    pub fn kept_outputs(&self) -> usize {
        self.keep.iter().filter(|&&k| k).count()
    }

    /// Whether, in a run of the whole plan, it reads or writes a value kept on the device.
    pub fn touches_kept(&self) -> bool {
        self.reads_kept || self.kept_outputs() > 0
    }

    /// Gives the memory of `values`, which nothing reads any more, to the plan's pool.
    pub fn recycle(&self, values: Vec<Value>) {
        recycle(&self.pool, hosted(values));
    }

    /// Each node's device time measured alone, µs, in the segment's order (`None` on the host).
    pub fn device_node_us(&self) -> Result<Option<Vec<f64>>> {
        self.work.device_node_us()
    }
}

/// A graph split into host and device segments, for inputs of fixed shapes.
#[derive(Debug)]
pub struct HybridPlan {
    segments: Vec<PlannedSegment>,
    inputs: Vec<ValueId>,
    /// Per graph input: its name and the shape the plan was built for (`None`: not a tensor).
    input_shapes: Vec<(String, Option<Vec<usize>>)>,
    outputs: Vec<ValueId>,
    /// Graph outputs known before running.
    constants: HashMap<ValueId, Tensor>,
    /// Per value passed between segments: how many segments read it.
    readers: HashMap<ValueId, usize>,
    /// Memory of the values between segments that died in the last run (see
    /// [`PlannedSegment::run`]).
    pool: Arc<Pool>,
    /// Per value kept on the device: the segment (index) that keeps it.
    kept_by: HashMap<ValueId, usize>,
}

/// Gives the storage of each tensor in `values` that nothing else shares to `pool`.
fn recycle(pool: &Pool, values: impl IntoIterator<Item = SegmentValue>) {
    for v in values {
        if let SegmentValue::Host(Value::Tensor(t)) = v
            && let Some(buffer) = Buffer::reclaim(t)
        {
            pool.give(buffer);
        }
    }
}

/// The values of one run, shared by its two threads.
struct RunValues {
    values: HashMap<ValueId, SegmentValue>,
    /// Segments (indices) of this run whose kept outputs other runs wait to overwrite.
    claimed: Vec<usize>,
    readers: HashMap<ValueId, usize>,
    error: Option<Error>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl HybridPlan {
    /// The plan of `graph` run as `segments` (from [`super::partition`], in its order), each
    /// with its work; `input_shapes` holds each graph input's fixed shape (`None` for a
    /// non-tensor input).
    pub fn new(
        graph: &Graph,
        segments: Vec<(Segment, Box<dyn SegmentWork>)>,
        input_shapes: Vec<Option<Vec<usize>>>,
    ) -> HybridPlan {
        let mut readers: HashMap<ValueId, usize> = HashMap::new();
        let mut host_reads: Vec<ValueId> = graph.outputs.clone();
        for (s, _) in &segments {
            for &v in &s.inputs {
                *readers.entry(v).or_default() += 1;
                if s.side == Side::Host {
                    host_reads.push(v);
                }
            }
        }
        let pool = Arc::new(Pool::new());
        let mut planned: Vec<PlannedSegment> = segments
            .into_iter()
            .map(|(s, work)| PlannedSegment {
                side: s.side,
                nodes: s.nodes.len(),
                keep: s
                    .outputs
                    .iter()
                    .map(|v| {
                        s.side == Side::Device
                            && work.keeps_outputs()
                            && readers.contains_key(v)
                            && !host_reads.contains(v)
                    })
                    .collect(),
                reads_kept: false,
                reads_of_kept: 0,
                gate: ReadGate::default(),
                inputs: s.inputs,
                outputs: s.outputs,
                work,
                pool: pool.clone(),
            })
            .collect();
        let kept_by: HashMap<ValueId, usize> = (planned.iter().enumerate())
            .flat_map(|(i, s)| {
                (s.outputs.iter().zip(&s.keep))
                    .filter(|(_, k)| **k)
                    .map(move |(v, _)| (*v, i))
            })
            .collect();
        for s in &mut planned {
            s.reads_kept = s.inputs.iter().any(|v| kept_by.contains_key(v));
            s.reads_of_kept = (s.outputs.iter().zip(&s.keep))
                .filter(|(_, k)| **k)
                .map(|(v, _)| readers[v])
                .sum();
        }
        HybridPlan {
            segments: planned,
            inputs: graph.inputs.clone(),
            input_shapes: graph
                .inputs
                .iter()
                .zip(input_shapes)
                .map(|(v, shape)| (graph.name(*v).to_string(), shape))
                .collect(),
            outputs: graph.outputs.clone(),
            constants: graph
                .outputs
                .iter()
                .filter_map(|v| graph.constants.get(v).map(|t| (*v, t.clone())))
                .collect(),
            readers,
            pool,
            kept_by,
        }
    }

    /// The segments, in order.
    pub fn segments(&self) -> &[PlannedSegment] {
        &self.segments
    }

    /// Values that stay on the device between device segments in a run.
    pub fn kept_values(&self) -> usize {
        self.segments.iter().map(PlannedSegment::kept_outputs).sum()
    }

    /// Device memory held by the device segments, bytes.
    pub fn device_bytes(&self) -> usize {
        self.segments.iter().map(|s| s.work.device_bytes()).sum()
    }

    /// How the runs of its segments compiled per shape went, summed.
    #[cfg(feature = "internals")]
    pub fn shape_stats(&self) -> ShapeStats {
        let mut total = ShapeStats::default();
        for s in &self.segments {
            total += s.work.shape_stats();
        }
        total
    }

    /// Runs on `inputs` (one per graph input, in order, in the shapes the plan was built for);
    /// returns the graph outputs in order. A failing segment fails the run with its error; the
    /// plan stays usable.
    pub fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
        for ((name, shape), value) in self.input_shapes.iter().zip(&inputs) {
            if let (Some(shape), Value::Tensor(t)) = (shape, value)
                && t.shape() != shape.as_slice()
            {
                return Err(Error::InputShape {
                    name: name.clone(),
                    expected: format!("{shape:?} (the shape the session was built for)"),
                    got: t.shape().to_vec(),
                });
            }
        }
        let state = Mutex::new(RunValues {
            values: self.inputs.iter().copied().zip(hosted(inputs)).collect(),
            readers: self.readers.clone(),
            claimed: Vec::new(),
            error: None,
        });
        let ready = Condvar::new();
        let has = |side: Side| self.segments.iter().any(|s| s.side == side);
        if has(Side::Host) && has(Side::Device) {
            std::thread::scope(|scope| {
                let device = scope.spawn(|| self.run_side(Side::Device, &state, &ready));
                self.run_side(Side::Host, &state, &ready);
                if device.join().is_err() {
                    lock(&state).error = Some(Error::Internal("the device thread panicked".into()));
                }
            });
        } else {
            self.run_side(Side::Host, &state, &ready);
            self.run_side(Side::Device, &state, &ready);
        }
        let mut state = state.into_inner().unwrap_or_else(|p| p.into_inner());
        // Reads that a failed run will not make are given up.
        for &i in &state.claimed {
            let segment = &self.segments[i];
            let unread = (segment.outputs.iter().zip(&segment.keep))
                .filter(|(_, k)| **k)
                .map(|(v, _)| state.readers.get(v).copied().unwrap_or(0))
                .sum();
            segment.gate.release(unread);
        }
        // What no segment read after all (a failed run) goes back to the pool too.
        let unread: Vec<ValueId> = (state.values.keys().copied())
            .filter(|v| !self.outputs.contains(v))
            .collect();
        recycle(
            &self.pool,
            unread.iter().filter_map(|v| state.values.remove(v)),
        );
        self.pool.end_run(None);
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        self.outputs
            .iter()
            .map(|v| match self.constants.get(v) {
                Some(t) => Ok(Value::Tensor(t.clone())),
                None => match state.values.get(v) {
                    Some(SegmentValue::Host(value)) => Ok(value.clone()),
                    Some(SegmentValue::Kept(kept)) => kept.fetch(),
                    None => Err(Error::Internal(
                        "a graph output was computed by no segment".into(),
                    )),
                },
            })
            .collect()
    }

    /// Runs the segments of `side` in order, each once its inputs are there.
    fn run_side(&self, side: Side, state: &Mutex<RunValues>, ready: &Condvar) {
        let of_side = self
            .segments
            .iter()
            .enumerate()
            .filter(|(_, s)| s.side == side);
        for (index, segment) in of_side {
            let args = {
                let mut run = lock(state);
                loop {
                    if run.error.is_some() {
                        return;
                    }
                    if segment.inputs.iter().all(|v| run.values.contains_key(v)) {
                        break;
                    }
                    run = ready.wait(run).unwrap_or_else(|p| p.into_inner());
                }
                segment
                    .inputs
                    .iter()
                    .map(|v| run.values[v].clone())
                    .collect()
            };
            if segment.reads_of_kept > 0 {
                // What it kept in an earlier run stays until that run's readers have read it.
                segment.gate.claim(segment.reads_of_kept);
                lock(state).claimed.push(index);
            }
            let result = catch_unwind(AssertUnwindSafe(|| segment.run_with(args, &segment.keep)))
                .unwrap_or_else(|_| Err(Error::Internal("a segment panicked".into())));
            let mut run = lock(state);
            match result {
                Ok(values) if values.len() == segment.outputs.len() => {
                    run.values
                        .extend(segment.outputs.iter().copied().zip(values));
                    for v in &segment.inputs {
                        let left = run.readers.get_mut(v).map(|r| {
                            *r -= 1;
                            *r
                        });
                        if let Some(&keeper) = self.kept_by.get(v) {
                            self.segments[keeper].gate.release(1);
                        }
                        if left == Some(0) && !self.outputs.contains(v) {
                            recycle(&self.pool, run.values.remove(v));
                        }
                    }
                }
                Ok(values) => {
                    run.error.get_or_insert(Error::Internal(format!(
                        "a segment returned {} values, it has {} outputs",
                        values.len(),
                        segment.outputs.len()
                    )));
                }
                Err(e) => {
                    run.error.get_or_insert(e);
                }
            }
            let failed = run.error.is_some();
            drop(run);
            ready.notify_all();
            if failed {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::hybrid::test_graphs::{graph_with, node};

    /// Elements of a tensor large enough to be pooled.
    const LARGE: usize = 2 * spillway_kernels::buffer_pool::MIN_POOLED_BYTES / 4;

    /// A segment that writes a large tensor of `value`s in storage from `output_buffer` (as a
    /// device segment's download does) and notes what that storage held before: zeros when
    /// newly allocated, an earlier value's elements when reused.
    #[derive(Debug)]
    struct Writes {
        seen: Arc<Mutex<Vec<f32>>>,
        value: f32,
    }

    impl SegmentWork for Writes {
        fn run(&self, _inputs: Vec<Value>) -> Result<Vec<Value>> {
            let mut data = output_buffer::overwritable::<f32>(0, LARGE);
            lock(&self.seen).push(data[LARGE / 2]);
            data.fill(self.value);
            let t = Tensor::from_shape_vec(&[LARGE], data).expect("shape");
            Ok(vec![Value::Tensor(t)])
        }
    }

    /// A segment that sums its one input.
    #[derive(Debug)]
    struct Sums;

    impl SegmentWork for Sums {
        fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
            let Some(Value::Tensor(t)) = inputs.first() else {
                return Err(Error::Internal("no input".into()));
            };
            let sum = t
                .view::<f32>()
                .map_err(|e| Error::Internal(e.to_string()))?
                .sum();
            Ok(vec![Value::Tensor(Tensor::scalar(sum))])
        }
    }

    #[test]
    fn a_device_segments_downloads_reuse_the_memory_of_values_that_died_in_the_last_run() {
        // x(0) → A(host) → 1 → B(device) → 2 → C(host) → 3
        let mut g = graph_with(4);
        g.inputs = vec![ValueId::new(0)];
        g.outputs = vec![ValueId::new(3)];
        g.nodes = vec![
            node("A", &[0], &[1]),
            node("B", &[1], &[2]),
            node("C", &[2], &[3]),
        ];
        let sides = [Side::Host, Side::Device, Side::Host];
        let host_seen = Arc::new(Mutex::new(Vec::new()));
        let device_seen = Arc::new(Mutex::new(Vec::new()));
        let works: Vec<Box<dyn SegmentWork>> = vec![
            Box::new(Writes {
                seen: host_seen.clone(),
                value: 1.0,
            }),
            Box::new(Writes {
                seen: device_seen.clone(),
                value: 0.5,
            }),
            Box::new(Sums),
        ];
        let segments = super::super::partition(&g, &sides);
        assert_eq!(segments.len(), 3);
        let plan = HybridPlan::new(&g, segments.into_iter().zip(works).collect(), vec![None]);
        for _ in 0..3 {
            let out = plan
                .run(vec![Value::Tensor(Tensor::scalar(0.0f32))])
                .expect("run");
            let Some(Value::Tensor(sum)) = out.first() else {
                panic!("no output");
            };
            assert_eq!(sum.to_f64_vec().expect("f32"), vec![0.5 * LARGE as f64]);
        }
        // A (on the host) allocates every time; B (on the device) does in the first run only,
        // and then writes into the memory of a value that died in the run before (A's 1.0s
        // or its own 0.5s).
        assert_eq!(*lock(&host_seen), vec![0.0; 3]);
        let device = lock(&device_seen).clone();
        assert_eq!(device[0], 0.0);
        assert!(
            device[1..].iter().all(|v| [1.0, 0.5].contains(v)),
            "{device:?}"
        );
        assert!(
            plan.pool.bytes() > 0,
            "the pool keeps what the last run gave back"
        );
    }
}
