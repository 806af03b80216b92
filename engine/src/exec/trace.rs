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

/// Chrome-trace JSON ("X" complete events; one process per device, named by
/// `device_names`, one thread per lane, named for what it is: `copies` for a lane that ran only
/// copies (a device's copy engine), `stream N` on a CUDA device, `lane N` (a worker thread) on the others).
pub fn chrome_trace_json(events: &[TraceEvent], device_names: &[String]) -> String {
    let mut out: Vec<serde_json::Value> = Vec::new();
    for (pid, name) in device_names.iter().enumerate() {
        out.push(serde_json::json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}));
        out.push(serde_json::json!({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}));
    }
    // (device, lane) → whether every event on it is a copy.
    let mut lanes: std::collections::BTreeMap<(usize, usize), bool> = Default::default();
    for e in events {
        *lanes.entry((e.device, e.lane)).or_insert(true) &= e.op_type == "Copy";
    }
    for (&(pid, tid), &copies) in &lanes {
        let on_cuda = device_names.get(pid).is_some_and(|n| n.starts_with("cuda"));
        let name = match (copies, on_cuda) {
            (true, _) => "copies".to_string(),
            (false, true) => format!("stream {tid}"),
            (false, false) => format!("lane {tid}"),
        };
        out.push(serde_json::json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}));
        out.push(serde_json::json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}}));
    }
    for e in events {
        out.push(serde_json::json!({
            "name": e.name, "cat": e.op_type, "ph": "X", "ts": e.start_us, "dur": e.duration_us,
            "pid": e.device, "tid": e.lane,
        }));
    }
    serde_json::json!({ "traceEvents": out }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, op_type: &str, device: usize, lane: usize, start_us: f64) -> TraceEvent {
        TraceEvent {
            name: name.into(),
            op_type: op_type.into(),
            device,
            lane,
            start_us,
            duration_us: 5.0,
        }
    }

    /// The metadata event `kind` (`process_name`, `thread_name`) of `pid` (and `tid`).
    fn named(trace: &serde_json::Value, kind: &str, pid: usize, tid: Option<usize>) -> String {
        let events = trace["traceEvents"].as_array().unwrap();
        let found: Vec<&serde_json::Value> = events
            .iter()
            .filter(|e| {
                e["ph"] == "M"
                    && e["name"] == kind
                    && e["pid"] == pid
                    && tid.is_none_or(|t| e["tid"] == t)
            })
            .collect();
        assert_eq!(found.len(), 1, "{kind} of {pid}/{tid:?}: {found:?}");
        found[0]["args"]["name"].as_str().unwrap().to_string()
    }

    #[test]
    fn every_device_and_lane_is_a_named_track() {
        let events = [
            event("conv", "Conv", 0, 0, 0.0),
            event("relu", "Relu", 0, 1, 1.0),
            event("copy_in", "Copy", 2, 1, 2.0),
            event("add", "Add", 1, 0, 3.0),
            event("mul", "Mul", 2, 0, 4.0),
            event("copy_out", "Copy", 1, 1, 5.0),
        ];
        let names = ["cpu".to_string(), "virtual0".into(), "cuda0".into()];
        let trace: serde_json::Value =
            serde_json::from_str(&chrome_trace_json(&events, &names)).unwrap();
        for (pid, name) in names.iter().enumerate() {
            assert_eq!(&named(&trace, "process_name", pid, None), name);
        }
        assert_eq!(named(&trace, "thread_name", 0, Some(0)), "lane 0");
        assert_eq!(named(&trace, "thread_name", 0, Some(1)), "lane 1");
        assert_eq!(named(&trace, "thread_name", 1, Some(0)), "lane 0");
        assert_eq!(named(&trace, "thread_name", 1, Some(1)), "copies");
        assert_eq!(named(&trace, "thread_name", 2, Some(0)), "stream 0");
        assert_eq!(named(&trace, "thread_name", 2, Some(1)), "copies");
        // Every task is still one complete event on its track.
        let complete: Vec<_> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .collect();
        assert_eq!(complete.len(), events.len());
        assert_eq!(complete[2]["name"], "copy_in");
        assert_eq!(
            (complete[2]["pid"].as_u64(), complete[2]["tid"].as_u64()),
            (Some(2), Some(1))
        );
    }
}
