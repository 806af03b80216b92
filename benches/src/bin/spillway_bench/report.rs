//! Results, their statistics, and the Markdown and JSON reports.

use std::fmt::Write as _;

use serde_json::{Value, json};
use spillway::Tensor;

use crate::inputs::ZooModel;

/// The machine and the run's settings.
pub struct Meta {
    /// UTC date.
    pub date: String,
    /// UTC time at start.
    pub time: String,
    /// CPU model name.
    pub cpu: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// Load average at start.
    pub load_start: [f64; 3],
    /// Load average at end.
    pub load_end: [f64; 3],
    /// Timed rounds.
    pub rounds: usize,
    /// Warm-up rounds.
    pub warmup: usize,
    /// Input seed.
    pub seed: u64,
    /// Whether the peak-RSS counter could be reset between configurations.
    pub peak_reset_works: bool,
}

/// One configuration of one model.
pub struct ConfigResult {
    /// Configuration label.
    pub label: String,
    /// Session creation time.
    pub load_ms: f64,
    /// First run time.
    pub first_run_ms: f64,
    /// RSS retained after load and first run.
    pub rss_growth: u64,
    /// Peak RSS above the RSS before loading, during load and first run.
    pub peak_rss_growth: u64,
    /// First-run outputs, until compared.
    pub outputs: Option<Vec<Tensor>>,
    /// Relative L2 error against ORT sequential 1-thread.
    pub rel_l2: Option<Result<f64, String>>,
    /// Timed runs.
    pub times_ms: Vec<f64>,
    /// Why it failed.
    pub error: Option<String>,
    /// Spillway's planned arena.
    pub planned_peak: Option<u64>,
    /// Spillway's no-reuse total.
    pub planned_naive: Option<u64>,
    /// Spillway's measured peak of intermediates (one-lane session).
    pub measured_peak: Option<u64>,
    /// Anything else worth saying.
    pub notes: Vec<String>,
}

impl ConfigResult {
    /// An empty result for `label`.
    pub fn new(label: &str) -> Self {
        ConfigResult {
            label: label.to_string(),
            load_ms: 0.0,
            first_run_ms: 0.0,
            rss_growth: 0,
            peak_rss_growth: 0,
            outputs: None,
            rel_l2: None,
            times_ms: Vec::new(),
            error: None,
            planned_peak: None,
            planned_naive: None,
            measured_peak: None,
            notes: Vec::new(),
        }
    }

    /// The median of the timed runs, when there are any and the configuration did not fail.
    pub fn median(&self) -> Option<f64> {
        self.quantile(0.5)
    }

    /// Nearest-rank quantile of the timed runs.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.error.is_some() || self.times_ms.is_empty() {
            return None;
        }
        let mut t = self.times_ms.clone();
        t.sort_by(f64::total_cmp);
        let rank = ((q * t.len() as f64).ceil() as usize).clamp(1, t.len());
        Some(t[rank - 1])
    }
}

/// Time spent in one op type (nodes timed alone).
pub struct OpShare {
    /// Op type.
    pub kind: String,
    /// Nodes of that type.
    pub count: usize,
    /// Summed median time.
    pub ms: f64,
    /// Fraction of the summed time of all nodes.
    pub share: f64,
}

/// Everything about one model.
pub struct ModelResult {
    /// Model name.
    pub name: String,
    /// Input shapes, for the report.
    pub inputs: String,
    /// Per configuration.
    pub configs: Vec<ConfigResult>,
    /// Why the model could not be run at all.
    pub error: Option<String>,
    /// Op types by time, largest first.
    pub top_ops: Vec<OpShare>,
    /// Why the per-op profile failed.
    pub op_profile_error: Option<String>,
    /// ORT's fastest configuration and its median.
    pub ort_best: Option<(String, f64)>,
    /// tract's fastest configuration and its median, when tract ran.
    pub tract_best: Option<(String, f64)>,
}

