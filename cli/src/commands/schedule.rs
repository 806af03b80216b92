//! `spillway schedule`: place a model on several devices, draw the schedule, run it, and put
//! the prediction beside the measurement.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use spillway::{Placement, RunOptions, Session, TraceEvent, chrome_trace_json};

use super::devices::DeviceArgs;
use super::engine_options::EngineArgs;
use super::inputs::{DimSizes, model_inputs};
use super::progress;

/// What `spillway schedule` does.
pub struct ScheduleArgs {
    /// The model.
    pub model: PathBuf,
    /// Devices.
    pub devices: DeviceArgs,
    /// The policy.
    pub policy: Placement,
    /// A cost model from `spillway profile`, instead of profiling now.
    pub cost_model: Option<PathBuf>,
    /// Where to write the Gantt SVG.
    pub gantt: Option<PathBuf>,
    /// Where to write the Chrome trace of one run.
    pub trace: Option<PathBuf>,
    /// Timed runs.
    pub repeat: usize,
    /// Sizes of symbolic dimensions.
    pub dims: DimSizes,
    /// Threads, layout and kernel algorithms.
    pub engine: EngineArgs,
}

/// Runs the command.
pub fn schedule(args: &ScheduleArgs) -> Result<()> {
    let devices = args.devices.devices()?;
    let mut builder = args
        .engine
        .apply(Session::builder())
        .with_devices(devices.clone())
        .with_placement(args.policy);
    if let Some(path) = &args.cost_model {
        builder = builder.with_cost_model(path);
    }
    // Building the session profiles the model (unless given a cost model) and places it.
    let building = progress::spinner(format!(
        "loading, profiling and placing {}",
        args.model.display()
    ));
    let session = builder
        .commit_from_file(&args.model)
        .with_context(|| format!("building a session for {}", args.model.display()));
    building.finish_and_clear();
    let session = session?;
    let Some(report) = session.placement_report() else {
        bail!(
            "the session has one CPU lane and no other device: nothing to place (use --lanes 2 or --virtual 1)"
        );
    };
    say!("{}", report.to_string().trim_end_matches('\n'));
    if let Some(path) = &args.gantt {
        write(path, &report.gantt_svg())?;
        say!("gantt chart written to {}", path.display());
    }
    let inputs = model_inputs(&session.inputs(), &[], &args.dims)?;
    let runs = args.repeat.max(1);
    // A warm-up, a traced run, then the timed ones.
    let bar = progress::bar(2 + runs as u64, "running", "runs");
    // The first run also packs every convolution's weights: warm up before the traced run.
    session.run(inputs.clone()).context("running (warm-up)")?;
    bar.inc(1);
    let (_, traced) = session
        .run_with_options(inputs.clone(), &RunOptions::default().with_trace(true))
        .context("running (traced)")?;
    bar.inc(1);
    let events = traced.trace.unwrap_or_default();
    let names: Vec<String> = devices
        .specs()
        .iter()
        .map(|s| s.device.to_string())
        .collect();
    if let Some(path) = &args.trace {
        write(path, &chrome_trace_json(&events, &names))?;
        bar.suspend(|| say!("chrome trace written to {}", path.display()));
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        session.run(inputs.clone()).context("running")?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
        bar.inc(1);
    }
    bar.finish_and_clear();
    times.sort_by(f64::total_cmp);
    let measured = times[times.len() / 2];
    say!();
    say!("{:<24} {:>14} {:>14}", "", "predicted µs", "measured µs");
    say!(
        "{:<24} {:>14.1} {:>14.1}   (measured: median wall time of {} runs)",
        "makespan",
        report.predicted_makespan_us,
        measured,
        times.len()
    );
    for (d, name) in names.iter().enumerate() {
        let predicted = report.simulation.devices.get(d).map_or(0.0, |s| s.busy_us);
        say!(
            "{:<24} {:>14.1} {:>14.1}",
            format!("{name} busy"),
            predicted,
            busy_us(&events, d)
        );
    }
    say!("(measured busy: time with at least one operator running, from the traced run)");
    Ok(())
}

/// Time during which at least one operator (not a copy) ran on `device`: the length of the
/// union of its intervals, like the simulator's `busy_us`.
pub fn busy_us(events: &[TraceEvent], device: usize) -> f64 {
    let mut spans: Vec<(f64, f64)> = events
        .iter()
        .filter(|e| e.device == device && e.op_type != "Copy")
        .map(|e| (e.start_us, e.start_us + e.duration_us))
        .collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (s, e) in spans {
        current = match current {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = current {
        total += ce - cs;
    }
    total
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(device: usize, start_us: f64, duration_us: f64, op_type: &str) -> TraceEvent {
        TraceEvent {
            name: String::new(),
            op_type: op_type.into(),
            device,
            lane: 0,
            start_us,
            duration_us,
        }
    }

    #[test]
    fn busy_time_is_the_union_of_operator_intervals() {
        // [0,10) ∪ [5,15) ∪ [20,25) = 15 + 5 on device 0; the copy and device 1 do not count.
        let events = [
            event(0, 0.0, 10.0, "Conv"),
            event(0, 5.0, 10.0, "Relu"),
            event(0, 20.0, 5.0, "Add"),
            event(0, 30.0, 100.0, "Copy"),
            event(1, 0.0, 7.0, "Conv"),
        ];
        assert_eq!(busy_us(&events, 0), 20.0);
        assert_eq!(busy_us(&events, 1), 7.0);
        assert_eq!(busy_us(&events, 2), 0.0);
    }
}
