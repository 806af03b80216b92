//! What really ran where: per-task start and end times, written as Chrome-trace JSON
//! (open it in Perfetto or chrome://tracing).

use std::sync::Mutex;
use std::time::Instant;

use crate::plan::{ExecutionPlan, TaskId};

/// One task's execution.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TraceEvent {
    /// Task name.
    pub name: String,
    /// Op type (or `Copy`).
    pub op_type: String,
    /// Device index.
    pub device: usize,
    /// Lane index on the device (copy engines come last).
    pub lane: usize,
    /// Start, µs since the run began.
    pub start_us: f64,
    /// Duration, µs.
    pub duration_us: f64,
}

/// A run's events, collected from every worker.
pub(crate) struct TraceLog {
    start: Instant,
    events: Mutex<Vec<TraceEvent>>,
}

impl TraceLog {
    pub(crate) fn new() -> Self {
        TraceLog {
            start: Instant::now(),
            events: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn push(&self, plan: &ExecutionPlan, t: TaskId, start: Instant, end: Instant) {
        let task = &plan.tasks[t];
        let lane = plan.lanes[task.lane];
        let event = TraceEvent {
            name: task.name.clone(),
            op_type: task.op_type.clone(),
            device: lane.device_index,
            lane: lane.lane,
            start_us: start.saturating_duration_since(self.start).as_secs_f64() * 1e6,
            duration_us: end.saturating_duration_since(start).as_secs_f64() * 1e6,
        };
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
    }

    pub(crate) fn take(&self) -> Vec<TraceEvent> {
        let mut v = std::mem::take(&mut *self.events.lock().unwrap_or_else(|p| p.into_inner()));
        v.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
        v
    }
}

/// Chrome-trace JSON ("X" complete events; one process per device, one thread per lane).
pub fn chrome_trace_json(events: &[TraceEvent], device_names: &[String]) -> String {
    let mut out: Vec<serde_json::Value> = Vec::new();
    for (pid, name) in device_names.iter().enumerate() {
        out.push(serde_json::json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}));
    }
    for e in events {
        out.push(serde_json::json!({
            "name": e.name, "cat": e.op_type, "ph": "X", "ts": e.start_us, "dur": e.duration_us,
            "pid": e.device, "tid": e.lane,
        }));
    }
    serde_json::json!({ "traceEvents": out }).to_string()
}