impl ModelResult {
    /// An empty result for `model`.
    pub fn new(name: &str, model: &ZooModel) -> Self {
        let inputs = model
            .inputs
            .iter()
            .map(|(n, d, s)| format!("{n}: {d}{s:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        ModelResult {
            name: name.to_string(),
            inputs,
            configs: Vec::new(),
            error: None,
            top_ops: Vec::new(),
            op_profile_error: None,
            ort_best: None,
            tract_best: None,
        }
    }

    /// Picks ORT's and tract's best configurations by median.
    pub fn finish(&mut self, is_ort: fn(&str) -> bool, is_tract: fn(&str) -> bool) {
        self.ort_best = self.best(is_ort);
        self.tract_best = self.best(is_tract);
    }

    /// The fastest of the configurations `pick` chooses, by median.
    fn best(&self, pick: fn(&str) -> bool) -> Option<(String, f64)> {
        self.configs
            .iter()
            .filter(|c| pick(&c.label))
            .filter_map(|c| c.median().map(|m| (c.label.clone(), m)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// Median over ORT's best median, for a configuration.
    pub fn ratio(&self, c: &ConfigResult) -> Option<f64> {
        Some(c.median()? / self.ort_best.as_ref()?.1)
    }

    /// Median over tract's best median, for a configuration.
    pub fn tract_ratio(&self, c: &ConfigResult) -> Option<f64> {
        Some(c.median()? / self.tract_best.as_ref()?.1)
    }
}

/// What the report says about tract.
#[cfg(feature = "tract")]
const TRACT_NOTE: &str = "tract: `tract-onnx` 0.23.9 (the `tract` feature), every input's shape \
     fixed, `into_optimized`; `tract-1t` on its default single-thread executor, `tract-2t` on a \
     private pool of 2 (`multithread-mm`).";
/// What the report says about tract.
#[cfg(not(feature = "tract"))]
const TRACT_NOTE: &str = "tract: not run (build with `--features spillway-benches/tract`).";

fn ms(v: Option<f64>) -> String {
    v.map_or("—".to_string(), |v| format!("{v:.1}"))
}

fn mib(v: Option<u64>) -> String {
    v.map_or("—".to_string(), |v| {
        format!("{:.1}", v as f64 / 1048576.0)
    })
}

fn err_text(c: &ConfigResult) -> String {
    match (&c.error, &c.rel_l2) {
        (Some(_), _) => "failed".to_string(),
        (None, Some(Ok(e))) => format!("{e:.2e}"),
        (None, Some(Err(e))) => format!("MISMATCH: {e}"),
        (None, None) => "—".to_string(),
    }
}

/// One line for the console as each model finishes.
pub fn summary_line(r: &ModelResult) -> String {
    let mut s = format!("{}:", r.name);
    for c in &r.configs {
        let _ = write!(s, " {}={}ms", c.label, ms(c.median()));
    }
    if let Some(e) = &r.error {
        let _ = write!(s, " error: {e}");
    }
    s
}

/// The Markdown report.
pub fn markdown(meta: &Meta, results: &[ModelResult]) -> String {
    let mut s = String::new();
    let la = |l: [f64; 3]| format!("{:.2} / {:.2} / {:.2}", l[0], l[1], l[2]);
    let _ = writeln!(s, "# Spillway vs ONNX Runtime on the CPU — {}\n", meta.date);
    let _ = writeln!(
        s,
        "- Machine: {} ({} logical CPUs), started {} UTC\n- Load average (1/5/15 min): start {}, \
         end {}\n- {} warm-up + {} timed rounds, interleaved (every configuration once per \
         round, 100 ms pause before each run so spinning idle threads settle); batch 1; inputs seeded ({}): floats uniform in [0, 1), token ids in [0, 1000), \
         masks all ones\n- ONNX Runtime 1.31.1 (the venv's `libonnxruntime.so.1.31.1` through \
         `ort` 2.0.0-rc.15), all graph optimizations; configurations: sequential executor with \
         1 and 2 intra-op threads, parallel executor (1 intra-op thread). The ratio is \
         Spillway's median over the best ORT median.\n- Spillway: `spillway-1lane` is the \
         default session (CPU, one lane); `spillway-2lane-auto` is \
         `Devices::cpu().with_cpu_lanes(2)` with `Placement::Auto`.\n- {}\n",
        meta.cpu,
        meta.cpus,
        meta.time,
        la(meta.load_start),
        la(meta.load_end),
        meta.warmup,
        meta.rounds,
        meta.seed,
        TRACT_NOTE
    );
    let labels: Vec<&str> = results
        .first()
        .map(|r| r.configs.iter().map(|c| c.label.as_str()).collect())
        .unwrap_or_default();
    let _ = writeln!(s, "## Time (ms, median / p90)\n");
    let tract = results.iter().any(|r| r.tract_best.is_some());
    let _ = writeln!(
        s,
        "| model | {} | ORT best | ratio 1-lane | ratio 2-lane |{}",
        labels.join(" | "),
        if tract {
            " tract best | best Spillway / tract best |"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "|---{}|---|---|---|{}",
        "|---".repeat(labels.len()),
        if tract { "---|---|" } else { "" }
    );
    for r in results {
        let cells: Vec<String> = r
            .configs
            .iter()
            .map(|c| match c.error {
                Some(_) => "failed".to_string(),
                None => format!("{} / {}", ms(c.median()), ms(c.quantile(0.9))),
            })
            .collect();
        let ratio = |i: usize| {
            r.configs
                .get(i)
                .and_then(|c| r.ratio(c))
                .map_or("—".to_string(), |v| format!("{v:.2}×"))
        };
        let best = |b: &Option<(String, f64)>| {
            b.as_ref()
                .map_or("—".to_string(), |(l, m)| format!("{m:.1} ({l})"))
        };
        let against_tract = if tract {
            let ours = r
                .configs
                .iter()
                .filter(|c| c.label.starts_with("spillway"))
                .filter_map(|c| r.tract_ratio(c))
                .min_by(f64::total_cmp)
                .map_or("—".to_string(), |v| format!("{v:.2}×"));
            format!(" {} | {ours} |", best(&r.tract_best))
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |{against_tract}",
            r.name,
            cells.join(" | "),
            best(&r.ort_best),
            ratio(0),
            ratio(1)
        );
    }
    let _ = writeln!(
        s,
        "\n## Correctness (largest relative L2 error over the outputs, against ORT sequential \
         1 thread)\n"
    );
    let _ = writeln!(s, "| model | inputs | {} |", labels.join(" | "));
    let _ = writeln!(s, "|---|---{}|", "|---".repeat(labels.len()));
    for r in results {
        let cells: Vec<String> = r.configs.iter().map(err_text).collect();
        let _ = writeln!(s, "| {} | {} | {} |", r.name, r.inputs, cells.join(" | "));
    }
    let _ = writeln!(
        s,
        "\n## Memory (MiB)\n\nSpillway's planned arena is `Session::memory_plan(..).peak_bytes` \
         (no-reuse total beside it); the measured peak is `run_with_stats` \
         (`peak_intermediate_bytes`, one-lane session only). RSS growth is the process's \
         resident set after loading and one run minus before; peak RSS growth is `VmHWM` \
         (reset through `/proc/self/clear_refs`{}) minus the RSS before loading. Weights count \
         in the RSS figures.\n",
        if meta.peak_reset_works {
            ""
        } else {
            ", which failed here: peaks are process-wide"
        }
    );
    let _ = writeln!(
        s,
        "| model | Spillway planned arena (naive) | Spillway measured peak | {} |",
        labels
            .iter()
            .map(|l| format!("{l} RSS / peak"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(s, "|---|---|---{}|", "|---".repeat(labels.len()));
    for r in results {
        let sp = r.configs.first();
        let planned = sp.map_or("—".to_string(), |c| {
            format!("{} ({})", mib(c.planned_peak), mib(c.planned_naive))
        });
        let measured = mib(sp.and_then(|c| c.measured_peak));
        let cells: Vec<String> = r
            .configs
            .iter()
            .map(|c| {
                format!(
                    "{} / {}",
                    mib(Some(c.rss_growth)),
                    mib(Some(c.peak_rss_growth))
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            r.name,
            planned,
            measured,
            cells.join(" | ")
        );
    }
    let _ = writeln!(
        s,
        "\n## Where Spillway's time goes\n\nEach node of the optimized graph timed alone by the \
         placement profiler (`spillway::profile::profile`, 1 warm-up, median of 3), summed by op \
         type; the top five.\n"
    );
    for r in results {
        if let Some(e) = &r.op_profile_error {
            let _ = writeln!(s, "- **{}**: profile failed: {e}", r.name);
        } else if !r.top_ops.is_empty() {
            let total: f64 = r.top_ops.iter().map(|o| o.ms).sum();
            let top: Vec<String> = r
                .top_ops
                .iter()
                .take(5)
                .map(|o| {
                    format!(
                        "{} ×{} {:.1} ms ({:.0}%)",
                        o.kind,
                        o.count,
                        o.ms,
                        o.share * 100.0
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "- **{}** (sum {total:.1} ms): {}",
                r.name,
                top.join(", ")
            );
        }
    }
    let failures: Vec<String> = results
        .iter()
        .flat_map(|r| {
            let model = r
                .error
                .iter()
                .map(move |e| format!("- **{}**: {e}", r.name));
            let configs = r.configs.iter().flat_map(move |c| {
                c.error
                    .iter()
                    .map(move |e| format!("- **{}** / {}: {e}", r.name, c.label))
                    .chain(
                        c.notes
                            .iter()
                            .map(move |n| format!("- **{}** / {} (note): {n}", r.name, c.label)),
                    )
            });
            model.chain(configs)
        })
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(s, "\n## Failures and notes\n\n{}", failures.join("\n"));
    }
    s
}

/// The JSON report: everything measured, raw times included.
pub fn json(meta: &Meta, results: &[ModelResult]) -> Value {
    let models: Vec<Value> = results
        .iter()
        .map(|r| {
            let configs: Vec<Value> = r
                .configs
                .iter()
                .map(|c| {
                    json!({
                        "label": c.label,
                        "error": c.error,
                        "load_ms": c.load_ms,
                        "first_run_ms": c.first_run_ms,
                        "times_ms": c.times_ms,
                        "median_ms": c.median(),
                        "p90_ms": c.quantile(0.9),
                        "ratio_to_ort_best": r.ratio(c),
                        "ratio_to_tract_best": r.tract_ratio(c),
                        "rel_l2_vs_ort_seq_1t": match &c.rel_l2 {
                            Some(Ok(e)) => json!(e),
                            Some(Err(e)) => json!({ "mismatch": e }),
                            None => Value::Null,
                        },
                        "rss_growth_bytes": c.rss_growth,
                        "peak_rss_growth_bytes": c.peak_rss_growth,
                        "planned_arena_bytes": c.planned_peak,
                        "planned_naive_bytes": c.planned_naive,
                        "measured_peak_intermediate_bytes": c.measured_peak,
                        "notes": c.notes,
                    })
                })
                .collect();
            let ops: Vec<Value> = r
                .top_ops
                .iter()
                .map(|o| json!({ "op": o.kind, "count": o.count, "ms": o.ms, "share": o.share }))
                .collect();
            json!({
                "model": r.name,
                "inputs": r.inputs,
                "error": r.error,
                "ort_best": r.ort_best.as_ref().map(|(l, m)| json!({ "config": l, "median_ms": m })),
                "tract_best": r.tract_best.as_ref().map(|(l, m)| json!({ "config": l, "median_ms": m })),
                "configs": configs,
                "op_time_by_type": ops,
                "op_profile_error": r.op_profile_error,
            })
        })
        .collect();
    json!({
        "date": meta.date,
        "start_utc": meta.time,
        "cpu": meta.cpu,
        "logical_cpus": meta.cpus,
        "load_average_start": meta.load_start,
        "load_average_end": meta.load_end,
        "rounds": meta.rounds,
        "warmup": meta.warmup,
        "seed": meta.seed,
        "onnxruntime": "1.31.1",
        "tract": TRACT_NOTE,
        "models": models,
    })
}
