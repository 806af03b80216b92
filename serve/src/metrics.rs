//! Prometheus metrics: request counts by outcome, queue depth, runs in flight, and latency
//! histograms split into the time waiting in the queue and the time computing.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How a request ended, as counted in `spillway_requests_total{outcome=…}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered with outputs.
    Success,
    /// Malformed, or did not fit the model (4xx).
    Invalid,
    /// Refused at admission: the queue was full.
    Refused,
    /// Its deadline passed before it ran.
    Expired,
    /// The run failed.
    Failed,
    /// Refused because the server is shutting down.
    Unavailable,
    /// The client went away before an answer.
    Cancelled,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 7] = [
        Outcome::Success,
        Outcome::Invalid,
        Outcome::Refused,
        Outcome::Expired,
        Outcome::Failed,
        Outcome::Unavailable,
        Outcome::Cancelled,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Invalid => "invalid",
            Outcome::Refused => "refused",
            Outcome::Expired => "expired",
            Outcome::Failed => "failed",
            Outcome::Unavailable => "unavailable",
            Outcome::Cancelled => "cancelled",
        }
    }

    fn index(self) -> usize {
        Outcome::ALL.iter().position(|o| *o == self).unwrap_or(0)
    }
}

/// The histograms' upper bounds, in seconds.
const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// A latency histogram (cumulative buckets written at render time).
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// How many observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    fn render(&self, out: &mut String, name: &str, model: &str) {
        let mut cumulative = 0;
        for (i, bound) in BUCKETS.iter().enumerate() {
            cumulative += self.counts[i].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "{name}_bucket{{model=\"{model}\",le=\"{bound}\"}} {cumulative}"
            );
        }
        cumulative += self.counts[BUCKETS.len()].load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "{name}_bucket{{model=\"{model}\",le=\"+Inf\"}} {cumulative}"
        );
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 * 1e-9;
        let _ = writeln!(out, "{name}_sum{{model=\"{model}\"}} {sum}");
        let _ = writeln!(out, "{name}_count{{model=\"{model}\"}} {cumulative}");
    }
}

/// One model's metrics.
#[derive(Debug, Default)]
pub struct ModelMetrics {
    outcomes: [AtomicU64; Outcome::ALL.len()],
    /// Requests waiting in the admission queue.
    pub queue_depth: AtomicU64,
    /// Runs in progress.
    pub running: AtomicU64,
    /// Time from admission to the start of the run (or to expiry).
    pub queue_time: Histogram,
    /// Time the run took.
    pub compute_time: Histogram,
    /// Time from the request's arrival to its answer (successful requests).
    pub request_time: Histogram,
    /// Worker threads (runs at once): `rate(spillway_compute_seconds_sum) / instances` is the
    /// model's utilisation of them.
    pub instances: AtomicU64,
    /// Requests the queue holds.
    pub queue_capacity: AtomicU64,
}

impl ModelMetrics {
    /// Counts one request's outcome.
    pub fn count(&self, outcome: Outcome) {
        self.outcomes[outcome.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// How many requests ended with `outcome`.
    pub fn outcome(&self, outcome: Outcome) -> u64 {
        self.outcomes[outcome.index()].load(Ordering::Relaxed)
    }
}

/// A label value as the Prometheus text format writes it (`\\`, `\"` and `\n` escaped).
fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Writes every model's metrics in the Prometheus text format (version 0.0.4).
pub fn render<'a>(models: impl Iterator<Item = (&'a str, &'a ModelMetrics)> + Clone) -> String {
    let escaped: Vec<(String, &ModelMetrics)> = models.map(|(n, m)| (escape(n), m)).collect();
    let models = escaped.iter().map(|(n, m)| (n.as_str(), *m));
    let mut out = String::new();
    out.push_str("# HELP spillway_requests_total Inference requests by how they ended.\n");
    out.push_str("# TYPE spillway_requests_total counter\n");
    for (name, m) in models.clone() {
        for o in Outcome::ALL {
            let _ = writeln!(
                out,
                "spillway_requests_total{{model=\"{name}\",outcome=\"{}\"}} {}",
                o.label(),
                m.outcome(o)
            );
        }
    }
    out.push_str("# HELP spillway_queue_depth Requests waiting in the model's admission queue.\n");
    out.push_str("# TYPE spillway_queue_depth gauge\n");
    for (name, m) in models.clone() {
        let depth = m.queue_depth.load(Ordering::Relaxed);
        let _ = writeln!(out, "spillway_queue_depth{{model=\"{name}\"}} {depth}");
    }
    for (metric, help, pick) in [
        (
            "spillway_instances",
            "Runs of the model at once (worker threads); utilisation = rate(spillway_compute_seconds_sum) / this.",
            (|m: &ModelMetrics| &m.instances) as fn(&ModelMetrics) -> &AtomicU64,
        ),
        (
            "spillway_queue_capacity",
            "Requests the model's admission queue holds.",
            |m: &ModelMetrics| &m.queue_capacity,
        ),
    ] {
        let _ = writeln!(out, "# HELP {metric} {help}");
        let _ = writeln!(out, "# TYPE {metric} gauge");
        for (name, m) in models.clone() {
            let v = pick(m).load(Ordering::Relaxed);
            let _ = writeln!(out, "{metric}{{model=\"{name}\"}} {v}");
        }
    }
    out.push_str("# HELP spillway_runs_in_flight Runs of the model in progress.\n");
    out.push_str("# TYPE spillway_runs_in_flight gauge\n");
    for (name, m) in models.clone() {
        let running = m.running.load(Ordering::Relaxed);
        let _ = writeln!(out, "spillway_runs_in_flight{{model=\"{name}\"}} {running}");
    }
    for (metric, help, pick) in [
        (
            "spillway_queue_seconds",
            "Time from admission to the start of the run.",
            (|m: &ModelMetrics| &m.queue_time) as fn(&ModelMetrics) -> &Histogram,
        ),
        (
            "spillway_compute_seconds",
            "Time the model's run took.",
            |m: &ModelMetrics| &m.compute_time,
        ),
        (
            "spillway_request_seconds",
            "Time from a request's arrival to its answer, successful requests.",
            |m: &ModelMetrics| &m.request_time,
        ),
    ] {
        let _ = writeln!(out, "# HELP {metric} {help}");
        let _ = writeln!(out, "# TYPE {metric} histogram");
        for (name, m) in models.clone() {
            pick(m).render(&mut out, metric, name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_counted() {
        let m = ModelMetrics::default();
        m.compute_time.observe(Duration::from_micros(50));
        m.compute_time.observe(Duration::from_millis(3));
        m.compute_time.observe(Duration::from_secs(100));
        m.count(Outcome::Success);
        m.count(Outcome::Refused);
        m.count(Outcome::Refused);
        let text = render([("m", &m)].into_iter());
        assert!(text.contains("spillway_compute_seconds_bucket{model=\"m\",le=\"0.0001\"} 1\n"));
        assert!(text.contains("spillway_compute_seconds_bucket{model=\"m\",le=\"0.005\"} 2\n"));
        assert!(text.contains("spillway_compute_seconds_bucket{model=\"m\",le=\"+Inf\"} 3\n"));
        assert!(text.contains("spillway_compute_seconds_count{model=\"m\"} 3\n"));
        assert!(text.contains("spillway_requests_total{model=\"m\",outcome=\"refused\"} 2\n"));
        assert_eq!(m.compute_time.count(), 3);
        let text = render([("a\"b\\c", &m)].into_iter());
        assert!(
            text.contains("spillway_queue_depth{model=\"a\\\"b\\\\c\"} 0\n"),
            "{text}"
        );
    }
}
