//! What passes between segments: a host [`Value`], or a [`KeptValue`] — an output that a
//! device segment left in its device memory because only device segments read it. The reader
//! copies it from there on the device, so the value does not travel to the host and back
//! (a detector's feature maps, 74 MB, between its backbone and its RoI pooling).

use std::any::Any;
use std::fmt::Debug;
use std::sync::{Arc, Condvar, Mutex};

use crate::error::Result;
use crate::value::Value;

/// A segment output left on the device. It holds the memory the segment wrote: it stays
/// valid until that segment runs again (a [`super::HybridPlan`] runs its device segments of
/// one run before the next run's).
pub trait KeptValue: Send + Sync + Debug + Any {
    /// Its shape.
    fn shape(&self) -> &[usize];

    /// Copies it to the host.
    fn fetch(&self) -> Result<Value>;
}

/// A value between segments.
#[derive(Debug, Clone)]
pub enum SegmentValue {
    /// On the host.
    Host(Value),
    /// Left on the device by the segment that wrote it.
    Kept(Arc<dyn KeptValue>),
}

impl SegmentValue {
    /// Its shape (`None`: a host value that is not a tensor).
    pub fn shape(&self) -> Option<Vec<usize>> {
        match self {
            SegmentValue::Host(v) => v.as_tensor().map(|t| t.shape().to_vec()),
            SegmentValue::Kept(k) => Some(k.shape().to_vec()),
        }
    }

    /// The value on the host (a kept one copied there).
    pub fn into_host(self) -> Result<Value> {
        match self {
            SegmentValue::Host(v) => Ok(v),
            SegmentValue::Kept(k) => k.fetch(),
        }
    }
}

/// `values` on the host (kept ones copied there).
pub fn all_on_host(values: Vec<SegmentValue>) -> Result<Vec<Value>> {
    values.into_iter().map(SegmentValue::into_host).collect()
}

/// `values` as segment values on the host.
pub fn hosted(values: Vec<Value>) -> Vec<SegmentValue> {
    values.into_iter().map(SegmentValue::Host).collect()
}

/// Guards the memory of one device segment's kept outputs: the segment's next run waits until
/// every read of what its last run kept has happened, or was given up by a failed run. Runs
/// from several threads thus overlap their device segments as far as the reads allow.
#[derive(Debug, Default)]
pub(super) struct ReadGate {
    pending: Mutex<usize>,
    read: Condvar,
}

impl ReadGate {
    /// Waits until no read is pending, then expects `reads` reads.
    pub(super) fn claim(&self, reads: usize) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        while *pending > 0 {
            pending = self.read.wait(pending).unwrap_or_else(|p| p.into_inner());
        }
        *pending = reads;
    }

    /// `reads` of the expected reads happened or were given up.
    pub(super) fn release(&self, reads: usize) {
        if reads == 0 {
            return;
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        *pending = pending.saturating_sub(reads);
        if *pending == 0 {
            self.read.notify_all();
        }
    }
}
