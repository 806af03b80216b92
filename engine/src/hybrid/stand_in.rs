//! [`host_stand_in`]: a test instrument that runs a split graph's device segments on the host
//! too, with memory of their own, so that the splitting, the two threads and the values kept
//! on the device between segments are tested without a device.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::kept::{KeptValue, SegmentValue, all_on_host, hosted};
use super::plan::{HostSegment, HybridPlan, SegmentWork};
use super::segments::{Side, partition, segment_graph};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::value::Value;

/// A split plan whose device segments run on the host (see [`host_stand_in`]).
#[derive(Debug)]
pub struct StandIn {
    /// The plan.
    pub plan: HybridPlan,
    counts: Arc<Counts>,
}

/// How kept values were read.
#[derive(Debug, Default)]
struct Counts {
    /// Read by a stand-in device segment from another's memory.
    on_device: AtomicUsize,
    /// Copied to the host.
    fetched: AtomicUsize,
}

impl StandIn {
    /// Kept values that device segments read from each other's memory so far.
    pub fn read_on_device(&self) -> usize {
        self.counts.on_device.load(Ordering::Relaxed)
    }

    /// Kept values copied to the host so far.
    pub fn fetched(&self) -> usize {
        self.counts.fetched.load(Ordering::Relaxed)
    }
}

/// `graph` split by `sides`, every segment run on the host; the device segments keep their
/// outputs in memory of their own, which their next run overwrites, as a device segment's
/// device memory.
pub fn host_stand_in(
    graph: &Graph,
    sides: &[Side],
    input_shapes: Vec<Option<Vec<usize>>>,
) -> Result<StandIn> {
    let counts = Arc::new(Counts::default());
    let segments = partition(graph, sides)
        .into_iter()
        .map(|s| {
            let host = HostSegment::compile(&segment_graph(graph, &s))?;
            let work: Box<dyn SegmentWork> = match s.side {
                Side::Host => Box::new(host),
                Side::Device => Box::new(StandInDevice {
                    host,
                    memory: Arc::new(Mutex::new(vec![None; s.outputs.len()])),
                    counts: counts.clone(),
                }),
            };
            Ok((s, work))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(StandIn {
        plan: HybridPlan::new(graph, segments, input_shapes),
        counts,
    })
}

/// A stand-in device segment.
#[derive(Debug)]
struct StandInDevice {
    host: HostSegment,
    /// Its last run's kept outputs.
    memory: Arc<Mutex<Vec<Option<Value>>>>,
    counts: Arc<Counts>,
}

/// An output a [`StandInDevice`] kept.
#[derive(Debug)]
struct StandInKept {
    memory: Arc<Mutex<Vec<Option<Value>>>>,
    index: usize,
    shape: Vec<usize>,
    counts: Arc<Counts>,
}

impl StandInKept {
    /// What its segment's memory holds now.
    fn read(&self) -> Result<Value> {
        let memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        memory[self.index]
            .clone()
            .ok_or_else(|| Error::Internal("a kept value was read before it was written".into()))
    }
}

impl KeptValue for StandInKept {
    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn fetch(&self) -> Result<Value> {
        self.counts.fetched.fetch_add(1, Ordering::Relaxed);
        self.read()
    }
}

impl SegmentWork for StandInDevice {
    fn run(&self, inputs: Vec<Value>) -> Result<Vec<Value>> {
        all_on_host(self.run_with(hosted(inputs), &[])?)
    }

    fn run_with(&self, inputs: Vec<SegmentValue>, keep: &[bool]) -> Result<Vec<SegmentValue>> {
        let inputs = inputs
            .into_iter()
            .map(|v| match v {
                SegmentValue::Kept(k) => {
                    match (k.as_ref() as &dyn std::any::Any).downcast_ref::<StandInKept>() {
                        Some(on_device) => {
                            self.counts.on_device.fetch_add(1, Ordering::Relaxed);
                            on_device.read()
                        }
                        None => k.fetch(),
                    }
                }
                SegmentValue::Host(v) => Ok(v),
            })
            .collect::<Result<Vec<_>>>()?;
        let outputs = self.host.run(inputs)?;
        let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        Ok(outputs
            .into_iter()
            .enumerate()
            .map(|(i, v)| match (keep.get(i), v.as_tensor()) {
                (Some(true), Some(t)) => {
                    let kept = StandInKept {
                        memory: self.memory.clone(),
                        index: i,
                        shape: t.shape().to_vec(),
                        counts: self.counts.clone(),
                    };
                    memory[i] = Some(v);
                    SegmentValue::Kept(Arc::new(kept))
                }
                _ => SegmentValue::Host(v),
            })
            .collect())
    }

    fn keeps_outputs(&self) -> bool {
        true
    }
}
